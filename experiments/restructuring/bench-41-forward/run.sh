#!/usr/bin/env bash
# Alternates the binary before the one-forward-pass change (main at 0cccd4a) and after (OLD and
# NEW, copies outside build/, with libheadcount_spm.so beside them on LD_LIBRARY_PATH):
# bench train, 10 timed steps after 3 of warm-up, bf16 and fp32, ROUNDS rounds; one JSON line per
# run. Usage: bash run.sh OLD NEW [ROUNDS] > results.jsonl
set -euo pipefail
old=$1
new=$2
rounds=${3:-5}
for round in $(seq 1 "$rounds"); do
  for prec in bf16 fp32; do
    for which in old new; do
      bin=$old; [ $which = new ] && bin=$new
      line=$($bin bench train --json --steps 10 --warmup 3 --precision $prec 2>/dev/null | tail -1)
      echo "{\"round\":$round,\"binary\":\"$which\",\"precision\":\"$prec\",\"result\":$line}"
    done
  done
done
