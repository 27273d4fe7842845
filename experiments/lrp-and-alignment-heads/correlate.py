#!/usr/bin/env python3
"""Spearman's rho of the LRP relevance of records/relevance (one analysis of the baseline) with
the removal order of other prune runs, as `headcount analyze relevance --run RUN` computes it for
one run (removal step per gated head; kept heads after every removal; average ranks for ties).
Usage: correlate.py RELEVANCE_CSV RUN_DIR [RUN_DIR ...]"""
import csv
import sys


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


rel = {(r["attention"], r["layer"], r["head"]): float(r["relevance"])
       for r in csv.DictReader(open(sys.argv[1]))}
print("| run | rho all | enc_self | dec_self | enc_dec | mean relevance kept / removed (enc_self, dec_self, enc_dec) |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
for run in sys.argv[2:]:
    rows = list(csv.DictReader(open(run + "/head_removal.csv")))
    steps = [float(r["removal_step"]) if r["removal_step"] else None for r in rows]
    last = max([s for s in steps if s is not None], default=0)
    steps = [s if s is not None else last + 1 for s in steps]
    keys = [(r["attention"], r["layer"], r["head"]) for r in rows]
    cells = []
    for t in [None, "enc_self", "dec_self", "enc_dec"]:
        idx = [i for i, k in enumerate(keys) if t is None or k[0] == t]
        cells.append(f"{spearman([rel[keys[i]] for i in idx], [steps[i] for i in idx]):+.3f}")
    means = []
    for t in ["enc_self", "dec_self", "enc_dec"]:
        kept = [rel[k] for k, s in zip(keys, steps) if k[0] == t and s > last]
        gone = [rel[k] for k, s in zip(keys, steps) if k[0] == t and s <= last]
        f = lambda v: f"{sum(v) / len(v):.3f}" if v else "-"
        means.append(f"{f(kept)} / {f(gone)}")
    print(f"| {run.rstrip('/').split('/')[-1]} | " + " | ".join(cells) + " | " + ", ".join(means) + " |")
