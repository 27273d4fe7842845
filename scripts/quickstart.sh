#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on the embedded default
# corpus (Spanish->English Bible from Debian's SWORD modules): prepare the corpus, train the
# vocabulary, train a small baseline, prune it under three lambdas, and print BLEU against the
# heads kept. Idempotent: what is done is reused (the same commands resume interrupted runs).
#   QUICKSTART_STEPS=N scales the baseline's steps (default 800) for a faster look.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
hc=./build/headcount
base_cfg=(configs/bible.yaml configs/quickstart.yaml)
steps=${QUICKSTART_STEPS:-800}
echo "[quickstart] corpus statistics"
$hc data stats configs/bible.yaml
echo "[quickstart] vocabulary"
$hc vocab configs/bible.yaml
echo "[quickstart] small baseline ($steps steps): runs/quickstart/base"
$hc train "${base_cfg[@]}" --set train.max_steps="$steps" --out runs/quickstart/base
for lambda in 0.01 0.05 0.2; do
  run=runs/quickstart/prune-l$lambda
  if [ -f "$run/pruning.json" ]; then
    echo "[quickstart] $run: done"
    continue
  fi
  echo "[quickstart] pruning with lambda $lambda: $run"
  $hc prune "${base_cfg[@]}" configs/quickstart-prune.yaml --set prune.lambda="$lambda" --out "$run"
done
echo
echo "[quickstart] BLEU against heads kept (dev, greedy; heads = encoder/decoder/decoder-encoder)"
/usr/bin/python3 - <<'PY'
import json
rows = []
with open('runs/quickstart/base/metrics.jsonl') as f:
    evals = [json.loads(l) for l in f if '"eval"' in l]
print(f"{'run':<28} {'heads e/d/d-e':>14} {'dev BLEU':>9} {'parameters':>11}")
print(f"{'baseline':<28} {'12/12/12':>14} {evals[-1]['dev_bleu']:>9.2f} {'':>11}")
for lam in ('0.01', '0.05', '0.2'):
    p = json.load(open(f'runs/quickstart/prune-l{lam}/pruning.json'))
    print(f"{'prune lambda ' + lam:<28} {p['heads_after_e_d_de']:>14} {p['dev_bleu_end']:>9.2f} "
          f"{p['parameters_after']:>11}")
PY
