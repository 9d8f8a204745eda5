#!/usr/bin/env bash
# On the GPU machine (16 cores): kernels-community layer-norm (59 units), cold `kernelwheel dev`
# with every unit's seconds already recorded (issue 39 item 1: the second cold build of a project
# starts its units longest first by the record; the record is the one bench/gpu_longest_first.sh
# wrote, committed as docs/evidence/scale/layer-norm-unit-seconds.json), its wall, CPU seconds and
# ninja's log; then three unchanged dev runs (issue 37: <= 2 s) and one under cProfile.
# Device call (carry [".gpu"]; .gpu/ as bench/gpu_dev_loop.sh says): bash bench/gpu_recorded_order.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-recorded-order}
mkdir -p "$OUT"
GPU_PACKAGES="kernelwheel pytest"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} KERNELWHEEL_CACHE_DIR=/tmp/kw-cache
KW=(env -u CXX -u CC "$V/bin/kernelwheel")
rm -rf /tmp/layer-norm /tmp/kw-cache && cp -r .gpu/corpus/layer-norm /tmp/layer-norm
# The record where kernelwheel keeps it for this project folder (builder/unit_costs.store_path).
STORE=$("$V/bin/python" -c 'import sys; from pathlib import Path
from kernelwheel.builder.unit_costs import store_path
print(store_path(Path(sys.argv[1]), Path(sys.argv[2])))' /tmp/kw-cache /tmp/layer-norm)
mkdir -p "$(dirname "$STORE")" && cp docs/evidence/scale/layer-norm-unit-seconds.json "$STORE"
nproc > "$OUT/times.txt"
/usr/bin/time -f "cold dev (recorded order): wall %e s, user %U s, sys %S s" -a -o "$OUT/times.txt" \
  "${KW[@]}" dev /tmp/layer-norm --python "$V/bin/python" > "$OUT/cold-dev.log" 2>&1
echo "cold dev exit $?" >> "$OUT/times.txt"
cp /tmp/kw-cache/dev/layer_norm-*/*/obj/.ninja_log "$OUT/ninja_log.txt" 2>/dev/null
for _ in 1 2 3; do
  /usr/bin/time -f "unchanged dev: %e s" -a -o "$OUT/times.txt" \
    "${KW[@]}" dev /tmp/layer-norm --python "$V/bin/python" > /dev/null 2>&1
done
env -u CXX -u CC "$V/bin/python" -m cProfile -s cumtime "$V/bin/kernelwheel" dev /tmp/layer-norm \
  --python "$V/bin/python" 2>&1 | head -n 70 > "$OUT/profile.txt"
cat "$OUT/times.txt"
