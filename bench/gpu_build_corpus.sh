#!/usr/bin/env bash
# On the GPU machine (16 cores, no network): issue 22's build benchmark over the image's torch.
# Here first: the .gpu/wheels folder of bench/gpu_real_kernels.sh (kernelwheel's own wheel and its
# dependencies), and for `corpus`, kernels-community projects in .gpu/corpus.
# Device call: carry [".gpu"], command `bash bench/gpu_build_corpus.sh PART` (PART: fixtures,
# efficiency, sidebyside, sidebyside-8, sidebyside-16, fixed, flash-mla (then flash-mla-wait while it runs), split-compile, split-compile-2, flash-mla-test or corpus), timeout 600; tables and full logs in $OUT (nothing is piped through
# tail: a cut-off run keeps its output).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-corpus}
PART=${1:-fixtures}
mkdir -p "$OUT"
wait_flash_mla() {  # up to 570 s for the background flash-mla build; what it has so far to $OUT
  for _ in $(seq 570); do [ -e /tmp/flash-mla.done ] && break; sleep 1; done
  cp /tmp/flash-mla-out/* "$OUT/" 2>/dev/null
  ls /tmp/flash-mla.done 2>/dev/null || echo "flash-mla still running"
}
if [ "$PART" = flash-mla-wait ]; then wait_flash_mla; exit 0; fi
GPU_PACKAGES="kernelwheel"
# shellcheck source=bench/gpu_venv.sh
source bench/gpu_venv.sh
VAR=torch211-cxx11-cu130-x86_64-linux
common=(--python "$V/bin/python" --cuda-home "${CUDA_HOME:-/usr/local/cuda-13.0}")
bench() {  # NAME ARGS...: one table in $OUT/NAME.md, its log in $OUT/$PART.log
  local name=$1; shift
  echo "== $name: $*" >> "$OUT/$PART.log"
  env -u CXX -u CC "$V/bin/python" bench/build_corpus.py "${common[@]}" "$@" \
    --out "$OUT/$name.md" >> "$OUT/$PART.log" 2>&1
  echo "== $name: exit $?" >> "$OUT/$PART.log"
}
{ nproc; free -g | head -2; cat /proc/loadavg; } > "$OUT/machine.txt"
if [ "$PART" = fixtures ]; then
  # one .cu x the recipe's 10 capabilities: the auto split, then kernel-builder's (jobs = 10 / 10)
  bench relu-auto --variant "$VAR" --fixture relu-like --warm
  bench relu-kb --variant "$VAR" --fixture relu-like --jobs 10 --nvcc-threads 10
  # 56 .cu files: the auto split (16 x 1 thread), then kernel-builder's (1 job x 10 threads)
  bench layernorm-auto --variant "$VAR" --fixture layernorm-like:56
  bench layernorm-kb --variant "$VAR" --fixture layernorm-like:56 --nvcc-threads 10
elif [ "$PART" = sidebyside ]; then
  # variants side by side (--variant-jobs N): only torch 2.11 is here, so N builds of the one
  # variant at once, each with --jobs 16/N, stand for N variants of one build; the single
  # build is the baseline of the same call
  bench relu-single --variant "$VAR" --fixture relu-like
  bench relu-copies-4 --variant "$VAR" --fixture relu-like --copies 4 --skip-separate
  bench relu-copies-2 --variant "$VAR" --fixture relu-like --copies 2 --skip-separate
  bench corpus-relu-copies-4 --variant "$VAR" .gpu/corpus/relu --copies 4 --skip-separate
elif [ "$PART" = sidebyside-8 ]; then
  # the same with 8 at once (--jobs 2 each)
  bench relu-copies-8 --variant "$VAR" --fixture relu-like --copies 8 --skip-separate
  bench corpus-relu-copies-8 --variant "$VAR" .gpu/corpus/relu --copies 8 --skip-separate
elif [ "$PART" = sidebyside-16 ]; then
  # 16 at once (--jobs 1 each: one CPU per variant)
  bench relu-copies-16 --variant "$VAR" --fixture relu-like --copies 16 --skip-separate
elif [ "$PART" = fixed ]; then
  # goal 5's --version; goal 4's cost outside the compile: the run's first build probes the
  # --python interpreter, the second finds its probe kept (<cache>/interpreters/)
  "$V/bin/python" bench/startup.py --runs 20 --out "$OUT/startup.md" >> "$OUT/$PART.log" 2>&1
  bench relu-probed-first --variant "$VAR" --fixture relu-like
  bench relu-probe-kept --variant "$VAR" --fixture relu-like
elif [ "$PART" = flash-mla ]; then
  # a real many-file project whose kernels include no torch: kernels-community's flash-mla
  # (24 .cu, CUTLASS 4.0.0, which PyPI lacks: a checkout carried as .gpu/cutlass-4.0.0.tar.xz);
  # run in the background into /tmp/flash-mla-out, so that flash-mla-wait calls can wait on
  tar -C /tmp -xJf .gpu/cutlass-4.0.0.tar.xz
  mkdir -p /tmp/flash-mla-out
  # (its own session: the call's end must not stop it)
  setsid nohup bash -c '"$@" > /tmp/flash-mla-out/flash-mla.log 2>&1; touch /tmp/flash-mla.done' \
    _ env -u CXX -u CC KERNELWHEEL_CUTLASS_PATH=cutlass_4_0=/tmp/cutlass-4.0.0 \
    "$V/bin/python" bench/build_corpus.py "${common[@]}" --variant "$VAR" \
    "$PWD/.gpu/corpus/flash-mla" --out /tmp/flash-mla-out/corpus-flash-mla.md \
    < /dev/null > /dev/null 2>&1 &
  wait_flash_mla
elif [ "$PART" = split-compile ] || [ "$PART" = split-compile-2 ]; then
  # nvcc --split-compile 4 (cicc's optimization over threads within one capability), passed as
  # NVCC_APPEND_FLAGS, against the same builds without it, on one machine (an experiment: the
  # second call ran it through a --nvcc-split-compile option tried and not kept)
  tar -C /tmp -xJf .gpu/cutlass-4.0.0.tar.xz
  export KERNELWHEEL_CUTLASS_PATH=cutlass_4_0=/tmp/cutlass-4.0.0
  if [ "$PART" = split-compile ]; then
    bench relu-plain --variant "$VAR" --fixture relu-like --keep-ninja-logs "$OUT/ninja/plain"
    NVCC_APPEND_FLAGS=--split-compile=4 bench relu-split4 --variant "$VAR" --fixture relu-like
    NVCC_APPEND_FLAGS=--split-compile=4 bench flash-mla-split4 --variant "$VAR" \
      .gpu/corpus/flash-mla --keep-ninja-logs "$OUT/ninja/split4"
    bench flash-mla-plain --variant "$VAR" .gpu/corpus/flash-mla --keep-ninja-logs "$OUT/ninja/plain"
  else  # the other order
    bench flash-mla-plain-2 --variant "$VAR" .gpu/corpus/flash-mla
    NVCC_APPEND_FLAGS=--split-compile=4 bench flash-mla-split4-2 --variant "$VAR" \
      .gpu/corpus/flash-mla --keep-ninja-logs "$OUT/ninja/split4"
  fi
elif [ "$PART" = flash-mla-test ]; then
  # flash-mla's own dense-decoding test (a script, run as its README says) against the wheel
  # kernelwheel builds, on the H100 (its sm90 kernels)
  tar -C /tmp -xJf .gpu/cutlass-4.0.0.tar.xz
  env -u CXX -u CC KERNELWHEEL_CUTLASS_PATH=cutlass_4_0=/tmp/cutlass-4.0.0 "$V/bin/kernelwheel" \
    build .gpu/corpus/flash-mla --only "$VAR" "${common[@]}" -o /tmp/fm-wh --version 1.0.0 \
    > "$OUT/flash-mla-build.log" 2>&1
  echo "build exit $?" >> "$OUT/flash-mla-build.log"
  "$V/bin/pip" install -q --no-deps --no-index /tmp/fm-wh/flash_mla-*.whl >> "$OUT/flash-mla-build.log" 2>&1
  ( cd .gpu/corpus/flash-mla/tests && timeout 300 "$V/bin/python" \
      test_flash_mla_dense_decoding.py --dtype bf16 > "$OUT/dense-decoding-bf16.log" 2>&1
    echo "test exit $?" >> "$OUT/dense-decoding-bf16.log" )
elif [ "$PART" = efficiency ]; then
  # the auto split only, one table each (after a change to the split or the measurement)
  bench relu-auto --variant "$VAR" --fixture relu-like --warm
  bench layernorm-auto --variant "$VAR" --fixture layernorm-like:56
else
  bench corpus-relu --variant "$VAR" .gpu/corpus/relu
  bench corpus-activation --variant torch-stable-abi210-cu130-x86_64-linux .gpu/corpus/activation
fi
cat /proc/loadavg >> "$OUT/machine.txt"
