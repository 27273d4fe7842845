#!/usr/bin/env python3
"""The mask that the average of several seeds' gates would choose, from the committed records:

    python3 experiments/l0-recovery/seed_average.py [--heads N] [--out DIR [--config-of RUN]] RUN...
    # e.g. esplit-72-2x esplit-72-2x-s2 esplit-72-2x-s3 --out OUT/avg-esplit-72-2x \
    #      --config-of rewind-72-1x

Each RUN (a records folder of the study, or a path) gives its gates' P(open) at its last
gates.jsonl record (after the mask is fixed the gates stop moving, so these are the values the
mask was chosen from). Their mean per head is ranked as the recipe's prune.target_split expected
ranks one run's gates: the N kept heads (default 72) split between the attention types by the
mean's expected open heads per type (N x E_t / sum E, largest remainder), then the largest mean
P(open) within each type. Prints, per type, the kept count and, for the encoder's self-attention,
the heads in order with their mean and each run's P(open); then how many kept heads the mask
shares with each run's own mask and with Michel + fine-tuning's (michel-72-2x). With --out, writes
DIR/head_removal.csv (the heads the mask removes, removal_step 0) and DIR/config.yaml (that of
--config-of RUN, default the first RUN), which `export-pruned --heads-of DIR` and mask_ft.sh take
as a finished run's mask and config: with --config-of rewind-72-1x, mask_ft.sh fine-tunes the mask
exactly as the `train` route's l0mask-rw-ft-72-* runs were (their config, their budget flags)."""
import argparse
import json
import math
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kept_heads  # noqa: E402  (the study's kept heads, from the records)

TYPES = kept_heads.TYPES


def folder_of(run):
    return run if os.path.isdir(run) else os.path.join(kept_heads.RECORDS, run)


def last_gates(run):
    path = os.path.join(folder_of(run), "gates.jsonl")
    if not os.path.exists(path):
        sys.exit(f"seed_average.py: {path} does not exist (a prune run's records folder expected)")
    last = None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                last = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"seed_average.py: {path} line {n}: not JSON ({e})")
    if last is None:
        sys.exit(f"seed_average.py: {path} is empty")
    return {(t, l, h): p for t, l, h, p, _ in last["heads"]}


def largest_remainder(total, weights):
    """Integer counts summing to total, proportional to weights (Hamilton's method)."""
    s = sum(weights.values())
    exact = {k: total * w / s for k, w in weights.items()}
    counts = {k: math.floor(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: exact[k] - counts[k], reverse=True)[: total - sum(counts.values())]:
        counts[k] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--heads", type=int, default=72)
    ap.add_argument("--out")
    ap.add_argument("--config-of", help="the run whose config.yaml --out copies (default: the first)")
    a = ap.parse_args()
    gates = [last_gates(r) for r in a.runs]
    heads = sorted(gates[0])
    for r, g in zip(a.runs, gates):
        if sorted(g) != heads:
            sys.exit(f"seed_average.py: {r} gates other heads than {a.runs[0]}")
    for r in a.runs:  # a mean over runs that targeted other head counts would mean nothing
        pruning = os.path.join(folder_of(r), "pruning.json")
        if os.path.exists(pruning):
            with open(pruning) as f:
                target = json.load(f).get("target_heads")
            if target and target != a.heads:
                sys.exit(f"seed_average.py: {r} targeted {target} heads, --heads is {a.heads}")
    mean = {h: sum(g[h] for g in gates) / len(gates) for h in heads}
    expected = {t: sum(p for h, p in mean.items() if h[0] == t) for t in TYPES}
    counts = largest_remainder(a.heads, expected)
    kept = set()
    for t in TYPES:
        ranked = sorted((h for h in heads if h[0] == t), key=lambda h: mean[h], reverse=True)
        kept |= set(ranked[: counts[t]])
    print(f"mean of {len(gates)} runs' P(open) at their last record: " + ", ".join(a.runs))
    print("expected open heads per type: " +
          ", ".join(f"{t} {expected[t]:.1f}" for t in TYPES) +
          f"; kept (of {a.heads}): " + "/".join(str(counts[t]) for t in TYPES))
    print("encoder self-attention heads by the mean (kept ones marked *), each run's P(open):")
    enc = sorted((h for h in heads if h[0] == "enc_self"), key=lambda h: mean[h], reverse=True)
    for h in enc[: counts["enc_self"] + 4]:
        runs = " ".join(f"{g[h]:.2f}" for g in gates)
        print(f"  {'*' if h in kept else ' '} L{h[1]} H{h[2]}  mean {mean[h]:.2f}  runs {runs}")
    name = {f"{t} L{l} H{h}" for t, l, h in kept}
    print("kept heads shared with each run's own mask and with michel-72-2x's:")
    for r in list(a.runs) + ["michel-72-2x"]:
        own = kept_heads.kept(os.path.abspath(r) if os.path.isdir(r) else r)
        if own is None:
            print(f"  {r:<24} (no mask in its records)")
        else:
            print(f"  {r:<24} {len(name & own)} of {len(own)}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        tmp = os.path.join(a.out, "head_removal.csv.tmp")
        with open(tmp, "w") as f:
            f.write("attention,layer,head,removal_step,p_open,gate,dev_bleu_at_removal\n")
            for h in heads:
                if h not in kept:
                    f.write(f"{h[0]},{h[1]},{h[2]},0,{mean[h]:.6f},0.000000,\n")
        os.replace(tmp, os.path.join(a.out, "head_removal.csv"))
        config = os.path.join(folder_of(a.config_of or a.runs[0]), "config.yaml")
        if not os.path.exists(config):
            sys.exit(f"seed_average.py: {config} does not exist (--config-of names a run's records)")
        shutil.copyfile(config, os.path.join(a.out, "config.yaml"))
        print(f"wrote {a.out}/head_removal.csv and config.yaml")


if __name__ == "__main__":
    main()
