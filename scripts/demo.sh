#!/usr/bin/env bash
# The main job on the bundled example, from a fresh machine:
#   1. install kernelwheel into .venv
#   2. kernelwheel build kernels/img2gray  (creates the torch 2.14 + CUDA 13.0 build environment)
#   3. pip install the wheel into a fresh venv and convert a sample image to grayscale.
# Extra arguments go to `kernelwheel build` (e.g. --variant torch213-cxx11-cpu-x86_64-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --disable-pip-version-check -q -e .

rm -rf wheelhouse/img2gray-*.whl
.venv/bin/kernelwheel build kernels/img2gray --output-dir wheelhouse "$@"
wheel=$(ls -t wheelhouse/img2gray-*.whl | head -n 1)

rm -rf .demo-venv
"$PY" -m venv .demo-venv
# pip resolves the wheel's Requires-Dist (torch==X.Y.*) like any user install would.
.demo-venv/bin/python -m pip install --disable-pip-version-check -q "$wheel" "pillow>=10,<13" "numpy>=1.26,<3"
.demo-venv/bin/python kernels/img2gray/examples/convert.py \
  kernels/img2gray/examples/sample.png wheelhouse/sample-gray.png
echo "wheel: $wheel"
echo "gray image: wheelhouse/sample-gray.png"
