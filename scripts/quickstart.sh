#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on the embedded default
# corpus (Spanish->English Bible from Debian's SWORD modules): prepare the corpus, train the
# vocabulary, train a small baseline, prune it under three lambdas beside a lambda-0 control (a
# sweep), and print the report: BLEU against the heads kept, against the baseline and against the
# control. Idempotent: what is done is reused, and the same command resumes interrupted runs.
#   QUICKSTART_STEPS=N scales the baseline's steps (default: configs/quickstart.yaml) for a faster look.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
hc=./build/headcount
start=$(date +%s)
base_cfg=(configs/bible.yaml configs/quickstart.yaml)
steps=()
if [ -n "${QUICKSTART_STEPS:-}" ]; then steps=(--set train.max_steps="$QUICKSTART_STEPS"); fi
echo "[quickstart] corpus statistics"
$hc data stats configs/bible.yaml
echo "[quickstart] vocabulary"
$hc vocab configs/bible.yaml
echo "[quickstart] small baseline: runs/quickstart/base"
if [ -f runs/quickstart/base/summary.json ]; then
  echo "[quickstart] runs/quickstart/base: done"
else
  $hc train "${base_cfg[@]}" "${steps[@]}" --out runs/quickstart/base
fi
echo "[quickstart] pruning sweep (configs/quickstart-sweep.yaml): runs/quickstart/sweep"
$hc sweep configs/quickstart-sweep.yaml --out runs/quickstart/sweep
echo
echo "[quickstart] report: BLEU against heads kept (e/d/d-e = encoder / decoder / decoder-encoder)"
$hc report runs/quickstart/sweep
echo "[quickstart] finished in $(( $(date +%s) - start )) s (after set-up and build)"
