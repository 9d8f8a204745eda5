#!/usr/bin/env bash
# The GPU rows of issue 15 in one device call (see bench/gpu_perf.py): build img2gray with
# kernelwheel per fatbin setting, the kernel's tests, public call vs copy_, fatbin table.
# Pure-Python build dependencies the GPU image lacks (auditwheel's policy data, pyelftools) travel
# as wheels in $WHEELS (default: .whl beside this checkout's root).
set -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu_perf}; mkdir -p "$OUT"
WHEELS=${WHEELS:-.whl}
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/kw_site "$WHEELS"/*.whl && export PYTHONPATH=/tmp/kw_site${PYTHONPATH:+:$PYTHONPATH}
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  nvcc --version 2>/dev/null | tail -2; gcc --version | head -1; nproc; } 2>&1 | tee "$OUT/gpu_perf_env.log"
PYTHONUNBUFFERED=1 env -u CXX -u CC python3 bench/gpu_perf.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_perf.log"
