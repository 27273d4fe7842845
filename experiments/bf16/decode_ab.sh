#!/usr/bin/env bash
# Decoding speed of two headcount binaries on the reference baseline, alternating (issue 15):
#   bash experiments/bf16/decode_ab.sh OLD_BINARY NEW_BINARY [PAIRS] [SENTENCES]
# Each run times fp32 and bf16, greedy and beam 4, on the first SENTENCES dev verses
# (0: all 1,084) and prints BLEU of each output; the summary lists every run's sentences/s per
# binary, precision and beam (median, min, max).
set -euo pipefail
old=$1 new=$2 pairs=${3:-3} sentences=${4:-500}
ckpt=experiments/voita-table-cpu/baseline
out=$(mktemp)
for i in $(seq "$pairs"); do
  for b in "$old" "$new"; do
    "$b" bench decode --checkpoint "$ckpt" --precisions fp32 bf16 --beams 1 4 --repeats 1 \
      --sentences "$sentences" 2>&1 |
      awk -v bin="$b" '/^beam /{beam=$2} /^full /{print bin, $2, "beam" beam, $4, $NF}' | tee -a "$out"
  done
done
echo "== binary precision beam: sentences/s median (min-max) over $pairs runs; BLEU"
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    binary, precision, beam, rate, bleu = line.split()
    runs.setdefault((binary, precision, beam), []).append((float(rate), bleu))
for key in sorted(runs):
    rates = [r for r, _ in runs[key]]
    print(f"{' '.join(key)}: {statistics.median(rates):.1f} ({min(rates):.1f}-{max(rates):.1f}); "
          f"BLEU {runs[key][-1][1]}")
PY
rm -f "$out"
