#!/bin/bash
# bash run.sh NAME --set ... : one Fisher pruning run on the reference baseline, then beam-4 dev and test evals
# THREADS=1 bash run.sh ...: one LibTorch thread (beside another run on the 2 cores); default: the config's.
# BIN=DIR: the binary DIR/headcount (default ~/hc/fbin: a copy outside build/); OUT=DIR: the runs' folder (default ~/hc/fisher).
cd "$(dirname "$0")/../.."
name=$1; shift
bin=${BIN:-~/hc/fbin}
root=${OUT:-~/hc/fisher}
out=$root/$name
th=()
[ -n "$THREADS" ] && th=(--set threads.intra_op=$THREADS)
mkdir -p $root
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
/usr/bin/time -v $bin/headcount prune configs/bible-base.yaml configs/bible-prune.yaml configs/bible-prune-gated.yaml --method fisher \
  --set prune.init_from=experiments/voita-table-cpu/baseline "${th[@]}" "$@" --out $out > $root/$name.log 2> $root/$name.time
for s in dev test; do
  [ -f $out/eval-$s.json ] || $bin/headcount eval --checkpoint $out/pruned --split $s "${th[@]}" --out $out/eval-$s.json >> $root/$name.log 2>&1
done
