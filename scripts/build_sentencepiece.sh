#!/usr/bin/env bash
# Builds SentencePiece from Debian's own source package as static, position-independent
# libraries against the system protobuf, and installs them under $1 (default
# /opt/headcount-deps/sentencepiece).
#
# Why not the binary package: Debian's libsentencepiece0 carries its own protobuf-lite 3.14 and
# exports its symbols; a program that also links LibTorch (system protobuf 3.21) crashes before
# main (see ../shared/brief/BUILD.md, sentencepiece #186). Idempotent: does nothing when the
# stamp file of the same version exists.
set -euo pipefail
prefix=${1:-/opt/headcount-deps/sentencepiece}
version=0.1.97
stamp="$prefix/.headcount-built-$version"
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
# init.h (patch 0023) includes the bundled protobuf-lite header by path even when building against
# the system protobuf; point it at the system header.
sed -i 's|"third_party/protobuf-lite/google/protobuf/message_lite.h"|<google/protobuf/message_lite.h>|' \
  src/src/init.h
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release \
  -DSPM_ENABLE_SHARED=OFF -DSPM_USE_BUILTIN_PROTOBUF=OFF \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build build -j"$(nproc)" --target sentencepiece-static sentencepiece_train-static >/dev/null
as_root mkdir -p "$prefix/lib" "$prefix/include"
as_root cp build/src/libsentencepiece.a build/src/libsentencepiece_train.a "$prefix/lib/"
as_root cp src/src/sentencepiece_processor.h src/src/sentencepiece_trainer.h "$prefix/include/"
as_root cp src/LICENSE "$prefix/LICENSE" 2>/dev/null || true
as_root touch "$stamp"
echo "sentencepiece $version: built into $prefix"
