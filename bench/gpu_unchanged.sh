#!/usr/bin/env bash
# On the GPU machine: where an unchanged `kernelwheel dev` spends its time (issue 37's "unchanged
# <= 2 s"). img2gray is built once, then: nvidia-smi's and libcuda's own answer times, three
# unchanged dev runs (named variant, and the default), one under cProfile. Results under $OUT.
# Device call (carry [".gpu"], see bench/gpu_dev_loop.sh for .gpu/): bash bench/gpu_unchanged.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-unchanged}
mkdir -p "$OUT"
GPU_PACKAGES="kernelwheel pytest"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} KERNELWHEEL_CACHE_DIR=/tmp/kw-cache
KW=(env -u CXX -u CC "$V/bin/kernelwheel")
rm -rf /tmp/img2gray && cp -r kernels/img2gray /tmp/img2gray
{
  "${KW[@]}" dev /tmp/img2gray --python "$V/bin/python" > "$OUT/first-dev.log" 2>&1
  echo "first dev: exit $?"
  for _ in 1 2 3; do
    /usr/bin/time -f "nvidia-smi query: %e s" nvidia-smi --query-gpu=uuid,compute_cap \
      --format=csv,noheader > /dev/null
  done
  for _ in 1 2 3; do
    /usr/bin/time -f "libcuda cuDriverGetVersion: %e s" "$V/bin/python" -c \
      'import ctypes; v = ctypes.c_int(); ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))'
  done
  for _ in 1 2 3; do
    /usr/bin/time -f "python startup: %e s" "$V/bin/python" -c pass
  done
  for how in "--variant torch211-cxx11-cu130-x86_64-linux" ""; do
    for _ in 1 2 3; do
      # shellcheck disable=SC2086  # the variant flag, or nothing
      /usr/bin/time -f "unchanged dev ${how:-(default variant)}: %e s" \
        "${KW[@]}" dev /tmp/img2gray --python "$V/bin/python" $how > /dev/null
    done
  done
} > "$OUT/times.txt" 2>&1
env -u CXX -u CC "$V/bin/python" -m cProfile -s cumtime "$V/bin/kernelwheel" dev /tmp/img2gray \
  --python "$V/bin/python" 2>&1 | head -n 90 > "$OUT/profile.txt"
cat "$OUT/times.txt"
