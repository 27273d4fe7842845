#!/usr/bin/env bash
# The committed records of this experiment laid out as `headcount reproduce` lays out its runs
# (OUT/baseline, OUT/seed-1/RUN; symbolic links, nothing copied), then `reproduce --report-only`:
# records/reproduce-table.md, the table with its goals computed from the committed evaluations.
#   experiments/voita-table-cpu/report_records.sh [HEADCOUNT]
set -euo pipefail
hc=${1:-./build/headcount}
cd "$(dirname "$0")/../.."
here=$PWD/experiments/voita-table-cpu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ln -s "$here/baseline" "$out/baseline"
mkdir "$out/seed-1"
for run in "$here"/records/*/ "$here"/records-target/target-*/; do
  ln -s "$run" "$out/seed-1/$(basename "$run")"
done
"$hc" reproduce experiments/voita-table-cpu/experiment.yaml --out "$out" --report-only
sed "s|$out|OUT|g" "$out/results.md" > "$here/records/reproduce-table.md"
echo "wrote $here/records/reproduce-table.md"
