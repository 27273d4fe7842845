#!/usr/bin/env bash
# headcount's training step against PyTorch's torch.nn.Transformer (Debian's python3-torch) on the
# same shapes, measured in one go: the two programs alternate (A B A B ...) so that machine noise
# hits both alike; prints each run, the medians, the spread and the ratio.
#   usage: scripts/bench_vs_pytorch.sh [REPEATS] [STEPS]
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
steps=${2:-5}
hc=./build/headcount
py=/usr/bin/python3
[ -x "$hc" ] || { echo "build headcount first (scripts/setup.sh)" >&2; exit 1; }
$py -c 'import torch' 2>/dev/null || { echo "needs Debian's python3-torch: apt-get install python3-torch" >&2; exit 1; }

rate() { sed -E 's/.*"target_tokens_per_s": ?([0-9.]+).*/\1/'; }

# PyTorch gets its best thread setting: 1 or 2 intra-op threads (OpenBLAS uses both cores).
best_threads=1
best_rate=0
for t in 1 2; do
  r=$($py scripts/pytorch_transformer_bench.py --steps 3 --warmup 1 --threads $t | rate)
  echo "calibration: pytorch with $t intra-op thread(s): $r target tokens/s"
  if awk -v a="$r" -v b="$best_rate" 'BEGIN{exit !(a>b)}'; then best_rate=$r; best_threads=$t; fi
done
echo "pytorch runs with $best_threads intra-op thread(s); headcount with its config defaults"

# headcount keeps freed memory in the process (runtime::keep_freed_memory: glibc allocates no
# chunk with mmap and never trims the heap), so big tensors are not faulted in again every step.
# The peer is also measured with the same glibc settings (GLIBC_TUNABLES), as the like-for-like
# comparison; its defaults are what a PyTorch user gets.
keep_memory="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647:glibc.malloc.top_pad=67108864"
hc_rates=()
py_rates=()
pk_rates=()
for i in $(seq 1 "$repeats"); do
  a=$($hc bench train --steps "$steps" --json)
  b=$($py scripts/pytorch_transformer_bench.py --steps "$steps" --threads "$best_threads")
  k=$(GLIBC_TUNABLES=$keep_memory $py scripts/pytorch_transformer_bench.py --steps "$steps" --threads "$best_threads")
  hc_rates+=("$(echo "$a" | rate)")
  py_rates+=("$(echo "$b" | rate)")
  pk_rates+=("$(echo "$k" | rate)")
  echo "repeat $i: headcount ${hc_rates[-1]}  pytorch ${py_rates[-1]}  pytorch keeping memory ${pk_rates[-1]} target tokens/s"
done
echo "$a" | $py -c '
import json, sys
j = json.loads(sys.stdin.read())
print("headcount (last run): %.1f GFLOP per step, %.1f GFLOP/s achieved, matmul peak %.1f GFLOP/s, %.0f%% of peak"
      % (j["gflop_per_step"], j["achieved_gflops"], j["matmul_peak_gflops"], 100 * j["fraction_of_peak"]))'
$py - "${hc_rates[*]}" "${py_rates[*]}" "${pk_rates[*]}" <<'PY'
import statistics, sys
h = [float(x) for x in sys.argv[1].split()]
mh = statistics.median(h)
print(f"headcount: median {mh:.0f} target tokens/s (min {min(h):.0f}, max {max(h):.0f})")
for name, arg in (("pytorch (defaults)", sys.argv[2]), ("pytorch keeping memory", sys.argv[3])):
    p = [float(x) for x in arg.split()]
    mp = statistics.median(p)
    ratios = sorted(a / b for a, b in zip(h, p))
    print(f"{name}: median {mp:.0f} target tokens/s (min {min(p):.0f}, max {max(p):.0f}); "
          f"ratio headcount/{name}: {mh / mp:.2f} (median of medians), per-pair ratios "
          f"{ratios[0]:.2f}..{ratios[-1]:.2f}")
PY
