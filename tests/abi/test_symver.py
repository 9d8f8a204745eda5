"""The forced-include header: made from a libc's version tables (a synthetic one, and this
machine's real libc.so.6/libm.so.6), binding only what the policy forbids to what it allows, and
changing nothing in an object that calls none of those functions."""

from __future__ import annotations

import ctypes
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelwheel.abi._elf import read_elf
from kernelwheel.abi.checker import check_shared_object
from kernelwheel.abi.policy import load_policy
from kernelwheel.abi.remedies import abi_header, load_remedy_data
from kernelwheel.abi.symver import (
    Binding,
    Export,
    SymverRules,
    VersionTable,
    forced_header,
    plan_bindings,
    plan_c23_aliases,
    read_version_table,
)

POLICY = load_policy("manylinux_2_28", "x86_64")
RULES = SymverRules(
    keep={"totalorder*": "signature changed"},
    handled={"dlsym": "dlsym-glibc-2-34"},
    c23_macros=("__GLIBC_USE_C2X_STRTOL", "__GLIBC_USE_C23_STRTOL"),
    c23_markers=("__isoc23_strtol",),
)
HOST_LIBS = Path("/lib/x86_64-linux-gnu")


def _table(library: str, *exports: tuple[str, str, bool]) -> VersionTable:
    return VersionTable(library, tuple(Export(n, v, d) for n, v, d in exports))


def test_synthetic_table_binds_to_the_newest_allowed_version() -> None:
    libm = _table(
        "libm.so.6",
        ("log2", "GLIBC_2.29", True),
        ("log2", "GLIBC_2.2.5", False),
        ("exp", "GLIBC_2.29", True),
        ("exp", "GLIBC_2.2.5", False),
        ("exp", "GLIBC_2.27", False),  # newer and still allowed: this one wins
        ("sin", "GLIBC_2.2.5", True),  # default already allowed: untouched
        ("totalorder", "GLIBC_2.31", True),  # kept: its old version is another function
        ("totalorder", "GLIBC_2.25", False),
        ("fminimum", "GLIBC_2.35", True),  # nothing older: cannot be bound
    )
    libc = _table(
        "libc.so.6",
        ("pthread_create", "GLIBC_2.34", True),
        ("pthread_create", "GLIBC_2.2.5", False),
        ("dlsym", "GLIBC_2.34", True),  # another remedy's
        ("dlsym", "GLIBC_2.2.5", False),
        ("pthread_create", "GLIBC_PRIVATE", False),  # not numeric: never chosen
        ("__isoc23_strtol", "GLIBC_2.38", True),
    )
    bindings = plan_bindings([libc, libm], POLICY, RULES)
    assert bindings == (
        Binding("exp", "libm.so.6", "GLIBC_2.29", "GLIBC_2.27"),
        Binding("log2", "libm.so.6", "GLIBC_2.29", "GLIBC_2.2.5"),
        Binding("pthread_create", "libc.so.6", "GLIBC_2.34", "GLIBC_2.2.5"),
    )
    header = forced_header({"/x/libc.so.6": libc, "/x/libm.so.6": libm}, POLICY, RULES)
    assert header.c23_undone and header.policy == "manylinux_2_28_x86_64"
    lines = header.text.splitlines()
    assert '__asm__(".symver log2,log2@GLIBC_2.2.5"); /* libm.so.6: GLIBC_2.29 */' in lines
    assert "#if !defined(__CUDA_ARCH__)" in lines  # the device passes never see .symver
    for macro in RULES.c23_macros:
        assert lines[lines.index(f"#undef {macro}") + 1] == f"#define {macro} 0"
    assert "totalorder" not in header.text and "dlsym" not in header.text
    # Deterministic, and independent of where the libraries lie.
    again = forced_header({"/y/libc.so.6": libc, "/y/libm.so.6": libm}, POLICY, RULES)
    assert again.text == header.text and again.digest == header.digest


def test_an_older_glibc_gives_no_c23_block_and_a_looser_policy_fewer_bindings() -> None:
    libm = _table("libm.so.6", ("log2", "GLIBC_2.29", True), ("log2", "GLIBC_2.2.5", False))
    header = forced_header({"libm.so.6": libm}, POLICY, RULES)
    assert not header.c23_undone and "features.h" not in header.text
    loose = forced_header({"libm.so.6": libm}, load_policy("manylinux_2_34", "x86_64"), RULES)
    assert loose.bindings == () and ".symver" not in loose.text
    assert loose.digest != header.digest


