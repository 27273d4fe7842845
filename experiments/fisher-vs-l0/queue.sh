#!/bin/bash
R=~/hc/fisher/run.sh
$R pt-26-48-48-norefit --set 'prune.target_heads_per_type=[26,48,48]' --set prune.reconstruct=false
$R pt-9-47-40 --set 'prune.target_heads_per_type=[9,47,40]'
$R pt-9-47-40-norefit --set 'prune.target_heads_per_type=[9,47,40]' --set prune.reconstruct=false
$R n72 --set prune.target_heads=72
$R n72-norefit --set prune.target_heads=72 --set prune.reconstruct=false
$R n36 --set prune.target_heads=36
$R n36-norefit --set prune.target_heads=36 --set prune.reconstruct=false
$R flops0.8 --set prune.flops_fraction=0.8
$R latency0.8 --set prune.latency_fraction=0.8
echo QUEUE_DONE
