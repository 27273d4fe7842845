#!/usr/bin/env bash
# Copy a finished run's records (no checkpoints) into experiments/: what a table needs to be
# regenerated and a pruned architecture to be retrained from scratch on another machine.
#   scripts/save_records.sh RUN_DIR DEST [LOG...]
# RUN_DIR: a train or prune run folder; DEST: e.g. experiments/voita-table-cpu/records/all-l0.5.
# LOG: console logs of the run (nohup output, /usr/bin/time -v output); their headcount lines and
# time/memory figures become DEST/train.log.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 RUN_DIR DEST [LOG...]" >&2; exit 2; }
run=$1 dest=$2
shift 2
[ -d "$run" ] || { echo "$0: $run is not a folder" >&2; exit 1; }
[ -f "$run/summary.json" ] || { echo "$0: $run has no summary.json: the run has not finished" >&2; exit 1; }
mkdir -p "$dest"
for f in README.md config.yaml summary.json metrics.jsonl gates.jsonl head_removal.csv pruning.json \
  sweep.json; do
  [ -f "$run/$f" ] && cp "$run/$f" "$dest/$f"
done
shopt -s nullglob
for f in "$run"/eval-*.json "$run"/eval-*.log "$run"/eval-*.hyp.txt; do cp "$f" "$dest/"; done
# The architecture: a pruning run's exported model, else the trained checkpoint's.
for a in "$run/pruned/architecture.json" "$run/checkpoints/best/architecture.json" \
  "$run/checkpoints/last/architecture.json"; do
  if [ -f "$a" ]; then cp "$a" "$dest/architecture.json"; break; fi
done
if [ $# -gt 0 ]; then
  grep -hE '^\[headcount\]|Elapsed \(wall|Maximum resident|Command being timed' "$@" > "$dest/train.log.tmp" || true
  mv "$dest/train.log.tmp" "$dest/train.log"
fi
# prune.gate_seeds: each finished gate run's records (RUN/gate-seeds/seed-S) beside the run's own.
for g in "$run"/gate-seeds/seed-*; do
  [ -f "$g/summary.json" ] && bash "$0" "$g" "$dest/gate-seeds/$(basename "$g")" > /dev/null
done
echo "records of $run -> $dest:"
ls "$dest"
