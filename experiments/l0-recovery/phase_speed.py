#!/usr/bin/env python3
"""The speed of a recipe run's gated steps against its own recovery steps, from its records.

    python3 experiments/l0-recovery/phase_speed.py [RUN...]

For each run in records/ (default: the recipe's 72-head 2x runs with the expected split, with
training and with frozen weights) it prints the step at which the mask was fixed (the line of
train.log that says so), the median target tokens per second of the train events up
to that step and after it (the first 50 recovery steps left out: the logging window straddles the
fix), and their ratio. Both medians come from the same run on the same machine, so the ratio
compares the two phases without comparing machines.
"""
import json
import pathlib
import re
import statistics
import sys

import kept_heads

RECORDS = pathlib.Path(kept_heads.RECORDS)
DEFAULT = ["esplit-72-2x", "esplit-72-2x-s2", "esplit-72-2x-s3",
           "frz-esplit-72-2x", "frz-esplit-72-2x-s2", "frz-esplit-72-2x-s3"]
FIXED = re.compile(r"step (\d+): the mask is fixed")


def phase_speeds(run):
    folder = RECORDS / run
    events = [json.loads(line) for line in (folder / "metrics.jsonl").open()]
    found = FIXED.search((folder / "train.log").read_text())
    if found is None:
        sys.exit(f"{folder / 'train.log'}: no 'step N: the mask is fixed' line (not a run with "
                 "recovery steps)")
    fixed = int(found.group(1))
    train = [e for e in events if e.get("event") == "train"]
    gated = [e["tgt_tokens_per_s"] for e in train if e["step"] <= fixed]
    recovery = [e["tgt_tokens_per_s"] for e in train if e["step"] > fixed + 50]
    precision = json.loads((folder / "summary.json").read_text()).get("precision", "?")
    return fixed, statistics.median(gated), statistics.median(recovery), precision


def main(runs):
    print(f"{'run':24} {'fixed at':>8} {'gated tok/s':>11} {'recovery tok/s':>14} {'ratio':>6}  precision")
    for run in runs:
        if not (RECORDS / run / "metrics.jsonl").exists():
            print(f"{run:24} (no records)")
            continue
        fixed, gated, recovery, precision = phase_speeds(run)
        print(f"{run:24} {fixed:8d} {gated:11.0f} {recovery:14.0f} {gated / recovery:6.2f}  {precision}")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
