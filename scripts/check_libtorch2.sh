#!/usr/bin/env bash
# Builds headcount and runs its whole test suite against Debian 13's LibTorch 2.x, in a Debian 13
# ("trixie") root made with debootstrap inside this machine (issue 21). Any developer on a Debian
# or Ubuntu machine with root can rerun it; it is not part of .ci/run (a fresh root downloads
# ~1 GB and builds for ~20 minutes on 2 cores).
#
#   bash scripts/check_libtorch2.sh            # bootstrap (once), install, build, test
#   bash scripts/check_libtorch2.sh -R Prune   # extra arguments go to ctest
#
# Environment: HEADCOUNT_LIBTORCH2_ROOT (default /var/tmp/headcount-trixie: the root, kept between
# runs so that a second run only rebuilds what changed), HEADCOUNT_LIBTORCH2_SUITE (default
# trixie), HEADCOUNT_MIRROR (default http://deb.debian.org/debian), HEADCOUNT_JOBS (default 2).
#
# The working tree (tracked and untracked files that git does not ignore) is copied into the root
# at /src/headcount; its build folder there is separate from this checkout's build/.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${HEADCOUNT_LIBTORCH2_ROOT:-/var/tmp/headcount-trixie}
suite=${HEADCOUNT_LIBTORCH2_SUITE:-trixie}
mirror=${HEADCOUNT_MIRROR:-http://deb.debian.org/debian}
jobs=${HEADCOUNT_JOBS:-2}

if [ "$(id -u)" != 0 ]; then
  echo "check_libtorch2.sh: needs root (debootstrap, mount, chroot); run it with sudo" >&2
  exit 2
fi
log() { echo "[libtorch2] $*"; }

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
fi

stamp="$root/.headcount-bootstrapped-$suite"
if [ ! -f "$stamp" ]; then
  log "debootstrap $suite into $root (minbase)"
  mkdir -p "$root"
  debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror"
  touch "$stamp"
else
  log "root $root already bootstrapped ($suite)"
fi

# Binary and source packages of the suite (setup.sh builds SentencePiece from its source package).
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb deb-src
URIs: $mirror
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

# SentencePiece 0.1.97's source, the version setup.sh pins (the mirror has no trixie source of it).
Types: deb-src
URIs: $mirror
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount_into() { # mount_into TYPE|--bind SOURCE TARGET
  mkdir -p "$3"
  if mountpoint -q "$3"; then return; fi
  if [ "$1" = --bind ]; then mount --rbind "$2" "$3"; else mount -t "$1" "$2" "$3"; fi
  mounts+=("$3")
}
mount_into proc proc "$root/proc"
mount_into sysfs sys "$root/sys"
mount_into --bind /dev "$root/dev"
mount_into tmpfs tmpfs "$root/tmp"

log "copying the working tree to $root/src/headcount"
# Files whose content changed are copied with a new modification time (so that ninja rebuilds what
# they touch even when the checkout's own mtime is older than the chroot's object files); files
# gone from the tree are removed; the chroot's own build folder stays.
stage=$(mktemp -d)
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$stage")
dest="$root/src/headcount"
mkdir -p "$dest"
(cd "$stage" && find . -type f -print0) | while IFS= read -r -d '' f; do
  if ! cmp -s "$stage/$f" "$dest/$f"; then
    mkdir -p "$(dirname "$dest/$f")"
    cp "$stage/$f" "$dest/$f"
  fi
done
(cd "$dest" && find . -path ./build -prune -o -type f -print0) | while IFS= read -r -d '' f; do
  [ -e "$stage/$f" ] || rm -f "$dest/$f"
done
rm -rf "$stage"
if [ -d "$repo/../shared" ]; then
  rm -rf "$root/src/shared"
  cp -a "$repo/../shared" "$root/src/shared"
fi

log "setup and tests inside $suite"
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HEADCOUNT_JOBS="$jobs" \
  /bin/bash -c 'set -euo pipefail
    cd /src/headcount
    apt-get update -q >/dev/null
    dpkg-query -W -f="LibTorch: \${Version}\n" libtorch-dev 2>/dev/null || true
    bash scripts/test.sh "$@"
    dpkg-query -W -f="[libtorch2] built and tested against libtorch-dev \${Version}\n" libtorch-dev' \
  check "$@"
