#!/usr/bin/env bash
# From-scratch retraining of a pruned architecture with the reference baseline's config, budget
# and learning-rate history (baseline/README.md): leg 1 `train configs/bible-base.yaml` (cosine to
# zero at step 3,000), leg 2 resumed with train.max_steps=6000 (a warm restart at 4.6e-4 decaying
# to zero at 6,000), then beam-4 evaluation of checkpoints/best on dev and test. Resumable: run it
# again after an interruption.
#   experiments/voita-table-cpu/retrain.sh RUN [OUT_ROOT] [HEADCOUNT]
# RUN names records/RUN/architecture.json; the run folder is OUT_ROOT/RUN (default ~/hc/scratch).
set -uo pipefail
name=$1
root=${2:-$HOME/hc/scratch}
hc=${3:-./build/headcount}
cd "$(dirname "$0")/../.."
out=$root/$name
arch=experiments/voita-table-cpu/records/$name/architecture.json
[ -f "$arch" ] || { echo "$0: no $arch" >&2; exit 1; }
mkdir -p "$root"
step_of() {
  python3 -c "import json;print(json.load(open('$out/checkpoints/last/state.json'))['step'])" \
    2> /dev/null || echo 0
}
if [ ! -f "$out/leg1.done" ] && [ "$(step_of)" -lt 3000 ]; then
  /usr/bin/time -v "$hc" train configs/bible-base.yaml --architecture-from "$arch" --out "$out" \
    >> "$out.leg1.log" 2>&1 || exit 1
fi
mkdir -p "$out" && touch "$out/leg1.done"
if [ ! -f "$out/leg2.done" ]; then
  /usr/bin/time -v "$hc" train configs/bible-base.yaml --set train.max_steps=6000 \
    --architecture-from "$arch" --out "$out" >> "$out.leg2.log" 2>&1 || exit 1
  touch "$out/leg2.done"
fi
for split in dev test; do
  [ -f "$out/eval-$split.json" ] || "$hc" eval --checkpoint "$out/checkpoints/best" --split "$split" \
    --out "$out/eval-$split.json" --hyp-out "$out/eval-$split.hyp.txt" > "$out/eval-$split.log" 2>&1 || exit 1
done
echo "finished: $out (records: scripts/save_records.sh $out experiments/voita-table-cpu/records/$name/scratch $out.leg1.log $out.leg2.log)"
