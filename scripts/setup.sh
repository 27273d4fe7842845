#!/usr/bin/env bash
# Installs what is missing and builds headcount. Idempotent: a second run only checks.
#   - Debian packages (LibTorch, OpenBLAS, yaml-cpp, fmt, Eigen, GoogleTest, CLI11, nlohmann-json,
#     ICU, protobuf, the SWORD tools and Bible modules of the default corpus, ccache, ninja)
#   - SentencePiece 0.1.97 as static libraries from Debian's source package
#     (scripts/build_sentencepiece.sh explains why)
#   - build/headcount and build/headcount_tests (CMake + Ninja, precompiled headers, ccache)
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(
  build-essential cmake ninja-build ccache pkg-config patch dpkg-dev
  libtorch-dev libopenblas0-pthread libyaml-cpp-dev libfmt-dev libeigen3-dev libgtest-dev
  libcli11-dev nlohmann-json3-dev libicu-dev libminizip-dev libprotobuf-dev protobuf-compiler libgloo-dev
  libsword-utils sword-text-sparv sword-text-web sword-text-kjv gnuplot-nox python3-regex python3-torch
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
else
  echo "[setup] Debian packages: all present"
fi

# The reference experiments' baseline weights, committed packed (scripts/weights.py says why).
for packed in experiments/*/baseline/model.pt.xzp; do
  [ -e "$packed" ] && python3 scripts/weights.py unpack "$(dirname "$packed")"
done

bash scripts/build_sentencepiece.sh "${HEADCOUNT_SENTENCEPIECE_PREFIX:-/opt/headcount-deps/sentencepiece}"

jobs=${HEADCOUNT_JOBS:-2}
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DHEADCOUNT_SENTENCEPIECE_PREFIX="${HEADCOUNT_SENTENCEPIECE_PREFIX:-/opt/headcount-deps/sentencepiece}"
fi
# HEADCOUNT_WERROR=ON (CI): warnings in headcount's own code fail the build.
if [ -n "${HEADCOUNT_WERROR:-}" ]; then
  cmake -S . -B build -DHEADCOUNT_WERROR="$HEADCOUNT_WERROR" >/dev/null
fi
start=$(date +%s)
cmake --build build -j"$jobs"
echo "[setup] build finished in $(( $(date +%s) - start )) s: build/headcount"
