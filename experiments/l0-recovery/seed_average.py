#!/usr/bin/env python3
"""The mask that the average of several seeds' gates would choose, from the committed records:

    python3 experiments/l0-recovery/seed_average.py [--heads N] [--out DIR [--config-of RUN]] RUN...
    # e.g. esplit-72-2x esplit-72-2x-s2 esplit-72-2x-s3 --out OUT/avg-esplit-72-2x \
    #      --config-of rewind-72-1x

Each RUN (a records folder of the study, or a path) gives its gates' P(open) at its last
gates.jsonl record (after the mask is fixed the gates stop moving, so these are the values the
mask was chosen from). Their mean per head is ranked as the recipe's prune.target_split expected
ranks one run's gates: the N kept heads (default 72) split between the attention types by the
mean's expected open heads per type (N x E_t / sum E, largest remainder: split_at_fix.py's
split_by_expected, as the C++ rule), then the largest mean
P(open) within each type. Prints, per type, the kept count and, for the encoder's self-attention,
the heads in order with their mean and each run's P(open); then how many kept heads the mask
shares with each run's own mask and with Michel + fine-tuning's (michel-72-2x). With --out, writes
DIR/head_removal.csv (the heads the mask removes, removal_step 0) and DIR/config.yaml (that of
--config-of RUN, default the first RUN), which `export-pruned --heads-of DIR` and mask_ft.sh take
as a finished run's mask and config: with --config-of rewind-72-1x, mask_ft.sh fine-tunes the mask
exactly as the `train` route's l0mask-rw-ft-72-* runs were (their config, their budget flags)."""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import importance_units  # noqa: E402  (gates_at: a run's P(open) from its gates.jsonl)
import kept_heads  # noqa: E402  (the study's kept heads, from the records)
from split_at_fix import split_by_expected  # noqa: E402  (the expected split, as the C++ rule)

TYPES = kept_heads.TYPES


def folder_of(run):
    return os.path.abspath(run) if os.path.isdir(run) else os.path.join(kept_heads.RECORDS, run)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--heads", type=int, default=72)
    ap.add_argument("--out")
    ap.add_argument("--config-of",
                    help="the run whose config.yaml --out copies (default: the first)")
    a = ap.parse_args()
    gates = []
    for r in a.runs:
        g = importance_units.gates_at(folder_of(r), "last")
        if g is None:
            sys.exit(f"seed_average.py: {folder_of(r)} has no gates.jsonl record (a prune run's "
                     "records folder expected)")
        gates.append(g)
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
    of_type = {t: [h for h in heads if h.startswith(t + " ")] for t in TYPES}
    expected = {t: sum(mean[h] for h in of_type[t]) for t in TYPES}
    counts = dict(zip(TYPES, split_by_expected([expected[t] for t in TYPES],
                                               [len(of_type[t]) for t in TYPES], a.heads)))
    kept = set()
    for t in TYPES:
        kept |= set(sorted(of_type[t], key=lambda h: mean[h], reverse=True)[: counts[t]])
    print(f"mean of {len(gates)} runs' P(open) at their last record: " + ", ".join(a.runs))
    print("expected open heads per type: " +
          ", ".join(f"{t} {expected[t]:.1f}" for t in TYPES) +
          f"; kept (of {a.heads}): " + "/".join(str(counts[t]) for t in TYPES))
    print("encoder self-attention heads by the mean (kept ones marked *), each run's P(open):")
    enc = sorted(of_type["enc_self"], key=lambda h: mean[h], reverse=True)
    for h in enc[: counts["enc_self"] + 4]:
        runs = " ".join(f"{g[h]:.2f}" for g in gates)
        print(f"  {'*' if h in kept else ' '} {h[9:]}  mean {mean[h]:.2f}  runs {runs}")
    print("kept heads shared with each run's own mask and with michel-72-2x's:")
    for r in list(a.runs) + ["michel-72-2x"]:
        own = kept_heads.kept(folder_of(r))
        if own is None:
            print(f"  {r:<24} (no mask in its records)")
        else:
            print(f"  {r:<24} {len(kept & own)} of {len(own)}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        tmp = os.path.join(a.out, "head_removal.csv.tmp")
        with open(tmp, "w") as f:
            f.write("attention,layer,head,removal_step,p_open,gate,dev_bleu_at_removal\n")
            for h in heads:
                if h not in kept:
                    t, l, k = h.split()  # "enc_self L0 H2"
                    f.write(f"{t},{l[1:]},{k[1:]},0,{mean[h]:.6f},0.000000,\n")
        os.replace(tmp, os.path.join(a.out, "head_removal.csv"))
        config = os.path.join(folder_of(a.config_of or a.runs[0]), "config.yaml")
        if not os.path.exists(config):
            sys.exit(f"seed_average.py: {config} does not exist "
                     "(--config-of names a run's records)")
        shutil.copyfile(config, os.path.join(a.out, "config.yaml"))
        print(f"wrote {a.out}/head_removal.csv and config.yaml")


if __name__ == "__main__":
    main()
