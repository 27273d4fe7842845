#!/usr/bin/python3
"""Prints runs' dev evaluations (their metrics.jsonl) as Markdown tables.

  scripts/run_table.py RUN_DIR
      one row per evaluation: step, epoch, learning rate and training loss logged at that step,
      dev loss, dev BLEU, dev chrF, training minutes; for a prune run the heads open
      (enc/dec/enc-dec, eval gates) and the expected number of open gated heads instead of
      the epoch, learning rate and loss.
  scripts/run_table.py --curve LABEL=RUN_DIR [LABEL=RUN_DIR ...]
      one row per run and one column per evaluated step: the dev BLEU curves side by side (a
      step a run did not evaluate reads '-')."""
import argparse
import json
import signal
import sys


def read_metrics(run):
    """The run's eval lines and its train lines by step; exits with a message naming the file."""
    path = f'{run}/metrics.jsonl'
    evals, train = [], {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                try:
                    j = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by an interruption
                    continue
                if j.get('event') == 'eval':
                    for key in ('step', 'dev_bleu'):
                        if key not in j:
                            sys.exit(f'{path}:{n}: an eval line without "{key}"')
                    evals.append(j)
                elif j.get('event') == 'train' and 'step' in j:
                    train[j['step']] = j
    except OSError as e:
        sys.exit(f'run_table.py: cannot read {path}: {e.strerror} (expected a train or prune run '
                 'folder)')
    return evals, train


def one_run(run):
    rows, train = read_metrics(run)

    def lr_loss(step):
        t = train.get(step)
        return (f"{t['lr']:.2e}", f"{t['loss']:.3f}") if t else ('-', '-')

    prune = any('heads_e_d_de' in j for j in rows)
    if prune:
        print('| step | heads open e/d/d-e | expected open (gated) | dev loss | dev BLEU | dev chrF '
              '| training minutes |')
        print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    else:
        print('| step | epoch | learning rate | train loss | dev loss | dev BLEU | dev chrF | '
              'training minutes |')
        print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for j in rows:
        if prune:
            print(f"| {j['step']} | {j.get('heads_e_d_de', '-')} | {j.get('expected_open', 0):.1f} | "
                  f"{j['dev_loss']:.3f} | {j['dev_bleu']:.2f} | {j['dev_chrf']:.2f} | "
                  f"{j['elapsed_s'] / 60:.0f} |")
        else:
            lr, loss = lr_loss(j['step'])
            print(f"| {j['step']} | {j['epoch']} | {lr} | {loss} | {j['dev_loss']:.3f} | "
                  f"{j['dev_bleu']:.2f} | {j['dev_chrf']:.2f} | {j['elapsed_s'] / 60:.0f} |")


def curves(specs):
    runs = []
    for spec in specs:
        label, sep, run = spec.partition('=')
        if not sep or not label or not run:
            sys.exit(f'run_table.py: --curve takes LABEL=RUN_DIR, got "{spec}"')
        evals, _ = read_metrics(run)
        # A resumed run may evaluate a step twice; the last evaluation stands.
        runs.append((label, {j['step']: j['dev_bleu'] for j in evals}))
    steps = sorted({s for _, c in runs for s in c})
    print('| step | ' + ' | '.join(str(s) for s in steps) + ' |')
    print('| --- | ' + ' | '.join('---:' for _ in steps) + ' |')
    for label, c in runs:
        print(f'| {label} | ' + ' | '.join(f'{c[s]:.2f}' if s in c else '-' for s in steps) + ' |')


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split('\n', 1)[1])
    p.add_argument('runs', nargs='+', metavar='RUN_DIR or LABEL=RUN_DIR')
    p.add_argument('--curve', action='store_true',
                   help='dev BLEU curves of several runs side by side')
    a = p.parse_args()
    if a.curve:
        curves(a.runs)
    elif len(a.runs) != 1:
        p.error('one RUN_DIR without --curve')
    else:
        one_run(a.runs[0])


if __name__ == '__main__':
    main()
