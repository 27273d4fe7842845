#!/usr/bin/env bash
# Which heads, or what the gated phase did to the weights? Applies a finished prune run's mask to
# the unpruned baseline and fine-tunes that with the run's own config and budget, without gates,
# exactly as Michel + fine-tuning is fine-tuned (`analyze compare --finetune`, for a run without
# prune.rewind): the same heads as the L0 run, the baseline's weights. Resumable (run it again after any interruption):
#   nohup bash experiments/l0-recovery/mask_ft.sh BINARY OUT RUN NAME [TRAIN_ARGS...] > OUT/NAME.out 2>&1 &
# RUN: the prune run whose mask is taken (e.g. OUT/kd-fix-72-1x, or its committed records folder);
# records to experiments/l0-recovery/records/NAME. TRAIN_ARGS go to `train` (e.g. --set seed=2:
# another batch order and other dropout draws, for the spread of fine-tuning itself).
set -euo pipefail
B=$(realpath "$1")
R=$2 run=$(realpath "$3") name=$4
shift 4
mkdir -p "$R"
R=$(realpath "$R")
cd "$(dirname "$0")/../.."
source experiments/l0-recovery/evaluate.sh
base=experiments/voita-table-cpu/baseline
[ -d "$R/$name-init" ] || "$B" export-pruned --checkpoint $base --heads-of "$run" --out "$R/$name-init"
if [ ! -f "$R/$name/summary.json" ]; then
  echo "$(date -u +%FT%TZ) $name start"
  "$B" train "$run/config.yaml" --init-from "$R/$name-init" --out "$R/$name" "$@" >> "$R/$name.log" 2>&1
fi
evaluate "$R/$name/checkpoints/last" "$R/$name"
bash scripts/save_records.sh "$R/$name" experiments/l0-recovery/records/$name "$R/$name.log" > /dev/null
echo "$(date -u +%FT%TZ) $name done"
