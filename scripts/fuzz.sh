#!/usr/bin/env bash
# Runs each libFuzzer target for a while (build-san/, built by scripts/sanitize.sh: clang,
# AddressSanitizer, UndefinedBehaviorSanitizer) and writes fuzz-out/summary.md.
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET (default 180)] [TARGET ...]
# Targets: config (YAML + --set), corpus (parallel-text reader), bleu (tokenizers, BLEU, chrF),
# checkpoint (meta/state/architecture JSON, config.yaml, model.pt). A crash leaves its input in
# fuzz-out/TARGET/crash-*; turn it into a regression test (tests/test_reliability.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config corpus bleu checkpoint)
HEADCOUNT_JOBS=${HEADCOUNT_JOBS:-2} bash scripts/sanitize.sh --build-only >/dev/null
out=${HEADCOUNT_FUZZ_OUT:-fuzz-out}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

seed() {  # seed inputs for a target
  local t=$1 dir=$2 i=0
  case $t in
    config) cp configs/*.yaml "$dir"/ ;;
    corpus)
      printf 'uno dos tres\ncuatro\n\0one two three\nfour\n' > "$dir/pair"
      printf 'a\r\nb\n\0c\nd' > "$dir/crlf" ;;
    bleu)
      for f in ../shared/conformance/sacrebleu/*; do
        [ -f "$f" ] || continue
        head -c 2000 "$f" > "$dir/$(basename "$f")"; i=$((i + 1)); [ $i -lt 20 ] || break
      done
      printf '\x00The cat sat.\nA dog!\0The cat sat down.\nThe dog.' > "$dir/pair" ;;
    checkpoint) export HEADCOUNT_FUZZ_SEEDS=$dir ;;  # written by the target itself
  esac
}

mkdir -p "$out"
{
  echo "# Fuzzing run"
  echo
  echo "\`bash scripts/fuzz.sh $seconds ${targets[*]}\` on $(nproc --all) cores ($(uname -m)), $(date -u +%F)."
  echo
  echo "| target | seconds | executions | exec/s | corpus (inputs) | coverage (edges) | findings |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
} > "$out/summary.md"
for t in "${targets[@]}"; do
  dir=$out/$t
  mkdir -p "$dir/corpus"
  ( seed "$t" "$dir/corpus"
    echo "[fuzz] $t for $seconds s"
    set +e
    "build-san/fuzz_$t" "$dir/corpus" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=6144 \
      -max_len=4096 -artifact_prefix="$dir/" -print_final_stats=1 > "$dir/log.txt" 2>&1
    echo $? > "$dir/exit" )
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log.txt" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$dir/log.txt" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$dir/log.txt" | tail -1 | grep -o '[0-9]*')
  n=$(ls "$dir/corpus" | wc -l)
  crashes=$(ls "$dir" | grep -E '^(crash|leak|timeout|oom)-' || true)
  findings=${crashes:-none}
  [ "$(cat "$dir/exit")" = 0 ] || [ -n "$crashes" ] || findings="exit $(cat "$dir/exit") (see $dir/log.txt)"
  echo "| $t | $seconds | ${execs:-?} | ${rate:-?} | $n | ${cov:-?} | ${findings//$'\n'/, } |" >> "$out/summary.md"
  echo "[fuzz] $t: ${execs:-?} executions, findings: ${findings//$'\n'/, }"
done
cat "$out/summary.md"
