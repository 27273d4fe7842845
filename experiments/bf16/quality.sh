#!/usr/bin/env bash
# bf16 vs fp32 quality on the quickstart model (issue 15). Run from the repository root;
# HC (the binary, default /root/hc/bin/headcount) and RUNS (the run folders, default
# /root/hc/runs) may be set.
set -x
hc=${HC:-/root/hc/bin/headcount}
R=${RUNS:-/root/hc/runs}
mkdir -p $R
cfg=(configs/bible.yaml configs/quickstart.yaml)
date
$hc data stats configs/bible.yaml
$hc vocab configs/bible.yaml
date
for p in fp32 bf16; do
  $hc train "${cfg[@]}" --set train.precision=$p --set decode.precision=fp32 --out $R/base-$p
  date
done
for p in fp32 bf16; do
  $hc prune "${cfg[@]}" configs/quickstart-prune.yaml --set prune.init_from=$R/base-fp32/checkpoints/best \
    --set prune.lambda=0.05 --set train.precision=$p --set decode.precision=fp32 --out $R/prune-$p
  date
done
$hc bench decode --checkpoint $R/base-fp32/checkpoints/best --precisions fp32 bf16 --beams 1 4 --repeats 3
date
