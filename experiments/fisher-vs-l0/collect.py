#!/usr/bin/env python3
"""Collects the Fisher and L0 runs of experiments/fisher-vs-l0 into results.md's table.

    python3 experiments/fisher-vs-l0/collect.py ~/hc/fisher ~/hc/voita6k > table.md

Reads each run folder's pruning.json, summary.json and eval-{dev,test}.json (beam 4, full splits,
written by `headcount eval --checkpoint RUN/pruned --split S --out RUN/eval-S.json`).
"""
import json
import os
import sys

fisher_dir, l0_dir = sys.argv[1], sys.argv[2]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, NotADirectoryError):
        return None


def bleu(run, split, ref="ref1"):
    e = load(os.path.join(run, f"eval-{split}.json"))
    if not e or ref not in e.get("scores", {}):
        return ""
    return f"{e['scores'][ref]['bleu']:.2f}"


def speed(run):
    e = load(os.path.join(run, "eval-dev.json"))
    return f"{e['sentences_per_s']:.1f}" if e else ""


rows = []
for name in sorted(os.listdir(fisher_dir)):
    run = os.path.join(fisher_dir, name)
    p = load(os.path.join(run, "pruning.json"))
    if not p:
        continue
    heads = p["heads_after_e_d_de"]
    total = sum(int(x) for x in heads.split("/"))
    rows.append((total, "fisher" + ("" if p["reconstruct"] else " (no refit)"), name, heads,
                 p["parameters_after"], f"{p['decode_flops_fraction']:.3f}", bleu(run, "dev"),
                 bleu(run, "test"), bleu(run, "test", "all_refs"), speed(run),
                 f"{p['seconds']['pruning']:.0f} s"))
for name in ["all-l0", "all-l0.05", "all-l0.1", "all-l0.2", "all-l0.5", "all-l1"]:
    run = os.path.join(l0_dir, name)
    p = load(os.path.join(run, "pruning.json"))
    s = load(os.path.join(run, "summary.json"))
    if not p:
        continue
    heads = p["heads_after_e_d_de"]
    total = sum(int(x) for x in heads.split("/"))
    secs = f"{s['train_seconds'] / 60:.0f} min" if s and "train_seconds" in s else ""
    rows.append((total, f"L0 lambda {p['lambda']} + fine-tuning", name, heads,
                 p["parameters_after"], "", bleu(run, "dev"), bleu(run, "test"),
                 bleu(run, "test", "all_refs"), speed(run), secs))
rows.sort(key=lambda r: (-r[0], r[1]))
print("| heads | method | run | enc/dec/enc-dec | parameters | decoding FLOPs | dev BLEU | "
      "test BLEU (WEB) | test BLEU (WEB+KJV) | dev sent/s (beam 4) | pruning time |")
print("| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
