#!/usr/bin/env bash
# Copies the records (no checkpoints) of a `headcount reproduce` folder OUT into DEST:
#   experiments/voita-table-cpu/save_reproduce.sh ~/hc/quick experiments/voita-table-cpu/quick
set -euo pipefail
out=${1:?usage: save_reproduce.sh OUT DEST}
dest=${2:?usage: save_reproduce.sh OUT DEST}
mkdir -p "$dest/steps"
cp "$out"/results.md "$out"/results.json "$dest/"
cp "$out"/steps/*.json "$dest/steps/"
mkdir -p "$dest/baseline"
cp "$out"/baseline/eval-*.json "$out"/baseline/eval-*.hyp.txt "$dest/baseline/"
for s in "$out"/seed-*; do
  sd=$dest/$(basename "$s")
  mkdir -p "$sd"
  cp "$s"/sweep.json "$s"/results.md "$s"/results.csv "$sd/"
  for run in "$s"/*/; do
    [ -f "$run/summary.json" ] || continue
    name=$(basename "$run")
    bash scripts/save_records.sh "$run" "$sd/$name" "$run/log.txt" > /dev/null
    if [ -d "$run/scratch" ]; then
      bash scripts/save_records.sh "$run/scratch" "$sd/$name/scratch" "$run/scratch/log.txt" > /dev/null
    fi
    if [ -d "$run/compare-ft" ]; then
      mkdir -p "$sd/$name/compare-ft"
      cp "$run"/compare-ft/*.json "$run"/compare-ft/*.log "$run"/compare-ft/*.csv \
        "$run"/compare-ft/eval-*.hyp.txt "$sd/$name/compare-ft/" 2>/dev/null || true
      cp "$run"/compare-ft/michel-finetuned/summary.json "$sd/$name/compare-ft/michel-finetuned-summary.json" 2>/dev/null || true
    fi
  done
done
du -sh "$dest"