needs_host_glibc = pytest.mark.skipif(
    not (HOST_LIBS / "libm.so.6").is_file() or shutil.which("g++") is None,
    reason="needs an x86_64 glibc and g++",
)


@needs_host_glibc
def test_real_libm_and_libc_tables() -> None:
    libm = read_version_table(HOST_LIBS / "libm.so.6")
    libc = read_version_table(HOST_LIBS / "libc.so.6")
    versions = {(e.name, e.version, e.default) for e in libm.exports}
    # glibc >= 2.29 on x86_64: log2 is GLIBC_2.29 by default and still GLIBC_2.2.5 (an IFUNC)
    assert ("log2", "GLIBC_2.29", True) in versions and ("log2", "GLIBC_2.2.5", False) in versions
    header = abi_header(
        {str(HOST_LIBS / "libc.so.6"): libc, str(HOST_LIBS / "libm.so.6"): libm}, POLICY
    )
    bound = {b.name: b for b in header.bindings}
    for name in ("exp", "log", "log2", "pow", "exp2"):
        assert (bound[name].default, bound[name].bound) == ("GLIBC_2.29", "GLIBC_2.2.5")
    assert bound["pthread_create"].bound == "GLIBC_2.2.5" and "dlsym" not in bound
    assert not any(name.startswith("totalorder") for name in bound)
    for b in header.bindings:  # only forbidden defaults, each to an allowed version
        assert not POLICY.allows(b.default) and POLICY.allows(b.bound), b
    # This machine's glibc has the redirection only from 2.38 on.
    assert header.c23_undone == ("__isoc23_strtol" in libc.names())


CALLS = r"""
#include <cmath>
#include <pthread.h>
extern "C" __attribute__((visibility("default"))) void *PyInit__x(void) { return 0; }
extern "C" __attribute__((visibility("default"))) double kw_math(double x) {
  return std::log2(x) + std::exp(x) + std::pow(x, 1.5) + std::log(x) + std::exp2(x);
}
extern "C" __attribute__((visibility("default"))) int kw_attr() {
  pthread_attr_t a; pthread_attr_init(&a); size_t s = 0;
  pthread_attr_getstacksize(&a, &s); pthread_attr_destroy(&a); return s > 0;
}
"""

NO_CALLS = r"""
#include <cmath>
#include <string>
extern "C" __attribute__((visibility("default"))) long kw_len(const char *s) {
  return static_cast<long>(std::string(s).size()) + static_cast<long>(std::sqrt(4.0));
}
"""


