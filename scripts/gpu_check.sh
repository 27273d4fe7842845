#!/usr/bin/env bash
# Run ON THE GPU MACHINE (device tool; issue 21), from the repository root, with the folder of
# scripts/gpu_deps.sh carried along:
#
#   bash scripts/gpu_check.sh [DEPS]      # default build-gpu-deps
#
# Builds headcount against the LibTorch inside the machine's pip-installed PyTorch
# (torch.utils.cmake_prefix_path), runs the whole test suite (the Cuda.* tests run there instead
# of skipping), then the bench shapes on CUDA against PyTorch's nn.Transformer in the same call:
# the Bible baseline's (d=256, 6+6 layers, 8 heads, FFN 1024, 2,048 target tokens) and a WMT-size
# one (d=512, FFN 2048, 8,192 target tokens), fp32 and bf16, alternating, 3 rounds. Everything it
# prints is also written under $OUT (the device tool's result folder) when OUT is set.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=$(cd "${1:-build-gpu-deps}" && pwd)
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "cxx11 ABI", torch.compiled_with_cxx11_abi())'
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr" -DICU_ROOT="$deps/usr" -DProtobuf_ROOT="$deps/usr" \
  -DHEADCOUNT_SENTENCEPIECE_PREFIX="$deps/sentencepiece" \
  -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
start=$(date +%s)
cmake --build build-gpu -j"$(nproc)"
echo "[gpu] build: $(( $(date +%s) - start )) s"
./build-gpu/headcount_tests --gtest_filter='Cuda*' 2>&1 | tee "$out/cuda_tests.txt"
OMP_NUM_THREADS=1 ctest --test-dir build-gpu -j8 --output-on-failure 2>&1 | tail -40 | tee "$out/ctest.txt"
bench() { # bench NAME HEADCOUNT_ARGS -- PYTORCH_ARGS
  local name=$1; shift
  local hc=() py=()
  while [ "$1" != -- ]; do hc+=("$1"); shift; done; shift; py=("$@")
  for round in 1 2 3; do
    for precision in fp32 bf16; do
      ./build-gpu/headcount bench train --set device=cuda --precision "$precision" --json \
        --steps 20 --warmup 5 "${hc[@]}" | sed "s/^/$name headcount /"
      local flag=(); [ "$precision" = bf16 ] && flag=(--bf16)
      python3 scripts/pytorch_transformer_bench.py --device cuda --steps 20 --warmup 5 "${flag[@]}" \
        "${py[@]}" | sed "s/^/$name pytorch /"
    done
  done
}
bench bible -- | tee "$out/bench_bible.txt"
bench wmt --d-model 512 --ffn 2048 --sentences 256 -- --d-model 512 --ffn 2048 --sentences 256 |
  tee "$out/bench_wmt.txt"
