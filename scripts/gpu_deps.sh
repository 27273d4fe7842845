#!/usr/bin/env bash
# Run HERE (Debian 12, package registry reachable): gathers what a GPU machine without a package
# registry needs to build headcount against its own LibTorch, into one folder that the device
# tool's `carry` takes along, and that archive (OUT.tar.xz, what travels). Both are ignored by git.
#
#   bash scripts/gpu_deps.sh [OUT]        # default build-gpu-deps/ and build-gpu-deps.tar.xz
#
# It holds Debian 12's development packages of yaml-cpp, nlohmann-json, CLI11, GoogleTest,
# Eigen, minizip (with zlib's headers) and ICU (its common library and data) unpacked under
# OUT/usr (no static libraries but GoogleTest's, no docs), and the static SentencePiece of
# scripts/build_sentencepiece.sh (with its own protobuf-lite: no protobuf package is needed) under
# OUT/sentencepiece, and the Bible corpus
# (data/bible, built here first if missing) under OUT/data/bible. The official LibTorch
# brings its own fmt, which the build uses header-only. Debian's fmt is left out: on the same
# -isystem path as yaml-cpp and nlohmann-json it came before LibTorch's in the library's
# precompiled header but after it in the CLI's sources, and fmt 9's format.h then hid fmt 12's
# base.h from LibTorch's ranges.h (the build of 2026-11-27 on the H100 stopped there). The checkout (~51 MB) and the archive (~11 MB) fit the device tool's
# 64 MiB together; scripts/gpu_check.sh unpacks and uses it on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-gpu-deps}
packages=(libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev
  libgtest-dev libeigen3-dev libicu-dev libicu72 libminizip-dev libminizip1 zlib1g-dev)
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
rm -f "$out"/usr/lib/x86_64-linux-gnu/libicu{io,test,tu,i18n}.* "$out"/usr/bin/* "$out"/usr/sbin/*
rm -rf "$out"/usr/share/icu
rm -rf "$out"/usr/include/eigen3/unsupported
cp -a "${HEADCOUNT_SENTENCEPIECE_PREFIX:-/opt/headcount-deps/sentencepiece}" "$out/sentencepiece"
dpkg-query -W -f='${Package} ${Version}\n' "${packages[@]}" 2>/dev/null >"$out/PACKAGES" || true
# The Bible corpus: building it needs Debian's SWORD tools, which the GPU machine lacks.
if [ ! -f data/bible/train.es ]; then
  ./build/headcount data bible --out data/bible
fi
mkdir -p "$out/data/bible"
find data/bible -maxdepth 1 -type f -exec cp {} "$out/data/bible/" \;
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -9 >"$out.tar.xz.tmp"
mv "$out.tar.xz.tmp" "$out.tar.xz"
echo "[gpu-deps] $(du -sh "$out" | cut -f1) in $out, $(du -sh "$out.tar.xz" | cut -f1) packed:" \
  "carry it with the device tool: carry: [\"$out.tar.xz\"]"
