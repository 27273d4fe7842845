#!/bin/bash
# bash run.sh NAME --set ... : one Fisher pruning run on the reference baseline, then beam-4 dev and test evals
# THREADS=1 bash run.sh ...: one LibTorch thread (beside another run on the 2 cores); default: the config's.
cd /work/main
name=$1; shift
out=~/hc/fisher/$name
th=()
[ -n "$THREADS" ] && th=(--set threads.intra_op=$THREADS)
mkdir -p ~/hc/fisher
/usr/bin/time -v ~/hc/fbin/headcount prune configs/bible-base.yaml configs/bible-prune.yaml --method fisher \
  --set prune.init_from=experiments/voita-table-cpu/baseline "${th[@]}" "$@" --out $out > ~/hc/fisher/$name.log 2> ~/hc/fisher/$name.time
for s in dev test; do
  [ -f $out/eval-$s.json ] || ~/hc/fbin/headcount eval --checkpoint $out/pruned --split $s "${th[@]}" --out $out/eval-$s.json >> ~/hc/fisher/$name.log 2>&1
done
