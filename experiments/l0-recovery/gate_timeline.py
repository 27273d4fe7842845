#!/usr/bin/env python3
"""Per evaluation of a prune run's records: dev BLEU (300 dev sentences, the gated model with its
deterministic gates), the expected number of open heads E = sum P_open, the target at that step
(target mode), heads open by their eval gates (enc/dec/enc-dec); then the exported model's dev
BLEU on the same sentences (pruning.json's dev_bleu_end, the final mask).

    python3 experiments/l0-recovery/gate_timeline.py RUN [RUN ...]
"""
import json
import sys

for run in sys.argv[1:]:
    print(f"== {run}")
    print("step  dev_bleu  E[open]  target  open_e/d/de  event")
    for line in open(f"{run}/metrics.jsonl"):
        j = json.loads(line)
        if j.get("event") not in ("eval", "final"):
            continue
        target = j.get("target_now")
        print(f"{j['step']:>4}  {j['dev_bleu']:8.2f}  {j.get('expected_open', 0):7.1f}  "
              f"{'' if target is None else f'{target:6.1f}':>6}  {j.get('heads_e_d_de', ''):>11}  "
              f"{j['event']}{' (mask fixed)' if j.get('mask_fixed') else ''}")
    p = json.load(open(f"{run}/pruning.json"))
    print(f"export: {p['heads_after_e_d_de']}, dev BLEU {p['dev_bleu_end']:.2f} "
          f"(start {p['dev_bleu_start']:.2f})")
