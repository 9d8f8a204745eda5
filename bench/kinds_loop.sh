#!/usr/bin/env bash
# The author's loop of the other kinds: `kernelwheel test` of kernels-community einops (pure
# Python) and huggingface/kernels' relu-tvm-ffi (tvm-ffi), each cold, unchanged and after an
# edit the tests (or the compiler) catch, then fixed. Each step's output and exit code to
# OUT/NAME.txt, its wall and CPU seconds to OUT/times.txt.
#   bash bench/kinds_loop.sh CORPUS PYTHON TVM_VARIANT OUT [KERNELWHEEL...]
# CORPUS holds einops/ and relu-tvm-ffi/ (`git archive`, as bench/gpu.sh's .gpu/corpus);
# PYTHON holds torch, kernels and apache-tvm-ffi; KERNELWHEEL: the command (default kernelwheel).
set -uo pipefail
corpus=$1 python=$2 tvm=$3 out=$4
shift 4
kw=("$@")
[ ${#kw[@]} -gt 0 ] || kw=(kernelwheel)
dir=$(mktemp -d /tmp/kw-kinds.XXXXXX)
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
cp -r "$corpus/einops" "$corpus/relu-tvm-ffi" "$dir" || exit 1
step() {  # NAME PROJECT ARGS...: `kernelwheel test PROJECT ARGS...`
  (cd "$dir" && /usr/bin/time -f "$1: wall %e s, user %U s, sys %S s" -a -o "$out/times.txt" \
    "${kw[@]}" test "${@:2}" > "$out/$1.txt" 2>&1
    echo "exit $?" >> "$out/$1.txt")
  tail -n 2 "$out/$1.txt"
}
step einops-1-cold einops --python "$python" -- -q -x
step einops-2-unchanged einops --python "$python" -- -q -x
# an edit the tests catch: rearrange raises for every pattern
sed -i '0,/def rearrange(/s//def rearrange(*a, **k):\n    raise ValueError("edited")\ndef _rearrange(/' \
  "$dir/einops/torch-ext/einops/einops.py"
step einops-3-edited einops --python "$python" -- -q -x
cp "$corpus/einops/torch-ext/einops/einops.py" "$dir/einops/torch-ext/einops/einops.py"
step einops-4-fixed einops --python "$python" -- -q -x
step tvm-1-cold relu-tvm-ffi --variant "$tvm" --python "$python" -- -q -rs
step tvm-2-unchanged relu-tvm-ffi --variant "$tvm" --python "$python" -- -q
src=relu_cpu/relu_cpu.cpp
[[ $tvm == *-cu* ]] && src=relu_cuda/relu.cu
sed -i 's/;$//' "$dir/relu-tvm-ffi/$src"  # every `;` at a line's end gone
step tvm-3-compile-error relu-tvm-ffi --variant "$tvm" --python "$python" -- -q
cp "$corpus/relu-tvm-ffi/$src" "$dir/relu-tvm-ffi/$src"
step tvm-4-fixed relu-tvm-ffi --variant "$tvm" --python "$python" -- -q
cat "$out/times.txt"
rm -rf "$dir"
