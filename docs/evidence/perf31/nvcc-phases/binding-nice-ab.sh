#!/bin/bash
# The A/B of docs/compiler-cache.md ("the binding at low priority"): the relu-like compile alone
# (ninja -j2 in a kept build folder: `kernelwheel build relu_like --only
# torch214-cxx11-cu130-x86_64-linux --no-ccache --keep-intermediates`), its build.ninja as
# kernelwheel wrote it ("orig") against the same file with `cxx = nice -n 10 $cxx` under the
# binding's build line ("nice"), three pairs, alternated. Usage: binding-nice-ab.sh OBJ_DIR ENV_BIN
set -euo pipefail
obj=$1 env_bin=$2
cd "$obj"
cp build.ninja /tmp/build.ninja.orig
awk '{print} /^build .*torch_binding\.cpp$/ {print "  cxx = nice -n 10 $cxx"}' \
  /tmp/build.ninja.orig > /tmp/build.ninja.nice
export PATH=$env_bin:$PATH
for pair in 1 2 3; do
  for v in orig nice; do
    find . -name '*.o' -delete; rm -f .ninja_log .ninja_deps
    cp /tmp/build.ninja.$v build.ninja
    /usr/bin/time -f "$v pair$pair wall %e user %U sys %S eff=(%U+%S)/(2*%e)" ninja -j2 \
      > /tmp/ninja-$v-$pair.out 2>&1
    tail -1 /tmp/ninja-$v-$pair.out
    cp .ninja_log "/tmp/ninja_log-$v-$pair"
  done
done
cp /tmp/build.ninja.orig build.ninja
