#!/usr/bin/env python3
"""Where the absolute value of dL/dxi_h is taken, and what it does to the ranking of the heads:

    python3 experiments/l0-recovery/importance_units.py [BUDGET]   # e.g. 2x (default: 2x)

reads the baseline's importance per token (records/importance-baseline/importance.csv, METHODS.md's
I_h, what Michel + fine-tuning ranks by), per sentence (importance-sentence.csv) and over the whole
split, signed (importance-split.csv: minus the mean gradient, the data term an L0 gate follows at
gate 1), all of `headcount analyze importance --unit UNIT` on the dev set. Prints, per attention
type, the Spearman correlation between the units; each encoder self-attention head's rank (1 =
most important) under each unit with its values; and, for the runs of the study at 68-76 heads
of the budget, which encoder self-attention heads the gates kept with their ranks under each
unit, beside test BLEU. Last, how far the gates' own ranking follows each unit and how far it
repeats from one seed to the next: per type, the Spearman correlation of the gates' P(open) at the
step-200 evaluation (the target still ramping), at step 600 (after the mask is fixed in every
recipe run with the default ramp of 300 steps) and at each run's last record (its mask fixed:
frz-ramp900-esplit-72-2x-s2 ramps the target over 900 steps and fixes it at step 900) between the
seeds of the expected split (with training weights and, where recorded, with frozen ones) and
between each run and each unit; then how many encoder self-attention heads two of those runs both
kept."""
import csv
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
IMP = os.path.join(HERE, "records", "importance-baseline")
UNITS = (("token", "importance.csv"), ("sentence", "importance-sentence.csv"),
         ("split", "importance-split.csv"))
TYPES = ("enc_self", "dec_self", "enc_dec")

sys.path.insert(0, HERE)
import kept_heads  # noqa: E402  (the study's kept heads and BLEU, from the records)

GATE_RUNS = ("esplit-72-2x", "esplit-72-2x-s2", "esplit-72-2x-s3", "frz-esplit-72-2x",
             "frz-esplit-72-2x-s2", "frz-esplit-72-2x-s3", "frz-ramp900-esplit-72-2x-s2")
GATE_STEPS = (200, 600, "last")  # ramping; the default ramp's masks fixed; every mask fixed


def gates_at(run, step):
    """P(open) of every head at an evaluation step of gates.jsonl (or at its last record, step
    "last"), or None without the record. RUN: a records folder's name, or a path."""
    path = os.path.join(kept_heads.RECORDS, run, "gates.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        records = [json.loads(line) for line in f]
    chosen = records[-1:] if step == "last" else [j for j in records if j["step"] == step][:1]
    return {f"{t} L{l} H{h}": p for t, l, h, p, _ in chosen[0]["heads"]} if chosen else None


def read(name):
    with open(os.path.join(IMP, name)) as f:
        return {f"{r['attention']} L{r['layer']} H{r['head']}": float(r["importance"])
                for r in csv.DictReader(f)}


def ranks(values, heads):
    order = sorted(heads, key=lambda h: values[h], reverse=True)
    return {h: i + 1 for i, h in enumerate(order)}


def spearman(a, b, heads):
    ra, rb = ranks(a, heads), ranks(b, heads)
    n = len(heads)
    return 1 - 6 * sum((ra[h] - rb[h]) ** 2 for h in heads) / (n * (n * n - 1))


def main():
    budget = sys.argv[1] if len(sys.argv) > 1 else "2x"
    vals = {u: read(f) for u, f in UNITS}
    names = [u for u, _ in UNITS]
    print("Spearman between the units, within each attention type (48 heads):")
    for t in TYPES:
        heads = [h for h in vals["token"] if h.startswith(t + " ")]
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        print(f"  {t}: " + ", ".join(f"{a}/{b} {spearman(vals[a], vals[b], heads):+.2f}"
                                     for a, b in pairs))
    enc = [h for h in vals["token"] if h.startswith("enc_self ")]
    rk = {u: ranks(vals[u], enc) for u in names}
    print("\nEncoder self-attention heads by rank per token (rank and value under each unit):")
    print("  head            " + "".join(f"{u:>20}" for u in names))
    for h in sorted(enc, key=lambda h: rk["token"][h])[:12]:
        print(f"  {h:<16}" + "".join(f"{rk[u][h]:>8} ({vals[u][h]:+.4f})" for u in names))
    print(f"\n{budget} runs at 68-76 heads: the encoder self-attention heads kept, with their "
          "ranks (token/sentence/split), and test BLEU")
    rows = []
    for run in sorted(os.listdir(kept_heads.RECORDS)):
        m = re.fullmatch(r".*-(\d+x)(-s\d+)?", run)
        if not m or m.group(1) != budget:
            continue
        k = kept_heads.kept(run)
        if k is None or not 68 <= len(k) <= 76:
            continue
        try:
            test = kept_heads.bleu(run, "test")
        except FileNotFoundError:
            continue
        e = sorted((h for h in k if h.startswith("enc_self ")), key=lambda h: rk["token"][h])
        rows.append((test, run, e))
    for test, run, e in sorted(rows, reverse=True):
        cells = ", ".join(f"{h[9:]} {'/'.join(str(rk[u][h]) for u in names)}" for h in e)
        print(f"  {test:6.2f}  {run:<24} {cells}")

    for step in GATE_STEPS:
        gates = {r: g for r in GATE_RUNS if (g := gates_at(r, step)) is not None}
        runs = list(gates)
        when = "at each run's last record" if step == "last" else f"at step {step}"
        print(f"\nThe gates' P(open) {when}, Spearman within each type: between runs, "
              "and each run against each unit")
        for t in TYPES:
            heads = [h for h in vals["token"] if h.startswith(t + " ")]
            print(f"  {t}:")
            for i, a in enumerate(runs):
                others = " ".join(f"{spearman(gates[a], gates[b], heads):+.2f}"
                                  for b in runs[i + 1:])
                units = " ".join(f"{u} {spearman(gates[a], vals[u], heads):+.2f}" for u in names)
                print(f"    {a:<22} vs units: {units}" +
                      (f"; vs the runs below: {others}" if others else ""))
    print("\nEncoder self-attention heads kept by both of two runs (of the first's / the second's):")
    kept = {r: {h for h in kept_heads.kept(r) if h.startswith("enc_self ")} for r in runs}
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            print(f"  {a:<22} {b:<22} {len(kept[a] & kept[b])} ({len(kept[a])}/{len(kept[b])})")


if __name__ == "__main__":
    main()
