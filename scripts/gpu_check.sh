#!/usr/bin/env bash
# The GPU check of issue 40, in one run ON THE GPU MACHINE (device tool), from the repository root,
# with the archive of scripts/gpu_deps.sh carried along (checkout ~51 MB + archive ~13 MB: within
# the tool's 64 MiB):
#
#   bash scripts/gpu_deps.sh                                   # here: build-gpu-deps.tar.xz
#   run: bash scripts/gpu_check.sh   carry: [build-gpu-deps.tar.xz]   timeout_s: 540
#
# At most ~8 minutes on an H100, build included. Every phase prints, and writes under $OUT (the
# device tool's result folder; a temporary folder without it): gpu_check.log (everything),
# summary.tsv (phase, exit status, seconds), and each phase's own file:
#   1. build against the machine's pip-installed LibTorch (torch.utils.cmake_prefix_path), with
#      nothing but -DCMAKE_PREFIX_PATH and the carried dependencies (build.txt);
#   2. the whole test suite (ctest.txt), then the Cuda.* tests alone, which must all run: a skipped
#      one fails the phase (cuda_tests.txt);
#   3. the quickstart on CUDA end to end: vocabulary, a small baseline, the pruning sweep with its
#      zero-pruning control, the report (quickstart.txt, quickstart-report.md);
#   4. a data-parallel training run over NCCL at world size 1 (dist.txt);
#   5. `bench train` bf16 and fp32 at the Bible and WMT-base shapes, alternating with PyTorch's
#      nn.Transformer (scripts/pytorch_transformer_bench.py --device cuda), 3 rounds
#      (bench_bible.txt, bench_wmt.txt: one JSON line each);
#   6. `bench decode` of the reference baseline on CUDA, fp32 and bf16, greedy and beam 4
#      (bench_decode.txt).
# HEADCOUNT_GPU_PHASES="build tests quickstart dist bench decode" picks phases (build is needed
# once per machine; a later call reuses build-gpu/ only on the same warm machine).
set -uo pipefail
cd "$(dirname "$0")/.."
archive=${1:-build-gpu-deps.tar.xz}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1
phases=${HEADCOUNT_GPU_PHASES:-build tests quickstart dist bench decode}
t0=$(date +%s)
printf 'phase\texit\tseconds\n' >"$out/summary.tsv"
phase() { # phase NAME COMMAND...: runs it, records its status and time
  local name=$1 start rc
  shift
  case " $phases " in *" $name "*) ;; *) return 0 ;; esac
  echo "=== [gpu] $name (at $(( $(date +%s) - t0 )) s)"
  start=$(date +%s)
  "$@"
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - start ))" | tee -a "$out/summary.tsv"
  return 0
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "cxx11 ABI", torch.compiled_with_cxx11_abi())'
git log -1 --format='commit %H %cd' 2>/dev/null || true
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
jobs=$(nproc)
hc=./build-gpu/headcount

# The carried dependencies (and the Bible corpus, which needs Debian's SWORD tools to build).
if [ -f "$archive" ]; then
  tar -xJf "$archive"
  if [ -d build-gpu-deps/data/bible ] && [ ! -f data/bible/train.es ]; then
    mkdir -p data && cp -a build-gpu-deps/data/bible data/bible
  fi
