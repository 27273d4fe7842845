#!/usr/bin/python3
"""Prints a run's dev evaluations (metrics.jsonl) as a Markdown table: step, epoch, dev loss,
dev BLEU, dev chrF, training minutes; the learning rate and training loss logged at that step; for
a prune run also the heads open (enc/dec/enc-dec, eval
gates) and the expected number of open gated heads. Usage: scripts/run_table.py RUN_DIR"""
import json
import sys

rows = []
train = {}  # step -> the training log line at that step (learning rate, loss)
with open(f'{sys.argv[1]}/metrics.jsonl') as f:
    for line in f:
        try:
            j = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by an interruption
            continue
        if j.get('event') == 'eval':
            rows.append(j)
        elif j.get('event') == 'train':
            train[j['step']] = j


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
