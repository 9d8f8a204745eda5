#!/usr/bin/env bash
# On the GPU machine: the first unchanged `kernelwheel dev` right after a cold one (issue 37's
# "unchanged <= 2 s"; layer-norm's took 8.0 s, the next ones 1.44 and 1.01 s). PROJECT (default
# the bundled img2gray) is built cold, then the next run is timed with the probe
# records listed before and after, then three timed runs and one under cProfile. Results under $OUT.
# COSTS: a unit-seconds record to seed (builder/unit_costs), so a big cold build starts longest first.
# Device call (carry [".gpu"], see bench/gpu_dev_loop.sh):
#   bash bench/gpu_first_unchanged.sh [PROJECT [COSTS]]
set -uo pipefail
cd "$(dirname "$0")/.."
PROJECT=${1:-kernels/img2gray}
COSTS=${2:-}
OUT=${OUT:-$PWD/out/gpu-first-unchanged}
mkdir -p "$OUT"
GPU_PACKAGES="kernelwheel pytest"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} KERNELWHEEL_CACHE_DIR=/tmp/kw-cache
KW=(env -u CXX -u CC "$V/bin/kernelwheel")
rm -rf /tmp/kw-cache /tmp/proj && cp -r "$PROJECT" /tmp/proj
if [ -n "$COSTS" ]; then
  STORE=$("$V/bin/python" -c 'import sys; from pathlib import Path
from kernelwheel.builder.unit_costs import store_path
print(store_path(Path(sys.argv[1]), Path(sys.argv[2])))' /tmp/kw-cache /tmp/proj)
  mkdir -p "$(dirname "$STORE")" && cp "$COSTS" "$STORE"
fi
records() { echo "== $1"; ls -l --time-style=+%T.%N /tmp/kw-cache/interpreters 2>&1; }
nproc > "$OUT/times.txt"
timed() { /usr/bin/time -f "$1: %e s" -a -o "$OUT/times.txt" "${@:2}"; }
{
  /usr/bin/time -f "cold dev: wall %e s, user %U s, sys %S s" -a -o "$OUT/times.txt" \
    "${KW[@]}" dev /tmp/proj --python "$V/bin/python" > "$OUT/cold-dev.log" 2>&1
  cp /tmp/kw-cache/dev/*/*/obj/.ninja_log "$OUT/ninja_log.txt" 2>/dev/null
  records "after the cold run"
  timed "first unchanged dev" "${KW[@]}" dev /tmp/proj --python "$V/bin/python" \
    > "$OUT/first-unchanged.log" 2>&1
  records "after the first unchanged run"
  for _ in 1 2 3; do
    timed "unchanged dev" "${KW[@]}" dev /tmp/proj --python "$V/bin/python" > /dev/null 2>&1
  done
  env -u CXX -u CC "$V/bin/python" -m cProfile -s cumtime "$V/bin/kernelwheel" dev /tmp/proj \
    --python "$V/bin/python" > "$OUT/unchanged-profile.txt" 2>&1
} >> "$OUT/times.txt" 2>&1
cat "$OUT/times.txt"
grep -h "compile (" "$OUT/first-unchanged.log"
