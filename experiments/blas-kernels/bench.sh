#!/bin/bash
# OpenBLAS's own kernel choice (kept by setting OPENBLAS_CORETYPE to it; read off headcount's note) against headcount's
# (OPENBLAS_CORETYPE unset), alternating: bench blas once each, then `bench train` fp32 PAIRS times.
# Usage: bash experiments/blas-kernels/bench.sh [HEADCOUNT] [PAIRS]   (nothing else running)
set -euo pipefail
B=${1:-./build/headcount}
PAIRS=${2:-3}
unset OPENBLAS_CORETYPE HEADCOUNT_OPENBLAS_FALLBACK
mine=$("$B" bench blas)
own=$(echo "$mine" | sed -n 's/.*OpenBLAS chose its \([A-Za-z0-9_]*\) kernels.*/\1/p')
if [ -z "$own" ]; then
  echo "$mine"
  echo "OpenBLAS's own kernel choice is kept on this machine: nothing to compare"
  exit 0
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) cores"
echo "== bench blas, OpenBLAS's own choice (OPENBLAS_CORETYPE=$own)"
env OPENBLAS_CORETYPE=$own "$B" bench blas
echo "== bench blas, headcount's choice (OPENBLAS_CORETYPE unset)"
echo "$mine"
# One `bench train` (fp32) with the given environment assignments (none: headcount's choice).
train_rate() {
  env "$@" "$B" bench train --steps 5 --warmup 2 --precision fp32 --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f %.1f" % (d["target_tokens_per_s"], d["matmul_peak_gflops"]))'
}
for i in $(seq "$PAIRS"); do
  echo "pair $i openblas target_tokens_per_s/peak_gflops: $(train_rate OPENBLAS_CORETYPE="$own")"
  echo "pair $i headcount target_tokens_per_s/peak_gflops: $(train_rate)"
done