fi
deps=$(cd build-gpu-deps && pwd) || { echo "[gpu] no build-gpu-deps: carry $archive"; exit 2; }
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
for packed in experiments/*/baseline/model.pt.xzp; do
  python3 scripts/weights.py unpack "$(dirname "$packed")"
done

build() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr" \
    -DHEADCOUNT_SENTENCEPIECE_PREFIX="$deps/sentencepiece" &&
    cmake --build build-gpu -j"$jobs"
}
phase build build 2>&1 | tee "$out/build.txt"

tests() {
  OMP_NUM_THREADS=1 ctest --test-dir build-gpu -j8 --output-on-failure --timeout 300 \
    >"$out/ctest.txt" 2>&1
  local rc=$?
  tail -30 "$out/ctest.txt"
  # Every Cuda test must run; the one that needs two GPUs only where there are two.
  local filter='Cuda.*'
  [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] || filter='Cuda.*:-Cuda.TwoProcessesTrainOnTwoGpusOverNccl'
  ./build-gpu/headcount_tests --gtest_filter="$filter" >"$out/cuda_tests.txt" 2>&1 || rc=1
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$out/cuda_tests.txt"
  if grep -q '^\[  SKIPPED \]' "$out/cuda_tests.txt"; then
    echo "[gpu] a Cuda test skipped itself"
    rc=1
  fi
  return $rc
}
phase tests tests

quickstart() { # README command 1's job with device: cuda everywhere
  local q=runs/gpu-quickstart
  mkdir -p "$q"
  printf 'device: cuda\n' >"$q/cuda.yaml"
  cat >"$q/sweep.yaml" <<YAML
command: prune
configs: [configs/bible.yaml, configs/quickstart.yaml, configs/quickstart-prune.yaml, $q/cuda.yaml]
grid:
  prune.lambda: [0, 0.01, 0.05, 0.2]
controls: [lambda-0]
baseline: $q/base
YAML
  $hc vocab configs/bible.yaml &&
    $hc train configs/bible.yaml configs/quickstart.yaml "$q/cuda.yaml" --out "$q/base" &&
    $hc sweep "$q/sweep.yaml" --out "$q/sweep" --workers 2 &&
    $hc report "$q/sweep" && cp "$q/sweep/results.md" "$out/quickstart-report.md"
}
phase quickstart quickstart 2>&1 | tee "$out/quickstart.txt"

dist() { # one rank over NCCL, the process group a CUDA build picks; must say so in its log
  $hc launch --nproc 1 -- train configs/tiny.yaml --set device=cuda --set train.max_steps=40 \
    --set train.eval_every=40 --out runs/gpu-dist 2>&1 | tee runs/gpu-dist.log
  grep -q '(nccl)' runs/gpu-dist.log && grep -q 'parameters identical' runs/gpu-dist.log
}
phase dist dist 2>&1 | tee "$out/dist.txt"

bench_pair() { # bench_pair NAME HEADCOUNT_ARGS -- PYTORCH_ARGS: 3 rounds, alternating
  local name=$1
  shift
  local hc_args=() py_args=()
  while [ "$1" != -- ]; do hc_args+=("$1"); shift; done
  shift
  py_args=("$@")
  for round in 1 2 3; do
    for precision in bf16 fp32; do
      $hc bench train --set device=cuda --precision "$precision" --json --steps 20 --warmup 5 \
        "${hc_args[@]}" | sed "s/^/$name round $round headcount /"
      local flag=()
      [ "$precision" = bf16 ] && flag=(--bf16)
      python3 scripts/pytorch_transformer_bench.py --device cuda --steps 20 --warmup 5 \
        "${flag[@]}" "${py_args[@]}" | sed "s/^/$name round $round pytorch /"
    done
  done
}
bench() {
  bench_pair bible -- | tee "$out/bench_bible.txt"
  bench_pair wmt --d-model 512 --ffn 2048 --sentences 256 -- \
    --d-model 512 --ffn 2048 --sentences 256 | tee "$out/bench_wmt.txt"
  python3 scripts/bench_summary.py "$out/bench_bible.txt" "$out/bench_wmt.txt" |
    tee "$out/bench_summary.md"
}
phase bench bench

decode() {
  $hc bench decode --checkpoint experiments/voita-table-cpu/baseline --set device=cuda \
    --precisions fp32 bf16 --beams 1 4 --repeats 3
}
phase decode decode 2>&1 | tee "$out/bench_decode.txt"

echo "=== [gpu] done in $(( $(date +%s) - t0 )) s"
cat "$out/summary.tsv"
