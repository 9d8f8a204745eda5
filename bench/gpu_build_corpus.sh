#!/usr/bin/env bash
# On the GPU machine (16 cores, no network): issue 22's corpus benchmark over the image's torch.
# Here first: the .gpu/wheels folder of bench/gpu_real_kernels.sh (kernelwheel's own wheel and its
# dependencies) and kernels-community's relu/activation/layer-norm in .gpu/corpus.
# Device call: carry [".gpu"], command `bash bench/gpu_build_corpus.sh`; tables in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-corpus}
mkdir -p "$OUT"
GPU_PACKAGES="kernelwheel"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
VAR=torch211-cxx11-cu130-x86_64-linux
common=(--variant "$VAR" --python "$V/bin/python" --cuda-home "${CUDA_HOME:-/usr/local/cuda-13.0}")
cat /proc/loadavg > "$OUT/load.txt"; nproc >> "$OUT/load.txt"
# (a) one file x the recipe's 10 capabilities; (b) 56 files; auto split, then 1 thread x 16 jobs
env -u CXX -u CC "$V/bin/python" bench/build_corpus.py "${common[@]}" --fixture relu-like \
  --fixture layernorm-like:56 --warm --out "$OUT/auto.md" 2>&1 | tail -30
env -u CXX -u CC "$V/bin/python" bench/build_corpus.py "${common[@]}" --nvcc-threads 1 \
  --fixture layernorm-like:56 --out "$OUT/threads1.md" 2>&1 | tail -12
if [ -d .gpu/corpus ]; then
  env -u CXX -u CC "$V/bin/python" bench/build_corpus.py "${common[@]}" .gpu/corpus/* \
    --out "$OUT/corpus.md" 2>&1 | tail -20
fi
cat /proc/loadavg >> "$OUT/load.txt"
