#!/usr/bin/env bash
# The recipe variants of issue 42 after the first 1x runs, resumable like queue.sh (run it again
# after any interruption: prune runs resume from their checkpoints, finished steps are skipped):
#   nohup bash experiments/l0-recovery/variants.sh BINARY OUT NAME... > OUT/variants.log 2>&1 &
# NAME (at the 1x budget, 1,200 steps; each the queue's recovery recipe, target ramp 300,
# lagrangian_lr 0.05, plus):
#   fix-N-1x      prune.fix_at_target: the mask is fixed when E[open] first reaches the target N
#                 (prune.recovery_steps 600 is then the latest fixing point)
#   kd-fix-N-1x   the same with distillation from the unpruned model (prune.distill_weight 0.5,
#                 temperature 1) in the gated and the recovery steps
#   kd-N-1x       distillation alone (the mask fixed at step 600 as in recovery-N-1x)
#   rewind-N-1x   fix-N-1x with prune.rewind: when the mask is fixed the weights go back to the
#                 baseline's (fresh optimizer, warm-up again), and the remaining steps fine-tune
#                 them under the gates' mask
#   kd-rewind-N-1x  the same with distillation 0.5
#   rw150-N-1x    rewind-N-1x with a target ramp of 150 steps (prune.target_warmup_steps), so that
#                 the mask is fixed earlier and the rewound weights keep more fine-tuning steps
#   exact-N-Bx    rewind with prune.exact_recovery: the gated phase (ramp 300, at most 600 steps)
#                 only chooses the heads; the rewound model then trains exactly 1,200 x B steps,
#                 the fine-tuning budget of michel-N-Bx (train.max_steps 1,200 x B + 600)
#   kd-exact-N-Bx exact-N-Bx with distillation from the unpruned model (prune.distill_weight 0.5,
#                 temperature 1) in the gated and the rewound steps
#   lrw-L-Bx      lambda mode with the recipe's rewind: prune.lambda L on all three types for the
#                 1,200 gated steps of configs/bible-prune.yaml, then the mask fixed (the gates'
#                 eval values, 0/1), the weights back to the baseline's and 1,200 x B steps
#                 fine-tuned under it (prune.recovery_steps 1,200 x B, prune.rewind; train.max_steps
#                 1,200 x (B + 1)); e.g. lrw-0.15-2x (lambda 0.15 kept 70 heads, 4/31/35, in the
#                 reference table)
#   typed-E.D.ED-Bx  exact-N-Bx with a target per attention type instead of one over all heads
#                 (prune.target_heads_per_type [E, D, ED], one Lagrangian per type): the gates
#                 choose which heads of each type, not how many; e.g. typed-3.32.37-2x, the
#                 counts the recipe's seed 1 kept at 72 heads
#   esplit-N-Bx   exact-N-Bx with prune.target_split expected: the one total split between the
#                 types by the gates' expected open heads at the fixing step (N x E_t / sum E,
#                 largest remainder), then the largest log_alpha within each type (item 32)
#   frz-NAME      NAME (any of the above) with prune.freeze_until_fixed: until the mask is fixed
#                 only the gates train, on the baseline's frozen weights (item 39); e.g.
#                 frz-esplit-72-2x-s2
#   rampR-NAME    NAME (exact-*, esplit-* or typed-*, after frz- where both) with a target ramp of R
#                 steps instead of 300 (prune.target_warmup_steps) and the latest fixing point at
#                 R + 300 (train.max_steps 1,200 x B + R + 300): more gated steps before the heads
#                 are chosen (item 41); e.g. frz-ramp900-esplit-72-2x-s2
#   floorF-NAME   NAME (esplit-*) with prune.split_floor F: heads whose P(open) is below F count as
#                 closed when the total is split between the types (item 50); after gavgK- where
#                 both, e.g. gavg3-floor0.05-esplit-36-2x
#   gavgK-NAME    NAME (esplit-* or exact-*) with prune.gate_seeds: K gate runs (the gated steps
#                 alone, seeds K(S-1)+1 .. KS for NAME's seed S, so that no two seeds of the
#                 variant share a gate run) choose the mask by the mean of their P(open); the run
#                 then fine-tunes the baseline under it for NAME's recovery steps with seed S
#                 (item 48); e.g. gavg3-esplit-72-2x (gate seeds 1, 2, 3: the seeds of item 46)
# NAME-sK (e.g. exact-72-1x-s2) runs NAME with seed K.
# Other variants than exact-* at budgets B > 1 scale their steps as queue.sh does (ramp a quarter
# of the steps, the latest fixing point at the half).
# Evaluations: beam 4, all dev and test verses, translations kept; records to
# experiments/l0-recovery/records/NAME.
set -euo pipefail
B=$(realpath "$1")
R=$2
shift 2
mkdir -p "$R"
cd "$(dirname "$0")/../.."
source experiments/l0-recovery/evaluate.sh
base=experiments/voita-table-cpu/baseline
records=experiments/l0-recovery/records
for name in "$@"; do
  # NAME-sK: the same variant with seed K (gate noise, dropout, batch order; 1 otherwise).
  seed=1 base_name=$name
  if [[ $name =~ ^(.*)-s([0-9]+)$ ]]; then base_name=${BASH_REMATCH[1]} seed=${BASH_REMATCH[2]}; fi
  gate_avg=()
  if [[ $base_name =~ ^gavg([0-9]+)-((floor[0-9.]+-)?(exact|esplit)-.*)$ ]]; then
    k=${BASH_REMATCH[1]} base_name=${BASH_REMATCH[2]}
    gate_avg=(--set "prune.gate_seeds=[$(seq -s ', ' $((k * (seed - 1) + 1)) $((k * seed)))]")
  elif [[ $base_name == gavg* ]]; then
    echo "gavgK- takes exact-* or esplit-* variants: $name" >&2; exit 2
  fi
  # floorF-NAME: esplit-* with prune.split_floor F (heads with P_open below F left out of the split).
  split_floor=()
  if [[ $base_name =~ ^floor([0-9.]+)-(esplit-.*)$ ]]; then
    split_floor=(--set prune.split_floor=${BASH_REMATCH[1]}) base_name=${BASH_REMATCH[2]}
  elif [[ $base_name == floor* ]]; then
    echo "floorF- takes esplit-* variants: $name" >&2; exit 2
  fi
  freeze=()
  if [[ $base_name == frz-* ]]; then base_name=${base_name#frz-} freeze=(--set prune.freeze_until_fixed=true); fi
  # rampR-NAME: the recipe's target ramp of 300 steps made R (exact-*, esplit-*, typed-*).
  long_ramp=
  if [[ $base_name =~ ^ramp([0-9]+)-((exact|esplit|typed)-.*)$ ]]; then
    long_ramp=${BASH_REMATCH[1]} base_name=${BASH_REMATCH[2]}
  elif [[ $base_name == ramp* ]]; then
    echo "rampR- takes exact-*, esplit-* or typed-* variants: $name" >&2; exit 2
  fi
  n=$(echo "$base_name" | sed -E 's/.*-([0-9]+)-[0-9]+x$/\1/')
  budget=$(echo "$base_name" | sed -E 's/.*-([0-9]+)x$/\1/')
  steps=$((1200 * budget)) ramp=$((300 * budget)) recovery=$((600 * budget))
  case $base_name in rw150-*) ramp=$((150 * budget)) ;; esac
  case $base_name in exact-* | kd-exact-* | esplit-*) steps=$((1200 * budget + 600)) ramp=300 recovery=$((1200 * budget)) ;; esac
  args=(--set train.max_steps=$steps --set train.eval_every=200 --set prune.target_heads=$n
    --set prune.target_warmup_steps=$ramp --set prune.lagrangian_lr=0.05
    --set prune.recovery_steps=$recovery --set seed=$seed)
  if [[ $base_name =~ ^lrw-([0-9.]+)-([0-9]+)x$ ]]; then
    budget=${BASH_REMATCH[2]}
    args=(--set prune.lambda=${BASH_REMATCH[1]} --set train.max_steps=$((1200 * (budget + 1)))
      --set train.eval_every=400 --set prune.recovery_steps=$((1200 * budget))
      --set prune.rewind=true --set seed=$seed)
  fi
  if [[ $base_name =~ ^typed-([0-9]+)\.([0-9]+)\.([0-9]+)-([0-9]+)x$ ]]; then
    budget=${BASH_REMATCH[4]}
    per_type="[${BASH_REMATCH[1]}, ${BASH_REMATCH[2]}, ${BASH_REMATCH[3]}]"
    args=(--set train.max_steps=$((1200 * budget + 600)) --set train.eval_every=200
      --set prune.target_heads=0 --set "prune.target_heads_per_type=$per_type"
      --set prune.target_warmup_steps=300 --set prune.lagrangian_lr=0.05
      --set prune.recovery_steps=$((1200 * budget)) --set seed=$seed)
  fi
  if [ -n "$long_ramp" ]; then
    args+=(--set prune.target_warmup_steps=$long_ramp
      --set train.max_steps=$((1200 * budget + long_ramp + 300)))
  fi
  case $base_name in
    lrw-*) ;;
    typed-*) args+=(--set prune.fix_at_target=true --set prune.rewind=true --set prune.exact_recovery=true) ;;
    exact-*) args+=(--set prune.fix_at_target=true --set prune.rewind=true --set prune.exact_recovery=true) ;;
    esplit-*) args+=(--set prune.fix_at_target=true --set prune.rewind=true --set prune.exact_recovery=true
      --set prune.target_split=expected) ;;
    kd-exact-*) args+=(--set prune.fix_at_target=true --set prune.rewind=true --set prune.exact_recovery=true
      --set prune.distill_weight=0.5) ;;
    fix-*) args+=(--set prune.fix_at_target=true) ;;
    rewind-* | rw150-*) args+=(--set prune.fix_at_target=true --set prune.rewind=true) ;;
    kd-rewind-*) args+=(--set prune.fix_at_target=true --set prune.rewind=true --set prune.distill_weight=0.5) ;;
    kd-fix-*) args+=(--set prune.fix_at_target=true --set prune.distill_weight=0.5) ;;
    kd-*) args+=(--set prune.distill_weight=0.5) ;;
    *) echo "unknown variant $name" >&2; exit 2 ;;
  esac
  if [ ! -f "$R/$name/summary.json" ]; then
    echo "$(date -u +%FT%TZ) $name start"
    "$B" prune configs/bible-base.yaml configs/bible-prune.yaml configs/bible-prune-gated.yaml \
      --set prune.init_from=$base \
      "${args[@]}" ${freeze[@]+"${freeze[@]}"} ${gate_avg[@]+"${gate_avg[@]}"} \
      ${split_floor[@]+"${split_floor[@]}"} --out "$R/$name" \
      >> "$R/$name.log" 2>&1
  fi
  evaluate "$R/$name/pruned" "$R/$name"
  bash scripts/save_records.sh "$R/$name" "$records/$name" "$R/$name.log" > /dev/null
  echo "$(date -u +%FT%TZ) $name done"
done
