#!/usr/bin/env bash
# Builds SentencePiece from Debian's own source package as static, position-independent
# libraries with its own bundled protobuf-lite, and installs them under $1 (default
# /opt/headcount-deps/sentencepiece).
#
# Why: SentencePiece needs protobuf, and so does LibTorch, each its own version. Debian's
# libsentencepiece0 exports its protobuf-lite 3.14 and a program that also links LibTorch (system
# protobuf 3.21) crashes before main (../shared/brief/BUILD.md, sentencepiece #186); built against
# the system protobuf instead, it crashed beside the official LibTorch, whose libtorch_cpu carries
# yet another protobuf (GPU.md). headcount links these static libraries, bundled protobuf-lite
# included, into a shared library of its own (libheadcount_spm.so, src/spm/) whose every symbol but
# its small C interface is local: SentencePiece's protobuf calls can bind to nothing else, whatever
# LibTorch the process holds. Idempotent: does nothing when the stamp file of this build exists.
set -euo pipefail
prefix=${1:-/opt/headcount-deps/sentencepiece}
version=0.1.97
stamp="$prefix/.headcount-built-$version-bundled-protobuf"
if [ -f "$stamp" ]; then
  echo "sentencepiece $version: already built in $prefix"
  exit 0
fi
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# apt-get source needs a deb-src entry for bookworm main.
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "adding a deb-src entry for bookworm main (/etc/apt/sources.list.d/headcount-src.sources)"
  as_root tee /etc/apt/sources.list.d/headcount-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  as_root apt-get update -q
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get source takes an exact version (no wildcard): pick the Debian revision of $version that
# the source index lists (a later suite's index lists its own version as well).
src_version=$(apt-cache showsrc sentencepiece 2>/dev/null |
  awk -v v="$version-" '$1 == "Version:" && index($2, v) == 1 { print $2; exit }')
apt-get source -q --download-only "sentencepiece=${src_version:-$version}" >/dev/null 2>&1 ||
  apt-get source -q --download-only sentencepiece
dpkg-source -x --no-check ./sentencepiece_*.dsc src >/dev/null
# Debian's packaging patch removes the static targets; take it back out.
patch -d src -R -p1 -s <src/debian/patches/disable-static-library.patch
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release \
  -DSPM_ENABLE_SHARED=OFF -DSPM_USE_BUILTIN_PROTOBUF=ON \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build build -j"$(nproc)" --target sentencepiece-static sentencepiece_train-static >/dev/null
as_root rm -rf "$prefix"
as_root mkdir -p "$prefix/lib" "$prefix/include"
as_root cp build/src/libsentencepiece.a build/src/libsentencepiece_train.a "$prefix/lib/"
as_root cp src/src/sentencepiece_processor.h src/src/sentencepiece_trainer.h "$prefix/include/"
as_root cp src/LICENSE "$prefix/LICENSE" 2>/dev/null || true
as_root touch "$stamp"
echo "sentencepiece $version: built into $prefix"
