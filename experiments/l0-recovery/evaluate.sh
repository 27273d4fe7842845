# Sourced by the study's scripts (from the repository root, with the binary in $B):
#   evaluate CHECKPOINT RUN
# writes RUN/eval-SPLIT.json, .hyp.txt and .log for dev and test (the checkpoint's decode config:
# beam 4, all verses), skipping a split whose evaluation exists.
evaluate() {
  for s in dev test; do
    [ -f "$2/eval-$s.json" ] || "$B" eval --checkpoint "$1" --split "$s" --out "$2/eval-$s.json" \
      --hyp-out "$2/eval-$s.hyp.txt" > "$2/eval-$s.log" 2>&1
  done
}
