#!/usr/bin/env bash
# The ABI remedies against a newer toolchain's headers, on this Debian 12 machine: gcc 13's
# libstdc++ headers and glibc 2.41's headers and libraries (Debian trixie's packages, fetched with
# apt-get download, never installed) stand in for an Ubuntu 24.04 / Fedora / Arch host.
#
# The host code of tests/fixtures/portable_calls (csrc/calls.h: log2/exp/pow on doubles, strtol,
# sscanf, std::stoi, std::cout, an overlapping std::string::replace) is compiled in C++20 with
# this machine's g++ against those headers, and linked against trixie's libc, libm and
# libstdc++: once plain, once with kernelwheel's remedies (the forced-include header made from
# trixie's libc.so.6/libm.so.6 by kernelwheel.abi, and data/kernelwheel_compat.cpp). Both are
# checked with kernelwheel's ABI checker; the remedied one is then loaded and run here, on glibc
# 2.36 and gcc 12's libstdc++, against Python's own results (the plain one cannot be loaded).
#
#   bash bench/remedies_new_glibc.sh      # writes $OUT/remedies_new_glibc.log (default out/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
PY=${PY:-$ROOT/.venv/bin/python}
W=${WORK:-/tmp/kw-new-glibc}
mkdir -p "$W/lists/partial" "$W/cache" "$W/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  > "$W/sources.list"
APT=(-o "Dir::Etc::sourcelist=$W/sources.list" -o Dir::Etc::sourceparts=/dev/null
  -o "Dir::State::lists=$W/lists" -o "Dir::Cache=$W/cache")
if [ ! -d "$W/root/usr/include/c++/13" ]; then
  apt-get "${APT[@]}" update -qq
  (cd "$W/debs" && apt-get "${APT[@]}" download -qq libstdc++-13-dev libc6-dev libc6 libstdc++6 \
    libgcc-s1 libgcc-13-dev linux-libc-dev)
  for deb in "$W"/debs/*.deb; do dpkg -x "$deb" "$W/root"; done
fi
T=$W/root
L=$T/usr/lib/x86_64-linux-gnu
GCC12=$(dirname "$(gcc -print-libgcc-file-name)")
INC=(-nostdinc -nostdinc++ -isystem "$T/usr/include/c++/13"
  -isystem "$T/usr/include/x86_64-linux-gnu/c++/13" -isystem "$GCC12/include"
  -isystem "$T/usr/include/x86_64-linux-gnu" -isystem "$T/usr/include")
LINK=("$L/libstdc++.so.6" "$L/libm.so.6" "$L/libc.so.6" "$L/libgcc_s.so.1" "-Wl,-rpath-link,$L")
cat > "$W/k.cpp" <<'EOF'
#include "calls.h"
#define KW extern "C" __attribute__((visibility("default")))
KW void *PyInit__x(void) { return 0; }
KW double kw_math(double x, int i) { return portable_calls::math3(x)[i]; }
KW long kw_parse(const char *s, int i) { return portable_calls::parse(s)[i]; }
KW long kw_show(const char *s) { return portable_calls::show(s); }
EOF
"$PY" - "$L" "$W/kernelwheel_abi.h" <<'EOF'
import sys
from kernelwheel.abi.policy import load_policy
from kernelwheel.abi.remedies import abi_header
from kernelwheel.abi.symver import read_version_table
lib, out = sys.argv[1], sys.argv[2]
tables = {f"{lib}/{n}": read_version_table(f"{lib}/{n}") for n in ("libc.so.6", "libm.so.6")}
header = abi_header(tables, load_policy())
open(out, "w").write(header.text)
print(f"header: {len(header.bindings)} bindings, C23 switches: {header.c23_undone}")
EOF
CXXFLAGS=(-std=c++20 -O3 -fPIC -fvisibility=hidden -I tests/fixtures/portable_calls/csrc)
REMEDY=(-D__libc_single_threaded=kernelwheel_libc_single_threaded -Ddlsym=kernelwheel_dlsym
  -include "$W/kernelwheel_abi.h")
g++ "${INC[@]}" "${CXXFLAGS[@]}" -c "$W/k.cpp" -o "$W/plain.o"
g++ -shared -nodefaultlibs -o "$W/plain.so" "$W/plain.o" "${LINK[@]}"
g++ "${INC[@]}" "${CXXFLAGS[@]}" "${REMEDY[@]}" -c "$W/k.cpp" -o "$W/fixed.o"
g++ "${INC[@]}" "${CXXFLAGS[@]}" "${REMEDY[@]}" -c src/kernelwheel/data/kernelwheel_compat.cpp \
  -o "$W/compat.o"
g++ -shared -nodefaultlibs -o "$W/fixed.so" "$W/fixed.o" "$W/compat.o" "${LINK[@]}"
"$PY" - "$W" <<'EOF' 2>&1 | tee "$OUT/remedies_new_glibc.log"
import ctypes, math, random, subprocess, sys
from kernelwheel.abi.checker import check_shared_object
w = sys.argv[1]
for name in ("plain", "fixed"):
    report = check_shared_object(f"{w}/{name}.so", python_abi=None, cxxabi="cxx11")
    print(f"{name}.so: {'complies' if report.ok else 'refused'}; needs {dict(report.requires)}")
    for v in report.violations:
        print(f"  {v.subject} ({v.version})")
try:
    ctypes.CDLL(f"{w}/plain.so")
    print("plain.so: loaded here (unexpected)")
except OSError as exc:
    print(f"plain.so on this glibc: {exc}")
so = ctypes.CDLL(f"{w}/fixed.so")
so.kw_math.restype, so.kw_math.argtypes = ctypes.c_double, [ctypes.c_double, ctypes.c_int]
so.kw_parse.restype, so.kw_parse.argtypes = ctypes.c_long, [ctypes.c_char_p, ctypes.c_int]
rng = random.Random()
for _ in range(1000):
    x = rng.uniform(0.05, 40.0)
    for i, want in enumerate((math.log2(x), math.exp(x), x**1.5)):
        assert math.isclose(so.kw_math(x, i), want, rel_tol=1e-14), (x, i)
    n = rng.randint(-(2**31), 2**31 - 1)
    assert [so.kw_parse(str(n).encode(), i) for i in range(3)] == [n, n, n], n
code = f"import ctypes; print(ctypes.CDLL({w + '/fixed.so'!r}).kw_show(b'abc'))"
out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
assert out.stdout.splitlines() == ["portable_calls: [abc]", "5"], out.stdout
print("fixed.so on this machine (glibc 2.36, gcc 12's libstdc++): 1000 random inputs of "
      "log2/exp/pow and strtol/stoi/sscanf match Python; std::cout prints:", out.stdout.split("\n")[0])
EOF
