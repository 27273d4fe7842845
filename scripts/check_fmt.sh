#!/usr/bin/env bash
# Compiles headcount (library, CLI and tests) against another fmt's headers, header-only, as a
# build against the official LibTorch does with the fmt LibTorch ships (CMakeLists.txt, "fmt").
# The headers: the include/ folder of any fmt release (fmt's own source tree, Debian's source
# package of a later suite, or the include folder of the official LibTorch):
#
#   bash scripts/check_fmt.sh /path/to/fmt-11.2.0/include      # a folder holding fmt/
#
# Build folder: build-fmt-<version>/ (ignored by git). Not part of .ci/run (a second full build).
set -euo pipefail
cd "$(dirname "$0")/.."
headers=$(cd "${1:?usage: check_fmt.sh FOLDER_HOLDING_fmt/}" && pwd)
version=$(awk '/define FMT_VERSION /{print $3}' "$headers"/fmt/base.h "$headers"/fmt/core.h 2>/dev/null | head -1)
dir=build-fmt-${version:-unknown}
echo "[check-fmt] fmt $version from $headers into $dir"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADCOUNT_WERROR=ON \
  -DHEADCOUNT_FMT_HEADERS="$headers" \
  -DHEADCOUNT_SENTENCEPIECE_PREFIX="${HEADCOUNT_SENTENCEPIECE_PREFIX:-/opt/headcount-deps/sentencepiece}" >/dev/null
cmake --build "$dir" -j"${HEADCOUNT_JOBS:-2}" -- -k 0
"$dir/headcount" --version
echo "[check-fmt] fmt $version: headcount, its tests and every source compile and link"
