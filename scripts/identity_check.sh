#!/usr/bin/env bash
# A fixed-seed tiny `train` run and five `prune` runs (lambda, target head count, Fisher with the
# one-pass and the sequential refit, the other config choices), with eval, translate, analyze heads/align/relevance and the report over the
# committed reference records, whose outputs must not change under a refactoring:
# prints one sha256 per file (weights of every checkpoint, metrics.jsonl and gates.jsonl without
# their wall-clock fields, head_removal.csv, pruning.json without timings). Run it with the
# binary before and after and diff the two outputs:
#   bash scripts/identity_check.sh OLD_BINARY /tmp/id-old > old.txt
#   bash scripts/identity_check.sh build/headcount /tmp/id-new > new.txt && diff old.txt new.txt
# One thread, so that no reduction order depends on scheduling; fp32 and OpenBLAS's Haswell
# kernels, so that the hashes do not depend on the CPU (auto precision is bf16 on an avx512_bf16
# CPU, and OpenBLAS picks AVX-512 kernels there). Needs data/bible (prepared by the
# binary on first use).
set -euo pipefail
bin=$(realpath "$1")
out=$2
cd "$(dirname "$0")/.."
rm -rf "$out"
mkdir -p "$out"
export OMP_NUM_THREADS=1
export OPENBLAS_CORETYPE=Haswell
common=(--set threads.intra_op=1 --set train.log_every=10 --set train.precision=fp32 --set decode.precision=fp32)
"$bin" train configs/tiny.yaml "${common[@]}" --set train.max_steps=60 --set train.eval_every=30 \
  --set train.eval_max_sentences=20 --out "$out/train" >"$out/train.log" 2>&1
"$bin" prune configs/tiny.yaml configs/quickstart-prune.yaml "${common[@]}" \
  --set prune.init_from="$out/train/checkpoints/last" --set prune.lambda=0.3 --set prune.gate_lr=0.1 \
  --set train.max_steps=60 --set train.eval_every=20 --set train.eval_max_sentences=20 \
  --out "$out/prune" >"$out/prune.log" 2>&1
# Target mode (the Lagrangian path): exactly 6 of the 24 heads.
"$bin" prune configs/tiny.yaml configs/quickstart-prune.yaml "${common[@]}" \
  --set prune.init_from="$out/train/checkpoints/last" --set prune.target_heads=6 \
  --set prune.target_warmup_steps=20 --set prune.gate_lr=0.1 \
  --set train.max_steps=60 --set train.eval_every=20 --set train.eval_max_sentences=20 \
  --out "$out/prune-target" >"$out/prune-target.log" 2>&1
# Fisher post-training pruning to 12 heads (no training: masks, refit, the same run-folder files);
# the one-pass refit (the earlier default; sequential_stream, the default now, is tested in the suite).
"$bin" prune configs/tiny.yaml configs/quickstart-prune.yaml "${common[@]}" --method fisher \
  --set prune.init_from="$out/train/checkpoints/last" --set prune.target_heads=12 \
  --set prune.reconstruct_mode=one_pass \
  --set train.eval_max_sentences=20 --out "$out/prune-fisher" >"$out/prune-fisher.log" 2>&1
# And the sequential refit (the default): both residual streams walked layer by layer through
# the model's own sublayers.
"$bin" prune configs/tiny.yaml configs/quickstart-prune.yaml "${common[@]}" --method fisher \
  --set prune.init_from="$out/train/checkpoints/last" --set prune.target_heads=12 \
  --set prune.reconstruct_mode=sequential_stream \
  --set train.eval_max_sentences=20 --out "$out/prune-fisher-seq" >"$out/prune-fisher-seq.log" 2>&1

