#!/usr/bin/env python3
"""How Michel et al.'s importance would split N kept heads between the attention types when
ranked over all heads at once (the global pruning of their paper), from `analyze importance`
CSVs (attention,layer,head,importance; raw I_h, or with --normalize divided per layer):

    python3 experiments/l0-recovery/importance_split.py 72 36 \
        experiments/l0-recovery/records/importance-baseline/importance.csv \
        experiments/l0-recovery/records/importance-baseline/importance-normalized.csv

Prints, for each CSV and each N, the counts per type (enc_self/dec_self/enc_dec) of the N most
important heads. The study's Michel + fine-tuning runs do not rank globally: they keep, within
each type, the most important heads at the counts of an L0 run (`analyze compare
--export-michel`, recovery-N-1x's counts)."""
import collections
import csv
import sys

TYPES = ("enc_self", "dec_self", "enc_dec")


def main():
    counts = [a for a in sys.argv[1:] if a.isdigit()]
    files = [a for a in sys.argv[1:] if not a.isdigit()]
    if not counts or not files:
        sys.exit(__doc__)
    for path in files:
        rows = list(csv.DictReader(open(path)))
        rows.sort(key=lambda r: float(r["importance"]), reverse=True)
        for n in map(int, counts):
            if not 0 < n <= len(rows):
                sys.exit(f"{path}: N must be in 1..{len(rows)}, got {n}")
            c = collections.Counter(r["attention"] for r in rows[:n])
            print(f"{path}: {n} heads: " + "/".join(str(c[t]) for t in TYPES))


if __name__ == "__main__":
    main()
