#!/usr/bin/env bash
# headcount's training step against PyTorch's torch.nn.Transformer (Debian's python3-torch) on the
# same shapes, measured in one go: the programs alternate (A B C A B C ...) so that machine noise
# hits all alike; prints each run, the medians, the spread and the ratios.
#   usage: scripts/bench_vs_pytorch.sh [REPEATS] [STEPS] [PRECISION]
#   PRECISION: fp32 (headcount fp32 against PyTorch fp32), bf16 (headcount bf16 against PyTorch
#   under CPU bf16 autocast), or both (default; all four alternate).
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
steps=${2:-5}
precision=${3:-both}
hc=${HEADCOUNT:-./build/headcount}
py=/usr/bin/python3
[ -x "$hc" ] || { echo "build headcount first (scripts/setup.sh)" >&2; exit 1; }
$py -c 'import torch' 2>/dev/null || { echo "needs Debian's python3-torch: apt-get install python3-torch" >&2; exit 1; }
case "$precision" in
  fp32) precs=(fp32) ;;
  bf16) precs=(bf16) ;;
  both) precs=(fp32 bf16) ;;
  *) echo "PRECISION: expected fp32, bf16 or both, got '$precision'" >&2; exit 2 ;;
esac

# Both programs get the same OpenBLAS kernels (Debian's python3-torch loads the same OpenBLAS):
# where headcount replaces a fallback kernel set OpenBLAS chose for a CPU it does not recognise
# (README, "Threads and BLAS"), the peer runs with the same OPENBLAS_CORETYPE.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$("$hc" bench blas | sed -n 's/.*OPENBLAS_CORETYPE=\([A-Za-z0-9_]*\) set by headcount.*/\1/p')
  if [ -n "$core" ]; then
    export OPENBLAS_CORETYPE=$core
    echo "OPENBLAS_CORETYPE=$core for both programs (headcount's choice on this CPU)"
  fi
fi

rate() { sed -E 's/.*"target_tokens_per_s": ?([0-9.]+).*/\1/'; }
pyflag() { [ "$1" = bf16 ] && echo --bf16 || true; }

# headcount keeps freed memory in the process (runtime::keep_freed_memory: glibc allocates no
# chunk with mmap and never trims the heap), so big tensors are not faulted in again every step.
# The peer is also measured with the same glibc settings (GLIBC_TUNABLES), as the like-for-like
# comparison; its defaults are what a PyTorch user gets.
keep_memory="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647:glibc.malloc.top_pad=67108864"

# PyTorch gets its best thread setting per precision: 1 or 2 intra-op threads (OpenBLAS uses both
# cores for fp32; oneDNN's bf16 products run on the intra-op threads).
declare -A best_threads
for p in "${precs[@]}"; do
  best_threads[$p]=1
  best_rate=0
  for t in 1 2; do
    r=$(GLIBC_TUNABLES=$keep_memory $py scripts/pytorch_transformer_bench.py --steps 3 --warmup 1 --threads $t $(pyflag $p) | rate)
    echo "calibration: pytorch $p with $t intra-op thread(s): $r target tokens/s"
    if awk -v a="$r" -v b="$best_rate" 'BEGIN{exit !(a>b)}'; then best_rate=$r; best_threads[$p]=$t; fi
  done
  echo "pytorch $p runs with ${best_threads[$p]} intra-op thread(s); headcount with its config defaults"
done

names=()
cmds=()
for p in "${precs[@]}"; do
  names+=("headcount-$p")
  cmds+=("$hc bench train --steps $steps --json --precision $p")
  names+=("pytorch-$p")
  cmds+=("$py scripts/pytorch_transformer_bench.py --steps $steps --threads ${best_threads[$p]} $(pyflag $p)")
  names+=("pytorch-$p-keep-memory")
  cmds+=("env GLIBC_TUNABLES=$keep_memory $py scripts/pytorch_transformer_bench.py --steps $steps --threads ${best_threads[$p]} $(pyflag $p)")
done
declare -A rates
declare -A last_json
for i in $(seq 1 "$repeats"); do
  line="repeat $i:"
  for k in "${!names[@]}"; do
    out=$(${cmds[$k]})
    last_json[${names[$k]}]=$out
    r=$(echo "$out" | rate)
    rates[${names[$k]}]="${rates[${names[$k]}]:-} $r"
    line="$line ${names[$k]} $r"
  done
  echo "$line target tokens/s"
done
for p in "${precs[@]}"; do
  echo "${last_json[headcount-$p]}" | $py -c '
import json, sys
j = json.loads(sys.stdin.read())
print("headcount %s (last run): %.1f GFLOP per step, %.1f GFLOP/s achieved, %s matmul peak %.1f GFLOP/s, %.0f%% of peak"
      % (j["precision"], j["gflop_per_step"], j["achieved_gflops"], j["precision"], j["matmul_peak_gflops"], 100 * j["fraction_of_peak"]))'
done
args=()
for p in "${precs[@]}"; do
  args+=("$p" "${rates[headcount-$p]}" "${rates[pytorch-$p]}" "${rates[pytorch-$p-keep-memory]}")
done
$py - "${args[@]}" <<'PY'
import statistics, sys
a = sys.argv[1:]
for i in range(0, len(a), 4):
    prec = a[i]
    h = [float(x) for x in a[i + 1].split()]
    mh = statistics.median(h)
    print(f"headcount {prec}: median {mh:.0f} target tokens/s (min {min(h):.0f}, max {max(h):.0f})")
    for name, arg in ((f"pytorch {prec} (defaults)", a[i + 2]),
                      (f"pytorch {prec} keeping memory", a[i + 3])):
        p = [float(x) for x in arg.split()]
        mp = statistics.median(p)
        ratios = sorted(x / y for x, y in zip(h, p))
        print(f"  {name}: median {mp:.0f} target tokens/s (min {min(p):.0f}, max {max(p):.0f}); "
              f"ratio headcount/it: {mh / mp:.2f} (median of medians), per-pair ratios "
              f"{ratios[0]:.2f}..{ratios[-1]:.2f}, median pair {statistics.median(ratios):.2f}")
PY
