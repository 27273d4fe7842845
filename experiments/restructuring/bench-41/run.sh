#!/usr/bin/env bash
# Alternates the binary before #41 (affa06a) and after (a563de4): bench train, 10 timed steps,
# bf16 and fp32, 5 rounds; one JSON line per run.
set -euo pipefail
old=/work/probe-bin/headcount
new=/work/main/build/headcount
for round in 1 2 3 4 5; do
  for prec in bf16 fp32; do
    for which in old new; do
      bin=$old; [ $which = new ] && bin=$new
      line=$($bin bench train --json --steps 10 --warmup 3 --precision $prec 2>/dev/null | tail -1)
      echo "{\"round\":$round,\"binary\":\"$which\",\"precision\":\"$prec\",\"result\":$line}"
    done
  done
done
