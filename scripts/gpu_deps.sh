#!/usr/bin/env bash
# Run HERE (Debian 12, package registry reachable): gathers what a GPU machine without a package
# registry needs to build headcount against its own LibTorch, into one folder that the device
# tool's `carry` takes along (issue 21). The folder is ignored by git.
#
#   bash scripts/gpu_deps.sh [OUT]        # default build-gpu-deps/ (~45 MB unpacked)
#
# It holds Debian 12's development packages of yaml-cpp, fmt, nlohmann-json, CLI11, GoogleTest,
# Eigen, ICU and protobuf unpacked under OUT/usr (no static libraries but GoogleTest's, no docs),
# and the static SentencePiece of scripts/build_sentencepiece.sh under OUT/sentencepiece.
# scripts/gpu_check.sh uses it on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-gpu-deps}
packages=(libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev
  libgtest-dev libeigen3-dev libicu-dev libicu72 libprotobuf-dev libprotobuf32
  libprotobuf-lite32)
bash scripts/build_sentencepiece.sh "${HEADCOUNT_SENTENCEPIECE_PREFIX:-/opt/headcount-deps/sentencepiece}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download "${packages[@]}" >/dev/null)
rm -rf "$out"
mkdir -p "$out"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$out"; done
rm -rf "$out"/usr/share/doc "$out"/usr/share/man "$out"/usr/share/lintian "$out"/usr/share/locale
find "$out" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
# Within the device tool's 64 MiB: ICU's unused libraries, Eigen's unsupported modules.
rm -f "$out"/usr/lib/x86_64-linux-gnu/libicu{io,test,tu}.*
rm -rf "$out"/usr/include/eigen3/unsupported
cp -a "${HEADCOUNT_SENTENCEPIECE_PREFIX:-/opt/headcount-deps/sentencepiece}" "$out/sentencepiece"
dpkg-query -W -f='${Package} ${Version}\n' "${packages[@]}" 2>/dev/null >"$out/PACKAGES" || true
echo "[gpu-deps] $(du -sh "$out" | cut -f1) in $out; carry it with the device tool: carry: [\"$out\"]"
