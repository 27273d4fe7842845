#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on the embedded default
# corpus (Spanish->English Bible from Debian's SWORD modules). Idempotent: the corpus and the
# vocabulary are reused when they exist.
#
# What runs today: prepare the corpus, train the SentencePiece vocabulary, print the statistics.
# Training, pruning and the BLEU-against-heads report join as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
config=${1:-configs/bible.yaml}
echo "[quickstart] corpus statistics ($config)"
./build/headcount data stats "$config"
echo "[quickstart] vocabulary"
./build/headcount vocab "$config"
