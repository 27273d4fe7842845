#!/usr/bin/python3
"""Sums a Chrome trace (from `headcount bench train --profile FILE`) by operator name and prints
the top ones with their share of the step. Self time is not separated: nested operators count in
their parents too, so read the leaves (aten::mm, aten::bmm, ...) first."""
import collections
import json
import sys

events = json.load(open(sys.argv[1]))
if isinstance(events, dict):
    events = events.get('traceEvents', [])
total = collections.Counter()
calls = collections.Counter()
for e in events:
    if e.get('ph') == 'X':
        total[e['name']] += e.get('dur', 0)
        calls[e['name']] += 1
step = max(total.values())
for name, us in total.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 30):
    print(f'{us / 1000:9.1f} ms {100 * us / step:5.1f}% {calls[name]:6d}  {name}')
