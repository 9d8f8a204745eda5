#!/usr/bin/env bash
# The main job on the bundled example, from a fresh machine:
#   1. install kernelwheel into .venv
#   2. kernelwheel build kernels/img2gray  (creates the build environment of the newest torch
#      with the newest CUDA the driver loads; without a GPU, of the newest CPU variant; where
#      that variant's torch cannot be fetched, the build itself falls back to the newest one
#      whose torch can be, and says which it passed over)
#   3. kernelwheel install the wheel into a fresh venv holding torch, convert a sample image.
# Extra arguments go to `kernelwheel build` (e.g. --variant torch213-cxx11-cpu-x86_64-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --disable-pip-version-check -q -e .

rm -rf wheelhouse/img2gray-*.whl
# The default variant is this machine's (docs/building.md#the-default-variant).
.venv/bin/kernelwheel build kernels/img2gray --output-dir wheelhouse "$@"
wheel=$(ls -t wheelhouse/img2gray-*.whl | head -n 1)

rm -rf .demo-venv
"$PY" -m venv .demo-venv
# A user's environment: torch first, then `kernelwheel install` picks the build that fits that
# torch out of the wheelhouse and installs it pinned, leaving torch as it is.
# The torch the wheel was built for (its Requires-Dist, e.g. torch==2.14.*).
torch_req=$(.venv/bin/python -c '
import sys
from pathlib import Path
from kernelwheel.wheels.reader import parse_metadata, read_metadata
reqs = parse_metadata(read_metadata(Path(sys.argv[1]))).get_all("Requires-Dist") or []
print(next(r for r in reqs if r.startswith("torch")))' "$wheel")
.demo-venv/bin/python -m pip install --disable-pip-version-check -q "$torch_req" "pillow>=10,<13" "numpy>=1.26,<3"
.venv/bin/kernelwheel install img2gray --find-links wheelhouse --python .demo-venv/bin/python
.demo-venv/bin/python kernels/img2gray/examples/convert.py \
  kernels/img2gray/examples/sample.png wheelhouse/sample-gray.png
echo "wheel: $wheel"
echo "gray image: wheelhouse/sample-gray.png"
