#!/usr/bin/env bash
# Is the recipe's shortfall only length? Decodes finished runs again with other GNMT length
# penalties (decode.length_penalty, 0.6 by default: larger values favour longer translations),
# beam 4, all dev and test verses, translations kept, and copies the evaluations into the run's
# records as eval-SPLIT-lpALPHA.json (+ .hyp.txt, .log). Skips what exists; resumable.
#   bash experiments/l0-recovery/length_penalty.sh BINARY OUT "1.0 1.4" NAME...
# OUT/NAME: the run folder (a prune run's pruned/, else a train run's checkpoints/last), or a
# checkpoint folder itself (e.g. a link to experiments/voita-table-cpu/baseline: its evaluations
# then go to OUT/NAME-lp, outside the checkpoint);
# records: experiments/l0-recovery/records/NAME. The table reads them as runs with
# `eval: 'eval-{split}-lpALPHA'`.
set -euo pipefail
B=$(realpath "$1")
R=$(realpath "$2")
alphas=$3
shift 3
cd "$(dirname "$0")/../.."
records=experiments/l0-recovery/records
for name in "$@"; do
  ckpt="$R/$name/pruned"
  [ -d "$ckpt" ] || ckpt="$R/$name/checkpoints/last"
  [ -d "$ckpt" ] || ckpt="$R/$name"
  [ -f "$ckpt/model.pt" ] || { echo "$name: no checkpoint in $R/$name (pruned, checkpoints/last or the folder itself)" >&2; exit 1; }
  out="$R/$name"
  [ "$ckpt" = "$R/$name" ] && out="$R/$name-lp" && mkdir -p "$out"
  [ -d "$records/$name" ] || { echo "$name: no $records/$name (save its records first)" >&2; exit 1; }
  for a in $alphas; do
    for s in dev test; do
      stem="eval-$s-lp$a"
      [ -f "$records/$name/$stem.json" ] && continue
      echo "$(date -u +%FT%TZ) $name $s length penalty $a"
      "$B" eval --checkpoint "$ckpt" --split "$s" --length-penalty "$a" --out "$out/$stem.json" \
        --hyp-out "$out/$stem.hyp.txt" > "$out/$stem.log" 2>&1
      cp "$out/$stem.json" "$out/$stem.hyp.txt" "$out/$stem.log" "$records/$name/"
    done
  done
done
