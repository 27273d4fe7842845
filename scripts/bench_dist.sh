#!/usr/bin/env bash
# Data-parallel benchmark on one machine: 2 processes x 1 thread (headcount launch, Gloo) against
# 1 process x 2 threads on the same global batches (the single process takes both batches of a
# step: train.update_freq=2), on the Bible baseline's shapes (configs/bible-base.yaml). The two
# set-ups alternate, REPEATS times each; prints target tokens/s (median and spread) and the
# gradient all-reduce volume per step.
#   bash scripts/bench_dist.sh [REPEATS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
steps=${2:-8}
hc=./build/headcount
out=${BENCH_DIST_DIR:-runs/bench-dist}
rm -rf "$out"
mkdir -p "$out"
common=(configs/bible.yaml configs/bible-base.yaml --set train.max_steps="$steps"
        --set train.log_every=$((steps / 2)) --set train.eval_every=100000
        --set train.eval_max_sentences=8 --set train.patience=0)
rate() {  # tokens/s of the second logging window (the first includes start-up effects)
  /usr/bin/python3 -c "
import json,sys
ev=[json.loads(l) for l in open('$1/metrics.jsonl') if '\"train\"' in l]
e=ev[-1]; print(e['tgt_tokens_per_s'], e.get('allreduce_bytes_per_step', 0))"
}
for i in $(seq 1 "$repeats"); do
  $hc launch --nproc 2 --cores 2 -- train "${common[@]}" --set threads.intra_op=1 \
    --set threads.blas=1 --out "$out/two-$i" > "$out/two-$i.log" 2>&1
  echo "two-$i $(rate "$out/two-$i")" | tee -a "$out/results.txt"
  $hc train "${common[@]}" --set train.update_freq=2 --set threads.intra_op=1 \
    --set threads.blas=2 --out "$out/one-$i" > "$out/one-$i.log" 2>&1
  echo "one-$i $(rate "$out/one-$i")" | tee -a "$out/results.txt"
done
/usr/bin/python3 - "$out/results.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
two = [float(r[1]) for r in rows if r[0].startswith('two')]
one = [float(r[1]) for r in rows if r[0].startswith('one')]
vol = max(int(r[2]) for r in rows if r[0].startswith('two'))
ratios = [a / b for a, b in zip(two, one)]
print(f"2 processes x 1 thread : median {statistics.median(two):.0f} target tokens/s "
      f"(min {min(two):.0f}, max {max(two):.0f})")
print(f"1 process  x 2 threads : median {statistics.median(one):.0f} target tokens/s "
      f"(min {min(one):.0f}, max {max(one):.0f})")
print(f"ratio (2x1 / 1x2), per alternated pair: median {statistics.median(ratios):.2f} "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
print(f"gradient all-reduce per step and process: {vol / 1e6:.1f} MB "
      f"({vol // 4} float32 values)")
PY
