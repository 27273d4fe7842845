#!/usr/bin/env bash
# Builds headcount with AddressSanitizer and UndefinedBehaviorSanitizer (clang, build-san/) and
# runs the test suite under them. Idempotent; CI runs it after the plain test suite.
#   bash scripts/sanitize.sh [--build-only | ctest arguments]
# The same build holds the libFuzzer targets (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
missing=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[sanitize] installing: ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
fi

jobs=${HEADCOUNT_JOBS:-2}
if [ ! -f build-san/build.ninja ]; then
  cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DHEADCOUNT_SANITIZE=address,undefined -DHEADCOUNT_FUZZ=ON \
    -DHEADCOUNT_SENTENCEPIECE_PREFIX="${HEADCOUNT_SENTENCEPIECE_PREFIX:-/opt/headcount-deps/sentencepiece}"
fi
start=$(date +%s)
cmake --build build-san -j"$jobs"
echo "[sanitize] build finished in $(( $(date +%s) - start )) s"
[ "${1:-}" != "--build-only" ] || exit 0

# LibTorch is not instrumented and keeps its static registries to the end: leak reports would be
# its own, so LeakSanitizer is off. Everything else stops the test at the first report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The kill-in-every-window tests kill at the first two passages of each crash point here (every
# point and every resume path is reached; the plain suite kills at every passage): a kill-and-resume
# cycle of the CLI costs several times as much under the sanitizers.
export HEADCOUNT_TEST_KILL_PASSAGES=${HEADCOUNT_TEST_KILL_PASSAGES:-2}
start=$(date +%s)
OMP_NUM_THREADS=1 ctest --test-dir build-san --output-on-failure -j"$jobs" --timeout 900 "$@"
echo "[sanitize] test suite under address,undefined finished in $(( $(date +%s) - start )) s"
