#!/usr/bin/python3
"""Prints a prune run's evaluations as a Markdown table (step, heads open, expected open heads,
dev loss, BLEU, chrF, training minutes) from RUN/metrics.jsonl and RUN/gates.jsonl.
   usage: scripts/run_evals.py RUN"""
import json
import sys

run = sys.argv[1]
evals = {}
for line in open(f'{run}/metrics.jsonl'):
    if line.strip():
        j = json.loads(line)
        if j.get('event') == 'eval':
            evals[j['step']] = j
print('| step | heads open e/d/d-e | expected open (gated) | dev loss | dev BLEU | dev chrF | training minutes |')
print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
gates = {}  # the last record of each step (a run's final evaluation repeats its last step)
for line in open(f'{run}/gates.jsonl'):
    if line.strip():
        g = json.loads(line)
        gates[g['step']] = g
for step, g in sorted(gates.items()):
    open_by = {'enc_self': 0, 'dec_self': 0, 'enc_dec': 0}
    expected = 0.0
    for kind, layer, head, p_open, gate in g['heads']:
        open_by[kind] += gate > 0
        expected += p_open
    e = evals.get(step, {})
    heads = '/'.join(str(open_by[k]) for k in ('enc_self', 'dec_self', 'enc_dec'))
    print(f"| {step} | {heads} | {expected:.1f} | {e.get('dev_loss', float('nan')):.3f} | "
          f"{g['dev_bleu']:.2f} | {e.get('dev_chrf', float('nan')):.2f} | "
          f"{e.get('elapsed_s', 0) / 60:.0f} |")
