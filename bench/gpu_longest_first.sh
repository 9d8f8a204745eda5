#!/usr/bin/env bash
# On the GPU machine (16 cores): kernels-community layer-norm (59 units), cold `kernelwheel dev`
# with no unit timed yet (the size x capabilities estimate orders the units; issue 39 item 1),
# its wall and CPU seconds and ninja's log (which unit ended last), then three unchanged dev runs
# (issue 37: <= 2 s) and one under cProfile. Results under $OUT as they come.
# Device call (carry [".gpu"]; .gpu/ as bench/gpu_dev_loop.sh says): bash bench/gpu_longest_first.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-longest-first}
mkdir -p "$OUT"
GPU_PACKAGES="kernelwheel pytest"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} KERNELWHEEL_CACHE_DIR=/tmp/kw-cache
KW=(env -u CXX -u CC "$V/bin/kernelwheel")
rm -rf /tmp/layer-norm && cp -r .gpu/corpus/layer-norm /tmp/layer-norm
nproc > "$OUT/times.txt"
/usr/bin/time -f "cold dev: wall %e s, user %U s, sys %S s" -a -o "$OUT/times.txt" \
  "${KW[@]}" dev /tmp/layer-norm --python "$V/bin/python" > "$OUT/cold-dev.log" 2>&1
echo "cold dev exit $?" >> "$OUT/times.txt"
cp /tmp/kw-cache/dev/layer_norm-*/*/obj/.ninja_log "$OUT/ninja_log.txt" 2>/dev/null
cp /tmp/kw-cache/unit-costs/*.json "$OUT/" 2>/dev/null
for _ in 1 2 3; do
  /usr/bin/time -f "unchanged dev: %e s" -a -o "$OUT/times.txt" \
    "${KW[@]}" dev /tmp/layer-norm --python "$V/bin/python" > /dev/null 2>&1
done
env -u CXX -u CC "$V/bin/python" -m cProfile -s cumtime "$V/bin/kernelwheel" dev /tmp/layer-norm \
  --python "$V/bin/python" 2>&1 | head -n 70 > "$OUT/profile.txt"
cat "$OUT/times.txt"
