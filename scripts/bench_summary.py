#!/usr/bin/env python3
"""Summarises alternating `headcount bench train --json` / pytorch_transformer_bench.py runs.

    python3 scripts/bench_summary.py FILE...

Each line of FILE: "SHAPE round R IMPL {json}" (as scripts/gpu_check.sh writes them). Prints, per
shape and precision, each implementation's median target tokens/s with its range over the rounds,
and headcount's median against PyTorch's (the ratio of medians, and the range of the per-round
ratios: the rounds alternate the two programs, so a round's ratio compares runs seconds apart).
"""
import collections
import json
import statistics
import sys


def main(paths):
    runs = collections.defaultdict(dict)  # (shape, precision) -> {(round, impl): tokens/s}
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.split(" ", 4)
                if len(parts) < 5 or parts[1] != "round" or not parts[4].startswith("{"):
                    continue
                shape, _, rnd, impl, payload = parts
                j = json.loads(payload)
                runs[(shape, j["precision"])][(int(rnd), impl)] = j["target_tokens_per_s"]
    print("| shape | precision | headcount tok/s (range) | PyTorch tok/s (range) | ratio (per-round range) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (shape, precision), r in sorted(runs.items()):
        hc = [v for (_, i), v in r.items() if i == "headcount"]
        py = [v for (_, i), v in r.items() if i == "pytorch"]
        rounds = sorted({k for k, _ in r})
        ratios = [r[(k, "headcount")] / r[(k, "pytorch")] for k in rounds
                  if (k, "headcount") in r and (k, "pytorch") in r]
        if not hc or not py:
            continue
        print(f"| {shape} | {precision} | {statistics.median(hc):,.0f} ({min(hc):,.0f}-{max(hc):,.0f}) "
              f"| {statistics.median(py):,.0f} ({min(py):,.0f}-{max(py):,.0f}) "
              f"| {statistics.median(hc) / statistics.median(py):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    main(sys.argv[1:])
