#!/usr/bin/env bash
# The study of issue 42, resumable: run it again after any interruption and it continues (prune
# runs resume from their checkpoints; finished steps are skipped). From the repository root:
#   nohup bash experiments/l0-recovery/queue.sh BINARY OUT > OUT/queue.log 2>&1 &
# BINARY: a copy of build/headcount outside build/ (rebuilding must not disturb it); OUT: a folder
# outside the work tree (e.g. ~/hc/l0r). Each finished run's records (no checkpoints) go to
# experiments/l0-recovery/records/NAME: commit them as they come.
#
# Per head count N (72, 36) and budget B (1 = 1,200 steps):
#   recovery-N-Bx   L0 target N: gates for the first half (target ramp a quarter of the steps,
#                   lagrangian_lr 0.05), the mask fixed for the second half (prune.recovery_steps)
#   control-Bx      the zero-pruning control at the same budget (lambda 0)
#   michel-N-Bx     Michel et al.'s importance pruning to recovery-N-Bx's per-type counts,
#                   fine-tuned with the same budget (analyze compare --finetune)
# Evaluations: beam 4, all dev and test verses, translations kept (paired p-values).
set -euo pipefail
B=$(realpath "$1")
R=$2
mkdir -p "$R"
cd "$(dirname "$0")/../.."
base=experiments/voita-table-cpu/baseline
records=experiments/l0-recovery/records
common=(configs/bible-base.yaml configs/bible-prune.yaml configs/bible-prune-gated.yaml --set prune.init_from=$base)

source experiments/l0-recovery/evaluate.sh

run_prune() {  # NAME ARGS...
  local name=$1
  shift
  echo "$(date -u +%FT%TZ) $name start"
  "$B" prune "${common[@]}" "$@" --out "$R/$name" >> "$R/$name.log" 2>&1
  evaluate "$R/$name/pruned" "$R/$name"
  bash scripts/save_records.sh "$R/$name" "$records/$name" "$R/$name.log" > /dev/null
  echo "$(date -u +%FT%TZ) $name done"
}

for budget in 1 2 4; do
  steps=$((1200 * budget))
  schedule=(--set train.max_steps=$steps --set train.eval_every=$((200 * budget)))
  for n in 72 36; do
    name=recovery-$n-${budget}x
    [ -f "$R/$name/summary.json" ] ||
      run_prune "$name" "${schedule[@]}" --set prune.target_heads=$n \
        --set prune.target_warmup_steps=$((steps / 4)) --set prune.lagrangian_lr=0.05 \
        --set prune.recovery_steps=$((steps / 2))
    c=$R/$name/compare-ft
    if [ ! -f "$c/compare.json" ]; then
      echo "$(date -u +%FT%TZ) michel-$n-${budget}x start"
      "$B" analyze compare --checkpoint $base --run "$R/$name" --split dev --sentences 0 --beam 4 \
        --finetune --out "$c" >> "$R/michel-$n-${budget}x.log" 2>&1
    fi
    mkdir -p "$R/michel-$n-${budget}x"
    evaluate "$c/michel-finetuned/checkpoints/last" "$R/michel-$n-${budget}x"
    mkdir -p "$records/michel-$n-${budget}x"
    cp "$c/compare.json" "$R/michel-$n-${budget}x"/eval-*.json "$R/michel-$n-${budget}x"/eval-*.hyp.txt \
      "$records/michel-$n-${budget}x/"
    echo "$(date -u +%FT%TZ) michel-$n-${budget}x done"
  done
  # The control last: at 1x the reference table's all-l0 control (records-target) has the same
  # recipe, so the recovery runs come first.
  [ -f "$R/control-${budget}x/summary.json" ] ||
    run_prune "control-${budget}x" "${schedule[@]}" --set prune.lambda=0
done
