#!/usr/bin/env python3
"""How a target run's one total was split between the attention types when its mask was fixed,
against the split by the gates' expected open heads (prune.target_split expected), from the run's
gates.jsonl (each evaluation's P_open and gate value of every head) and metrics.jsonl:

  fixed at        the step the mask was fixed at (the first evaluation with mask_fixed); the
                  gates' log_alpha, and so P_open, stay as they were at that step
  E[open] e/d/de  the sum of P_open per type (enc_self / dec_self / enc_dec) at the fixing step
  kept (top)      the split the run kept: the N largest log_alpha over all gated heads
                  (prune.target_split top; P_open is monotone in log_alpha)
  by E[open]      N x E_t / sum E, rounded by largest remainder (prune.target_split expected)
  undecided       at the last evaluation before the fix: heads whose eval gate was strictly
                  between 0 and 1
  P_open kept     the smallest P_open among the kept heads of each type ('-': none kept)

    python3 experiments/l0-recovery/split_at_fix.py N RUN [RUN ...]
"""
import json
import math
import sys

TYPES = ("enc_self", "dec_self", "enc_dec")


def split_by_expected(expected, sizes, n):
    """Largest remainder with quotas capped at the group sizes (as split_by_expected in C++)."""
    expected = [max(e, 0.0) for e in expected]
    if sum(expected) <= 0:
        expected = [float(s) for s in sizes]
    capped = [False] * len(sizes)
    quota = [0.0] * len(sizes)
    again = True
    while again:
        again = False
        left = n - sum(s for s, c in zip(sizes, capped) if c)
        mass = sum(e for e, c in zip(expected, capped) if not c)
        for i in range(len(sizes)):
            if capped[i]:
                continue
            quota[i] = left * expected[i] / mass if mass > 0 else 0.0
            if quota[i] > sizes[i]:
                quota[i], capped[i], again = float(sizes[i]), True, True
    counts = [min(s, math.floor(q)) for s, q in zip(sizes, quota)]
    order = sorted(range(len(sizes)), key=lambda i: -(quota[i] - math.floor(quota[i])))
    while sum(counts) < n:
        for i in order:
            if sum(counts) < n and counts[i] < sizes[i]:
                counts[i] += 1
    return counts


def main():
    n = int(sys.argv[1])
    print("| run | fixed at | E[open] e/d/de | kept (top) | by E[open] | undecided before | "
          "P_open kept, smallest e/d/de |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for run in sys.argv[2:]:
        fixed_at = None
        for line in open(f"{run}/metrics.jsonl"):
            j = json.loads(line)
            if j.get("event") == "eval" and j.get("mask_fixed"):
                fixed_at = j["step"]
                break
        snaps = [json.loads(line) for line in open(f"{run}/gates.jsonl")]
        at = next(s for s in snaps if s["step"] == fixed_at)
        before = [s for s in snaps if s["step"] < fixed_at][-1]
        heads = at["heads"]
        e = [sum(h[3] for h in heads if h[0] == t) for t in TYPES]
        sizes = [sum(1 for h in heads if h[0] == t) for t in TYPES]
        kept = [sum(1 for h in heads if h[0] == t and h[4] > 0) for t in TYPES]
        smallest = [min((h[3] for h in heads if h[0] == t and h[4] > 0), default=None)
                    for t in TYPES]
        undecided = sum(1 for h in before["heads"] if 0 < h[4] < 1)
        print(f"| {run.rstrip('/').split('/')[-1]} | {fixed_at} (eval) | "
              f"{e[0]:.2f}/{e[1]:.2f}/{e[2]:.2f} | {'/'.join(map(str, kept))} | "
              f"{'/'.join(map(str, split_by_expected(e, sizes, n)))} | {undecided} (step "
              f"{before['step']}) | "
              f"{'/'.join('-' if x is None else f'{x:.2f}' for x in smallest)} |")


if __name__ == "__main__":
    main()
