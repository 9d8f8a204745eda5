#!/usr/bin/env bash
# The GPU run in one line (build wheel with kernelwheel, fresh venv, checks, timings): see bench/gpu_check.py.
set -o pipefail; cd "$(dirname "$0")/.." && mkdir -p "${OUT:=$PWD/out/gpu}" && PYTHONUNBUFFERED=1 "${PYTHON:-python3}" bench/gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_check.log"
