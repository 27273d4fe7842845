#!/usr/bin/env python3
"""Which heads each run of the study at 68-76 heads (72, and lambda mode's 70) kept, beside its BLEU, from the committed records:

    python3 experiments/l0-recovery/kept_heads.py [BUDGET]   # e.g. 2x (default: every budget)

A prune run's kept heads are those its head_removal.csv does not remove; Michel + fine-tuning's
are the heads its compare.json does not list in michel_removed_heads; the runs that fine-tune an
L0 run's mask by `train` (l0mask-rw-ft-72-*, mask_ft.sh) keep rewind-72-1x's heads, the
avg-esplit-72-* runs those of records/avg-esplit-72-2x-mask (seed_average.py's mask). For each run:
the kept heads per type (enc_self/dec_self/enc_dec), the encoder self-attention heads it kept,
whether it kept each of the baseline's two encoder self-attention heads of the highest Michel
importance (records/importance-baseline/importance.csv), how many kept heads it shares with
Michel + fine-tuning, and dev and test BLEU (beam 4, eval-SPLIT.json). Sorted by test BLEU."""
import csv
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "records")
TYPES = ("enc_self", "dec_self", "enc_dec")
ALL = {f"{t} L{l} H{h}" for t in TYPES for l in range(6) for h in range(8)}
MASK_OF = {"l0mask-rw-ft-72-": "rewind-72-1x",  # mask_ft.sh's source run, by name prefix
           "avg-esplit-72-": "avg-esplit-72-2x-mask"}  # seed_average.py's mask (item 46)


def removed_by_gates(run):
    with open(os.path.join(RECORDS, run, "head_removal.csv")) as f:
        return {f"{r['attention']} L{r['layer']} H{r['head']}" for r in csv.DictReader(f)
                if r["removal_step"] not in ("", "None")}


def kept(run):
    folder = os.path.join(RECORDS, run)
    if os.path.exists(os.path.join(folder, "compare.json")):
        with open(os.path.join(folder, "compare.json")) as f:
            return ALL - set(json.load(f)["michel_removed_heads"])
    for prefix, source in MASK_OF.items():
        if run.startswith(prefix):
            return ALL - removed_by_gates(source)
    if os.path.exists(os.path.join(folder, "head_removal.csv")):
        return ALL - removed_by_gates(run)
    return None


def bleu(run, split):
    with open(os.path.join(RECORDS, run, f"eval-{split}.json")) as f:
        return json.load(f)["scores"]["ref1"]["bleu"]


def main():
    budget = sys.argv[1] if len(sys.argv) > 1 else None
    with open(os.path.join(RECORDS, "importance-baseline", "importance.csv")) as f:
        enc = [r for r in csv.DictReader(f) if r["attention"] == "enc_self"]
    enc.sort(key=lambda r: float(r["importance"]), reverse=True)
    top = [f"enc_self L{r['layer']} H{r['head']}" for r in enc[:2]]
    michel = kept("michel-72-2x")
    rows = []
    for run in sorted(os.listdir(RECORDS)):
        m = re.fullmatch(r".*-(\d+x)(-s\d+)?", run)
        if not m or (budget and m.group(1) != budget):
            continue
        if not os.path.exists(os.path.join(RECORDS, run, "eval-test.json")):
            continue
        k = kept(run)
        if k is None or len(k) not in range(68, 77):
            continue
        split = "/".join(str(sum(h.startswith(t) for h in k)) for t in TYPES)
        enc_kept = " ".join(sorted(h[len("enc_self "):] for h in k if h.startswith("enc_self")))
        rows.append((bleu(run, "test"), run, split, enc_kept,
                     " ".join("yes" if h in k else "no" for h in top), len(k & michel),
                     bleu(run, "dev")))
    print(f"{'run':26} {'split':9} {'keeps ' + ', '.join(t[9:] for t in top):16} "
          f"{'shared with Michel':18} {'dev':>6} {'test':>6}  enc_self heads kept")
    for test, run, split, enc_kept, tops, shared, dev in sorted(rows, reverse=True):
        print(f"{run:26} {split:9} {tops:16} {shared:18d} {dev:6.2f} {test:6.2f}  {enc_kept}")


if __name__ == "__main__":
    main()
