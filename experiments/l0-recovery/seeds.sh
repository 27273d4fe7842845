#!/usr/bin/env bash
# Further seeds, and larger budgets, of the two runs every L0 variant is measured against,
# resumable like queue.sh (run it again after any interruption):
#   nohup bash experiments/l0-recovery/seeds.sh BINARY OUT SEED NAME... > OUT/seeds.log 2>&1 &
# NAME:
#   control   the zero-pruning control (prune.lambda 0, 1,200 steps from the baseline), as the
#             reference table's all-l0 (seed 1) -> control-1x-sSEED
#   michel-N  Michel et al.'s importance pruning to recovery-N-1x's per-type counts (importance on
#             all dev verses, from the committed records of recovery-N-1x), fine-tuned with that
#             run's config and budget as `analyze compare --finetune` does, with seed SEED
#             -> michel-N-1x-sSEED
#   control-Bx, michel-N-Bx   the same with B x 1,200 fine-tuning steps (evaluations every
#             B x 200): the same heads (Michel's from recovery-N-1x) and the same recipe, only the
#             budget grows -> control-Bx-sSEED, michel-N-Bx-sSEED (seed 1: no "-s1")
# The seed sets batch order and dropout (and the control's gate noise). Evaluations: beam 4, all dev
# and test verses, translations kept; records to experiments/l0-recovery/records/ under the
# names above.
set -euo pipefail
B=$(realpath "$1")
R=$2 seed=$3
shift 3
mkdir -p "$R"
R=$(realpath "$R")
cd "$(dirname "$0")/../.."
base=experiments/voita-table-cpu/baseline
records=experiments/l0-recovery/records

source experiments/l0-recovery/evaluate.sh

# NAME's suffix: "-sSEED", none for seed 1 at budgets above 1x (at 1x seed 1 is the reference
# table's run). BUDGET: the multiple of 1,200 steps.
suffix() { if [ "$seed" = 1 ] && [ "$1" != 1 ]; then echo ""; else echo "-s$seed"; fi; }

control() {  # BUDGET
  local b=$1 name=control-$1x$(suffix "$1")
  if [ ! -f "$R/$name/summary.json" ]; then
    echo "$(date -u +%FT%TZ) $name start"
    "$B" prune configs/bible-base.yaml configs/bible-prune.yaml configs/bible-prune-gated.yaml \
      --set prune.init_from=$base \
      --set train.max_steps=$((1200 * b)) --set train.eval_every=$((200 * b)) --set prune.lambda=0 \
      --set seed="$seed" --out "$R/$name" >> "$R/$name.log" 2>&1
  fi
  evaluate "$R/$name/pruned" "$R/$name"
  bash scripts/save_records.sh "$R/$name" "$records/$name" "$R/$name.log" > /dev/null
  echo "$(date -u +%FT%TZ) $name done"
}

michel() {  # N BUDGET
  local b=$2 name=michel-$1-$2x$(suffix "$2") run=$records/recovery-$1-1x
  # Michel's heads depend neither on the budget nor on the seed (the importance is measured on
  # all dev verses with the baseline, without sampling): computed once for every seed. Earlier
  # versions of this script kept one folder per seed (michel-N-1x-sSEED-compare); one is reused.
  local c=$R/michel-$1-compare old
  if [ ! -e "$c" ]; then
    for old in "$R"/michel-$1-1x-s*-compare; do
      if [ -f "$old/compare.json" ]; then
        rm -rf "$c.tmp" && cp -r "$old" "$c.tmp" && mv "$c.tmp" "$c" && break
      fi
    done
  fi
  if [ ! -f "$c/compare.json" ]; then
    echo "$(date -u +%FT%TZ) $name: Michel's heads"
    "$B" analyze compare --checkpoint $base --run "$run" --split dev --sentences 0 --beam 4 \
      --export-michel --out "$c" >> "$R/$name.log" 2>&1
  fi
  if [ ! -f "$R/$name/summary.json" ]; then
    echo "$(date -u +%FT%TZ) $name start"
    "$B" train "$run/config.yaml" --init-from "$c/michel-pruned" --out "$R/$name" \
      --set train.max_steps=$((1200 * b)) --set train.eval_every=$((200 * b)) \
      --set seed="$seed" >> "$R/$name.log" 2>&1
  fi
  evaluate "$R/$name/checkpoints/last" "$R/$name"
  bash scripts/save_records.sh "$R/$name" "$records/$name" "$R/$name.log" > /dev/null
  cp "$c/compare.json" "$records/$name/"
  echo "$(date -u +%FT%TZ) $name done"
}

for what in "$@"; do
  case $what in
    control) control 1 ;;
    control-[0-9]x) control "${what:8:1}" ;;
    michel-72 | michel-36) michel "${what#michel-}" 1 ;;
    michel-72-[0-9]x | michel-36-[0-9]x) michel "${what:7:2}" "${what:10:1}" ;;
    *) echo "$0: unknown run '$what' (control, michel-72, michel-36, control-Bx, michel-N-Bx)" >&2; exit 2 ;;
  esac
done
