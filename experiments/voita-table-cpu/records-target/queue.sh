#!/bin/bash
# Queue of 2026-11-25, commit 25ad556 (avx512_bf16 machine): L0 target runs, their beam-4
# evaluations, and Michel et al.'s importance pruning fine-tuned with the same budget (analyze
# compare --finetune); resumable.
# After target-72, two jobs at a time with one LibTorch thread each (no oversubscription).
cd /work/main
B=~/hc/bin/headcount
R=~/hc/l0t
while pgrep -f "bin/headcount prune" > /dev/null; do sleep 20; done
l0() {
  T=$1; TH=$2
  if [ ! -f $R/target-$T/pruned/model.pt ]; then
    echo "$(date -u +%FT%TZ) L0 target $T start ($TH threads)"
    /usr/bin/time -v $B prune configs/bible-base.yaml configs/bible-prune.yaml configs/bible-prune-gated.yaml \
      --set prune.init_from=experiments/voita-table-cpu/baseline --set prune.target_warmup_steps=600 \
      --set prune.target_heads=$T --set threads.intra_op=$TH --out $R/target-$T >> $R/target-$T.log 2>> $R/target-$T.time
    echo "$(date -u +%FT%TZ) L0 target $T end rc=$?"
  fi
  [ -f $R/target-$T/pruned/model.pt ] || return 1
  for s in dev test; do
    [ -f $R/target-$T/eval-$s.json ] || $B eval --checkpoint $R/target-$T/pruned --split $s \
      --set threads.intra_op=$TH --out $R/target-$T/eval-$s.json > $R/target-$T/eval-$s.log 2>&1
  done
  echo "$(date -u +%FT%TZ) L0 target $T evaluated"
}
michel() {
  T=$1; TH=$2
  C=$R/target-$T/compare-ft
  if [ ! -f $C/compare.json ]; then
    echo "$(date -u +%FT%TZ) compare --finetune $T start ($TH threads)"
    /usr/bin/time -v $B analyze compare --checkpoint experiments/voita-table-cpu/baseline \
      --run $R/target-$T --split dev --sentences 0 --beam 4 --finetune --finetune-threads $TH \
      --set threads.intra_op=$TH --out $C >> $R/compare-$T.log 2>> $R/compare-$T.time
    echo "$(date -u +%FT%TZ) compare --finetune $T end rc=$?"
  fi
  [ -f $C/compare.json ] || return 1
  for s in dev test; do
    [ -f $C/eval-michel-finetuned-$s.json ] || $B eval --checkpoint $C/michel-finetuned/checkpoints/last \
      --split $s --set threads.intra_op=$TH --out $C/eval-michel-finetuned-$s.json > $C/eval-michel-finetuned-$s.log 2>&1
  done
  echo "$(date -u +%FT%TZ) compare $T evaluated"
}
l0 72 2
michel 72 1 & l0 36 1 & wait
michel 36 1 & l0 18 1 & wait
michel 18 1
