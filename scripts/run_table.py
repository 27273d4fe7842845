#!/usr/bin/python3
"""Prints a run's dev evaluations (metrics.jsonl) as a Markdown table: step, epoch, dev loss,
dev BLEU, dev chrF, training minutes. Usage: scripts/run_table.py RUN_DIR"""
import json
import sys

print('| step | epoch | dev loss | dev BLEU | dev chrF | training minutes |')
print('| ---: | ---: | ---: | ---: | ---: | ---: |')
with open(f'{sys.argv[1]}/metrics.jsonl') as f:
    for line in f:
        j = json.loads(line)
        if j.get('event') != 'eval':
            continue
        print(f"| {j['step']} | {j['epoch']} | {j['dev_loss']:.3f} | {j['dev_bleu']:.2f} | "
              f"{j['dev_chrf']:.2f} | {j['elapsed_s'] / 60:.0f} |")
