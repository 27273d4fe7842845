#!/usr/bin/env python3
"""How Michel et al.'s importance would split N kept heads between the attention types when
ranked over all heads at once (the global pruning of their paper), from an `analyze importance`
CSV (attention,layer,head,importance; raw I_h):

    python3 experiments/l0-recovery/importance_split.py \
        experiments/l0-recovery/records/importance-baseline/importance.csv 72 36

Prints, for each N, the counts per type (enc_self/dec_self/enc_dec) of the N most important heads
by raw I_h and by I_h divided by its layer's L2 norm (Michel et al.'s layer normalisation, as
`analyze importance --normalize`). The study's Michel + fine-tuning runs do not rank globally:
they keep, within each type, the most important heads at the counts of an L0 run
(`analyze compare --export-michel`, recovery-N-1x's counts)."""
import collections
import csv
import math
import sys

TYPES = ("enc_self", "dec_self", "enc_dec")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    for r in rows:
        r["importance"] = float(r["importance"])
    norm = collections.defaultdict(float)
    for r in rows:
        norm[(r["attention"], r["layer"])] += r["importance"] ** 2
    scores = {
        "raw I_h": lambda r: r["importance"],
        "layer-normalised I_h": lambda r: r["importance"] / math.sqrt(norm[(r["attention"], r["layer"])]),
    }
    for n in map(int, sys.argv[2:]):
        if not 0 < n <= len(rows):
            sys.exit(f"N must be in 1..{len(rows)}, got {n}")
        for name, key in scores.items():
            top = sorted(rows, key=key, reverse=True)[:n]
            c = collections.Counter(r["attention"] for r in top)
            print(f"{n} heads, {name}: " + "/".join(str(c[t]) for t in TYPES))


if __name__ == "__main__":
    main()
