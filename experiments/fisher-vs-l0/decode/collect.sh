#!/bin/bash
# Copies the records of run.sh's folder ($OUT, default ~/hc/f20) here (no weights).
OUT=${OUT:-$HOME/hc/f20}
here=$(dirname "$0")
for d in "$OUT"/*/; do
  name=$(basename "$d")
  mkdir -p "$here/records/$name"
  for f in config.yaml pruning.json head_removal.csv README.md bench-decode.txt compare.txt \
    michel-eval-dev.json michel-eval-test.json; do
    [ -f "$d/$f" ] && cp "$d/$f" "$here/records/$name/"
  done
  [ -f "$d/compare/compare.json" ] && cp "$d/compare/compare.json" "$here/records/$name/"
  [ -f "$d/compare/michel-pruned/architecture.json" ] && \
    cp "$d/compare/michel-pruned/architecture.json" "$here/records/$name/michel-architecture.json"
  [ -f "$OUT/$name.time" ] && cp "$OUT/$name.time" "$here/records/$name/prune.time"
done
