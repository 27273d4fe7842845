#!/usr/bin/env bash
# Copies a checkpoint folder without its optimizer and RNG state (optimizer.pt, rng.pt): the
# weights in fp32 (model.pt), architecture.json, config.yaml, state.json, meta.json and vocab/.
# What is left is what `prune.init_from`, `eval`, `translate` and the analyses read; it cannot
# resume training. Writes SHA256SUMS beside the files, into a temporary folder renamed into place.
#
#   scripts/export_checkpoint.sh RUN/checkpoints/best experiments/NAME/baseline
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 CHECKPOINT_DIR DEST_DIR" >&2
  exit 2
fi
src=$1
dest=$2
for f in model.pt architecture.json config.yaml state.json meta.json vocab; do
  if [[ ! -e "$src/$f" ]]; then
    echo "$0: $src is not a headcount checkpoint: $f is missing" >&2
    exit 1
  fi
done
if [[ -e "$dest" ]]; then
  echo "$0: $dest exists: remove it first (nothing was written)" >&2
  exit 1
fi
tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
cp -r "$src/model.pt" "$src/architecture.json" "$src/config.yaml" "$src/state.json" \
  "$src/meta.json" "$src/vocab" "$tmp/"
(cd "$tmp" && find . -type f ! -name SHA256SUMS | sort | sed 's|^\./||' | xargs sha256sum > SHA256SUMS)
mv "$tmp" "$dest"
trap - EXIT
du -sh "$dest"
cat "$dest/SHA256SUMS"
