#!/usr/bin/env bash
# Install what kernelwheel needs for aarch64 cross builds on a Debian/Ubuntu x86_64 machine:
#
#   g++-aarch64-linux-gnu   the cross compiler (C/C++ and nvcc's host compiler, -ccbin)
#   qemu-user-static        runs aarch64 programs here (the emulated test, tests/builder/
#                           test_aarch64.py)
#
# With --emulation it also enables the arm64 package architecture (dpkg --add-architecture arm64;
# apt-get update), so the emulated test can fetch an aarch64 Python from Debian's arm64 packages
# with `apt-get download`. Nothing arm64 is installed into the system by this script.
#
# Usage: bash scripts/install-cross.sh [--emulation] [--dry-run]
set -euo pipefail

emulation=0
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --emulation) emulation=1 ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install-cross.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done

run() {
  echo "+ $*"
  if [ "$dry_run" = 0 ]; then "$@"; fi
}

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-cross.sh: apt-get not found. Install an aarch64-linux-gnu g++ cross compiler and" >&2
  echo "qemu-user (static) with your distribution's package manager." >&2
  exit 1
fi

SUDO=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
    echo "install-cross.sh: needs root (or sudo) to run apt-get" >&2; exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
if [ "$emulation" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  run "${SUDO[@]}" dpkg --add-architecture arm64
fi
run "${SUDO[@]}" apt-get update -q
run "${SUDO[@]}" apt-get install -y -q --no-install-recommends g++-aarch64-linux-gnu qemu-user-static

# binfmt_misc lets the kernel run aarch64 binaries directly; kernelwheel's test calls
# qemu-aarch64-static explicitly and does not need it, so failing here is only a note.
if [ "$dry_run" = 0 ] && [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
  "${SUDO[@]}" mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null \
    || echo "note: binfmt_misc is not mounted (not needed: the tests call qemu-aarch64-static)"
fi

if [ "$dry_run" = 0 ]; then
  aarch64-linux-gnu-g++ --version | head -1
  qemu-aarch64-static --version | head -1
fi