# The other choices of the config: a linear lambda schedule, L_C as a sum, per-example gate noise,
# a cosine learning rate, the best checkpoint by dev loss.
"$bin" prune configs/tiny.yaml configs/quickstart-prune.yaml "${common[@]}" \
  --set prune.init_from="$out/train/checkpoints/last" --set prune.lambda=0.3 --set prune.gate_lr=0.1 \
  --set prune.lambda_schedule=linear --set prune.lambda_warmup_steps=30 --set prune.penalty_norm=sum \
  --set prune.noise=example --set train.lr_schedule=cosine --set train.best_metric=loss \
  --set train.max_steps=60 --set train.eval_every=20 --set train.eval_max_sentences=20 \
  --out "$out/prune-choices" >"$out/prune-choices.log" 2>&1

# The readers of checkpoints and run folders: eval and translate (the translate-and-score path),
# the analyses (heads, align, relevance: their statistics and the prune run's kept heads), and
# the report over the committed reference records (their recorded evaluations, no decoding).
ro=(--set threads.intra_op=1 --set decode.precision=fp32)
head -n 30 data/bible/dev.es >"$out/src.txt"
head -n 30 data/bible/dev.en >"$out/ref.txt"
mkdir -p "$out/eval"
"$bin" eval --checkpoint "$out/train/checkpoints/last" "${ro[@]}" --src "$out/src.txt" \
  --ref "$out/ref.txt" --out "$out/eval/eval.json" --hyp-out "$out/eval/hyp.txt" >"$out/eval.log" 2>&1
"$bin" translate --checkpoint "$out/prune/pruned" "${ro[@]}" -i "$out/src.txt" \
  -o "$out/eval/translate.txt" >>"$out/eval.log" 2>&1
for a in heads align relevance; do
  extra=()
  if [ "$a" != heads ]; then extra=(--run "$out/prune"); fi
  "$bin" analyze "$a" --checkpoint "$out/train/checkpoints/last" "${ro[@]}" --sentences 30 \
    "${extra[@]}" --out "$out/analyze-$a" >"$out/analyze-$a.log" 2>&1
done
cp -r experiments/voita-table-cpu/records "$out/report"
"$bin" report "$out/report" --sweep experiments/voita-table-cpu/sweep.yaml --no-plots \
  >"$out/report.log" 2>&1

# Wall-clock fields differ between any two runs; everything else must not.
strip_times() {
  python3 -c '
import json, sys
drop = {"elapsed_s", "tgt_tokens_per_s", "train_seconds", "target_tokens_per_s", "seconds",
        "wall_seconds", "sent_per_s"}
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()
                if k not in drop and not k.endswith("seconds") and not k.endswith("_s")}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
text = open(sys.argv[1]).read().replace(sys.argv[2], "OUT")  # where the run was
if sys.argv[1].endswith(".jsonl"):
    for line in text.splitlines():
        if line.strip():
            print(json.dumps(clean(json.loads(line)), sort_keys=True))
else:
    print(json.dumps(clean(json.loads(text)), sort_keys=True))
' "$1" "$out_abs"
}

out_abs=$(realpath "$out")
cd "$out"
for f in $(find train prune prune-target prune-fisher prune-fisher-seq prune-choices -name model.pt -o -name gates.pt -o -name head_removal.csv \
  -o -name architecture.json | sort); do
  echo "$(sha256sum <"$f" | cut -c1-16)  $f"
done
for f in $(find train prune prune-target prune-fisher prune-fisher-seq prune-choices -maxdepth 1 -name '*.jsonl' -o -maxdepth 1 -name pruning.json \
  -o -maxdepth 1 -name summary.json | sort) $(find eval analyze-* -name '*.json' | sort); do
  echo "$(strip_times "$f" | sha256sum | cut -c1-16)  $f (times stripped)"
done
for f in $(find eval analyze-* -name '*.txt' -o -name '*.csv' -o -name '*.md' | sort) \
  report/results.csv report/results.md; do
  echo "$(sed "s|$out_abs|OUT|g" "$f" | sha256sum | cut -c1-16)  $f"
done
