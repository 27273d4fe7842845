#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
start=$(date +%s)
# One test process per core; each test binary loads LibTorch once per test, so keep its own
# threads at one.
OMP_NUM_THREADS=1 ctest --test-dir build --output-on-failure -j"${HEADCOUNT_JOBS:-2}" "$@"
echo "[test] test suite finished in $(( $(date +%s) - start )) s"
