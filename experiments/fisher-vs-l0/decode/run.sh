#!/bin/bash
# Issue 20 remainder: Fisher pruned models at 72 / 36 heads and a FLOPs budget of 0.8, their decoding
# speed against the FLOPs prediction (bench decode, alternating), and Michel's pruned models at the
# same per-type counts (physical, not fine-tuned) evaluated with beam 4 on dev and test.
cd "$(dirname "$0")/../../.."
B=${HEADCOUNT:-build/headcount}  # 2026-11-24: a copy of build/headcount at 64dd49d
BASE=experiments/voita-table-cpu/baseline
OUT=${OUT:-$HOME/hc/f20}
for spec in "n72 prune.target_heads=72" "n36 prune.target_heads=36" "flops0.8 prune.flops_fraction=0.8"; do
  set -- $spec; name=$1; budget=$2
  echo "== $name $(date)"
  [ -f $OUT/$name/pruned/model.pt ] || /usr/bin/time -v $B prune configs/bible-base.yaml configs/bible-prune.yaml configs/bible-prune-gated.yaml --method fisher \
    --set prune.init_from=$BASE --set $budget --out $OUT/$name > $OUT/$name.log 2> $OUT/$name.time
  if [ ! -f $OUT/$name/bench-decode.txt ]; then
    $B bench decode --checkpoint $BASE --compare $OUT/$name/pruned --sentences 400 --repeats 5 \
      > $OUT/$name/bench-decode.tmp 2>> $OUT/$name.log && mv $OUT/$name/bench-decode.tmp $OUT/$name/bench-decode.txt
  fi
  [ -f $OUT/$name/compare/michel-pruned/model.pt ] || $B analyze compare --checkpoint $BASE --run $OUT/$name \
    --sentences 500 --export-michel --out $OUT/$name/compare > $OUT/$name/compare.txt 2>> $OUT/$name.log
  for s in dev test; do
    [ -f $OUT/$name/michel-eval-$s.json ] || $B eval --checkpoint $OUT/$name/compare/michel-pruned --split $s \
      --out $OUT/$name/michel-eval-$s.json >> $OUT/$name.log 2>&1
  done
done
echo "== done $(date)"
