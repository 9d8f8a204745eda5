#!/usr/bin/env bash
# Are the wheels of a refactor byte-identical to those of a reference commit? Builds img2gray's
# CPU and cu130 (capability 9.0) variants and a tvm-ffi fixture (tests/support/kinds.py: CPU,
# and CUDA for one capability) with both trees, no compiler cache, into separate folders, and
# compares the wheels file by file.
# Usage: bench/same_bytes.sh REF [OUT]   (REF: a commit; OUT: where the two wheelhouses go)
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?a reference commit}
out=${2:-/tmp/kernelwheel-same-bytes}
rm -rf "$out" && mkdir -p "$out"
git worktree add -f --detach "$out/ref-tree" "$ref" -q
trap 'git worktree remove --force "$out/ref-tree"' EXIT
PYTHONPATH=tests .venv/bin/python -c "
from pathlib import Path; from support.kinds import write_tvm_ffi_project
write_tvm_ffi_project(Path('$out/add-one'))"
export KERNELWHEEL_NO_CCACHE=1
cpu_tvm="tvm-ffi01-cpu-$(uname -m)-linux" cuda_tvm="tvm-ffi01-cu130-$(uname -m)-linux"
for side in ref new; do
  src=$([ $side = ref ] && echo "$out/ref-tree/src" || echo src)
  kw() { PYTHONPATH="$src" .venv/bin/python -m kernelwheel "$@"; }
  kw build kernels/img2gray -o "$out/$side" --variant torch213-cxx11-cpu-x86_64-linux -q
  kw build kernels/img2gray -o "$out/$side" --variant torch214-cxx11-cu130-x86_64-linux \
    --cuda-capabilities 9.0 -q
  kw build "$out/add-one" -o "$out/$side" --variant "$cpu_tvm" -q
  kw build "$out/add-one" -o "$out/$side" --variant "$cuda_tvm" --cuda-capabilities 9.0 -q
done
.venv/bin/python - "$out" <<'PY'
import sys, zipfile
from pathlib import Path
out = Path(sys.argv[1])
for new in sorted((out / "new").glob("*.whl")):
    ref = out / "ref" / new.name
    if not ref.exists():
        print(f"{new.name}: no reference wheel"); continue
    if ref.read_bytes() == new.read_bytes():
        print(f"{new.name}: byte-identical"); continue
    with zipfile.ZipFile(ref) as a, zipfile.ZipFile(new) as b:
        names = sorted(set(a.namelist()) | set(b.namelist()))
        differ = [n for n in names if n not in a.namelist() or n not in b.namelist() or a.read(n) != b.read(n)]
    print(f"{new.name}: differs in {differ}")
PY