def _compile(tmp: Path, name: str, text: str, *flags: str) -> Path:
    src = tmp / f"{name}.cpp"
    src.write_text(text)
    out = tmp / f"{name}.o"
    cmd = ["g++", "-std=c++17", "-O3", "-g", "-fPIC", *flags, "-c", str(src), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def _host_header(tmp: Path) -> Path:
    libs = {
        str(HOST_LIBS / n): read_version_table(HOST_LIBS / n) for n in ("libc.so.6", "libm.so.6")
    }
    path = tmp / "kernelwheel_abi.h"
    path.write_text(abi_header(libs, POLICY).text)
    return path


@needs_host_glibc
def test_the_header_binds_real_calls_and_they_compute_the_same(tmp_path: Path) -> None:
    header = _host_header(tmp_path)
    objects = {}
    for label, flags in (("plain", ()), ("forced", ("-include", str(header)))):
        obj = _compile(tmp_path, f"calls-{label}", CALLS, *flags)
        so = tmp_path / f"calls-{label}.so"
        subprocess.run(["g++", "-shared", "-o", str(so), str(obj)], check=True)
        objects[label] = so
    plain = check_shared_object(objects["plain"], python_abi=None)
    assert {(v.subject, v.version) for v in plain.violations} >= {
        ("log2", "GLIBC_2.29"),
        ("pow", "GLIBC_2.29"),
    }
    fixed = check_shared_object(objects["forced"], python_abi=None)
    assert fixed.ok, [v.one_line() for v in fixed.violations]
    imports = {s.name: s.version for s in read_elf(objects["forced"]).symbols if not s.defined}
    assert (
        imports["log2"] == "GLIBC_2.2.5" and imports["pthread_attr_getstacksize"] == "GLIBC_2.2.5"
    )
    results = []
    for so in objects.values():
        lib = ctypes.CDLL(str(so))
        lib.kw_math.restype, lib.kw_math.argtypes = ctypes.c_double, [ctypes.c_double]
        results.append(([lib.kw_math(x) for x in (0.3, 1.7, 9.25, 33.0)], lib.kw_attr()))
    assert results[0] == results[1]
    x = 9.25
    want = math.log2(x) + math.exp(x) + x**1.5 + math.log(x) + 2**x
    assert math.isclose(results[1][0][2], want, rel_tol=1e-14)


@needs_host_glibc
def test_an_object_calling_nothing_bound_is_byte_identical(tmp_path: Path) -> None:
    """What the remedies promise a build that needs none: the same object, debug info too."""
    header = _host_header(tmp_path)
    plain = _compile(tmp_path, "none", NO_CALLS).read_bytes()
    forced = _compile(tmp_path, "none", NO_CALLS, "-include", str(header)).read_bytes()
    assert forced == plain


def test_the_shipped_rules_are_read() -> None:
    data = load_remedy_data()
    assert data.libraries == ("libc.so.6", "libm.so.6")
    assert data.rules.kept("totalorderf") and data.rules.handled["dlsym"] == "dlsym-glibc-2-34"
    assert set(data.rules.c23_macros) == {"__GLIBC_USE_C2X_STRTOL", "__GLIBC_USE_C23_STRTOL"}
    names = {r.name for r in data.remedies}
    assert {"ios-base-library-init", "string-replace-cold", "glibcxx-assert-fail"} <= names


def test_c23_functions_are_bound_to_the_classic_ones() -> None:
    """nvcc includes <stdlib.h> (through cuda_runtime.h) before a forced header, so a .cu's
    host code keeps calling __isoc23_strtol: the header binds that name to the function older
    glibc headers called (scanf: the ISO C99 one) at an allowed version."""
    libc = _table(
        "libc.so.6",
        ("__isoc23_strtol", "GLIBC_2.38", True),
        ("strtol", "GLIBC_2.2.5", True),
        ("__isoc23_sscanf", "GLIBC_2.38", True),
        ("__isoc99_sscanf", "GLIBC_2.7", True),
        ("sscanf", "GLIBC_2.2.5", True),
        ("__isoc23_newthing", "GLIBC_2.38", True),  # no classic twin: left to the checker
    )
    assert plan_c23_aliases([libc], POLICY) == (
        Binding("__isoc23_sscanf", "libc.so.6", "GLIBC_2.38", "GLIBC_2.7", "__isoc99_sscanf"),
        Binding("__isoc23_strtol", "libc.so.6", "GLIBC_2.38", "GLIBC_2.2.5", "strtol"),
    )
    header = forced_header({"/x/libc.so.6": libc}, POLICY, RULES)
    assert '__asm__(".symver __isoc23_strtol,strtol@GLIBC_2.2.5");' in header.text
    assert "__isoc23_newthing" not in header.text


@needs_host_glibc
def test_a_c23_reference_links_to_the_classic_function(tmp_path: Path) -> None:
    """A real object that references __isoc23_strtol (what glibc >= 2.38's headers emit; this
    machine's glibc may be older, so the reference is written by hand) imports strtol at an
    allowed version once the header is forced in, and computes what Python computes."""
    libc = _table("libc.so.6", ("__isoc23_strtol", "GLIBC_2.38", True))
    real = read_version_table(HOST_LIBS / "libc.so.6")
    header = forced_header(
        {"libc.so.6": VersionTable("libc.so.6", libc.exports + real.exports)}, POLICY, RULES
    )
    (tmp_path / "kernelwheel_abi.h").write_text(header.text)
    (tmp_path / "calls.cpp").write_text(
        'extern "C" long __isoc23_strtol(const char*, char**, int);\n'
        'extern "C" long parse(const char* s, int base) { return __isoc23_strtol(s, 0, base); }\n'
    )
    so = tmp_path / "libcalls.so"
    subprocess.run(
        [
            "g++",
            "-O2",
            "-fPIC",
            "-shared",
            "-include",
            str(tmp_path / "kernelwheel_abi.h"),
            str(tmp_path / "calls.cpp"),
            "-o",
            str(so),
        ],
        check=True,
    )
    imports = {(s.name, s.version) for s in read_elf(so).symbols if not s.defined}
    assert ("strtol", "GLIBC_2.2.5") in imports
    assert not any(name.startswith("__isoc23_") for name, _ in imports)
    parse = ctypes.CDLL(str(so)).parse
    parse.restype, parse.argtypes = ctypes.c_long, [ctypes.c_char_p, ctypes.c_int]
    for _ in range(200):
        value, base = random.randint(-(2**62), 2**62), random.choice((8, 10, 16, 0))
        text = {8: f"{value:o}", 10: str(value), 16: f"{value:x}", 0: f"{value:#x}"}[base]
        assert parse(text.encode(), base) == int(text, base)
