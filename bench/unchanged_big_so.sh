#!/usr/bin/env bash
# An unchanged `kernelwheel dev` of a project whose shared object is large (issue 37's
# "unchanged <= 2 s", here): `kernelwheel init kx --backends cpu` plus one unit embedding N MB of
# random data (.incbin), a stand-in for layer-norm's 190 MB fatbin. Prints the first dev build's
# time, the first run after linking, then three unchanged runs.
#   bash bench/unchanged_big_so.sh PYTHON_WITH_TORCH [MB]   (e.g. a venv holding torch 2.13.0)
set -euo pipefail
PY=${1:?a python holding torch}
MB=${2:-200}
KW=${KW:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/kernelwheel}
work=$(mktemp -d)
"$KW" init kx --backends cpu --directory "$work" > /dev/null
cd "$work/kx"
head -c "$((MB * 1000000))" /dev/urandom > csrc/blob.bin
printf '__asm__(".section .rodata\\n.global kx_blob\\nkx_blob:\\n.incbin \\"%s\\"\\n.previous\\n");\n' \
  "$PWD/csrc/blob.bin" > csrc/blob.cpp
sed -i 's|src = \["csrc/kx_cpu.cpp", "csrc/kx.h"\]|src = ["csrc/kx_cpu.cpp", "csrc/kx.h", "csrc/blob.cpp"]|' build.toml
t() { /usr/bin/time -f "$1: %e s" "$KW" dev . --python "$PY" > /dev/null; }
t "first dev build"
t "first run after linking"
for i in 1 2 3; do t "unchanged $i"; done
so=$(find "${KERNELWHEEL_CACHE_DIR:-$HOME/.cache/kernelwheel}/dev" -name '_kx_dev*.so' -newer build.toml | head -1)
echo "shared object: $(stat -c %s "$so") bytes"
