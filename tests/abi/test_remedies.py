"""The remedies keep a .so built here (gcc 12, glibc 2.36) within manylinux_2_28, and change no
behaviour: proven by building the same C++ with and without them."""

from __future__ import annotations

import ctypes
import sys
import threading
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "abi"))
import abi_testlib as lib  # noqa: E402

from kernelwheel.abi._elf import read_elf  # noqa: E402
from kernelwheel.abi.checker import check_shared_object  # noqa: E402
from kernelwheel.abi.policy import version_key  # noqa: E402
from kernelwheel.abi.remedies import (  # noqa: E402
    REMEDIES,
    SINGLE_THREADED_VARIABLE,
    remedy_flags,
    remedy_for_symbol,
)
from kernelwheel.abi.report import Rule  # noqa: E402

pytestmark = pytest.mark.skipif(not lib.have_compiler("g++"), reason="needs g++")

# Everyday C++ a kernel binding does: std::string, iostream, shared_ptr, atomics, containers,
# ostringstream. Built at -O0 so header helpers stay calls (the worst case), in C++20 like
# torch >= 2.13 builds.
KERNEL_LIKE_CPP = (
    lib.PYINIT
    + r"""
#include <atomic>
#include <iostream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

static std::shared_ptr<std::string> shared = std::make_shared<std::string>("kernel");
static std::atomic<long> calls{0};

// Copies the shared_ptr n times: every copy increments and decrements its reference count.
extern "C" long kw_copy_shared(long n) {
    long total = 0;
    for (long i = 0; i < n; ++i) {
        std::shared_ptr<std::string> copy = shared;
        total += static_cast<long>(copy->size());
    }
    calls.fetch_add(1);
    return total;
}

extern "C" long kw_use_count() { return shared.use_count(); }

// 1 if allocating n longs throws std::bad_array_new_length, 2 for another bad_alloc, 0 if none.
extern "C" int kw_allocate(unsigned long n) {
    try {
        std::allocator<long> a;
        long *p = a.allocate(n);
        a.deallocate(p, n);
    } catch (const std::bad_array_new_length &) {
        return 1;
    } catch (const std::bad_alloc &) {
        return 2;
    }
    return 0;
}

// Formats with ostringstream; returns the length, writes into out.
extern "C" int kw_format(int n, char *out, int cap) {
    std::ostringstream os;
    os << *shared << '-' << n;
    std::string s = os.str();
#if __cplusplus > 201703L && _GLIBCXX_USE_CXX11_ABI
    s = std::move(os).str();
    std::stringstream ss;
    ss << s;
    s = std::string(ss.view());
#endif
    std::vector<char> buf(s.begin(), s.end());
    if (n < 0) std::cerr << s << std::endl;
    int len = static_cast<int>(buf.size());
    for (int i = 0; i < len && i < cap - 1; ++i) out[i] = buf[i];
    out[len < cap ? len : cap - 1] = 0;
    return len;
}
"""
)

VARIANTS = {
    "c++20-cxx11-O0": ["-std=c++20", "-O0", "-D_GLIBCXX_USE_CXX11_ABI=1"],
    "c++17-cxx98-O0": ["-std=c++17", "-O0", "-D_GLIBCXX_USE_CXX11_ABI=0"],
    "c++20-cxx11-O2": ["-std=c++20", "-O2", "-D_GLIBCXX_USE_CXX11_ABI=1"],
}


@pytest.fixture(scope="module")
def so_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("remedies")


def _build(so_dir: Path, variant: str, remedied: bool) -> Path:
    flags = list(VARIANTS[variant])
    extra: tuple[Path, ...] = ()
    if remedied:
        rs = remedy_flags()
        flags += rs.cxx_flags
        extra = rs.sources
    name = f"kernel-{variant}-{'fixed' if remedied else 'plain'}"
    return lib.build_so(so_dir, name, KERNEL_LIKE_CPP, flags=flags, extra_sources=extra)


def _cxxabi(variant: str) -> str:
    return "cxx11" if "cxx11" in variant else "cxx98"


def test_remedy_flags_api() -> None:
    rs = remedy_flags()
    define = f"-D__libc_single_threaded={SINGLE_THREADED_VARIABLE}"
    assert define in rs.cxx_flags and define in rs.nvcc_flags
    (source,) = rs.sources
    assert source.is_file() and source.suffix == ".cpp"
    assert source.parent.name == "data" and source.parent.parent.name == "kernelwheel"
    assert rs.header is None and "-include" not in rs.cxx_flags
    for remedy in REMEDIES:
        assert remedy.symbols and remedy.origin and remedy.how and remedy.why_safe
    assert remedy_for_symbol("__libc_single_threaded") is REMEDIES[0]
    assert remedy_for_symbol("_ZSt28__throw_bad_array_new_lengthv") is REMEDIES[1]
    assert remedy_for_symbol("close_range") is None


def test_without_remedies_the_checker_flags_new_symbols(so_dir: Path) -> None:
    so = _build(so_dir, "c++20-cxx11-O0", remedied=False)
    report = check_shared_object(so, python_abi="3.9", cxxabi="cxx11")
    assert {v.rule for v in report.violations} == {Rule.SYMBOL_VERSIONS}
    found = {(v.subject, v.version) for v in report.violations}
    assert ("__libc_single_threaded", "GLIBC_2.32") in found
    assert ("_ZSt28__throw_bad_array_new_lengthv", "GLIBCXX_3.4.29") in found
    assert {version for _, version in found} <= {"GLIBC_2.32", "GLIBCXX_3.4.26", "GLIBCXX_3.4.29"}
    for v in report.violations:  # each one names the remedy that removes it
        assert remedy_for_symbol(v.subject) is not None, v.subject
        assert f"remedy {remedy_for_symbol(v.subject).name!r}" in v.fix  # type: ignore[union-attr]
    single = next(v for v in report.violations if v.subject == "__libc_single_threaded")
    assert "gcc >= 11 libstdc++ headers" in single.cause and "manylinux_2_28" in single.fix
    try:
        import kernel_abi_check  # noqa: F401
    except ImportError:
        return
    assert lib.kac_manylinux(so) == {
        (v.version.split("_")[0], v.subject, v.version.split("_", 1)[1])
        for v in report.violations
        if v.version
    }


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_with_remedies_the_object_complies(so_dir: Path, variant: str, tmp_path: Path) -> None:
    so = _build(so_dir, variant, remedied=True)
    report = check_shared_object(so, python_abi="3.9", cxxabi=_cxxabi(variant))
    assert report.ok, [v.one_line() for v in report.violations]
    requires = {p: version_key(v) or () for p, v in report.requires}
    assert requires["GLIBCXX"] <= (3, 4, 24) and requires.get("GLIBC", ()) <= (2, 28)
    # auditwheel and kernel-abi-check agree.
    verdict = lib.auditwheel_verdict(lib.wheel_with_so(tmp_path, so))
    assert verdict.complies, verdict
    try:
        import kernel_abi_check  # noqa: F401
    except ImportError:
        return
    assert lib.kac_manylinux(so) == set()


def test_remedy_definitions_stay_hidden(so_dir: Path) -> None:
    """Nothing the remedies define is exported: no interposition in either direction."""
    so = _build(so_dir, "c++20-cxx11-O0", remedied=True)
    info = read_elf(so)
    exported = {s.name for s in info.symbols if s.defined}
    imported = {s.name for s in info.symbols if not s.defined}
    remedy_symbols = {name for r in REMEDIES for name, _ in r.symbols}
    assert SINGLE_THREADED_VARIABLE not in exported | imported
    assert not (remedy_symbols & exported), remedy_symbols & exported
    # dlsym stays imported, at the version every glibc has; the others are not imported at all.
    assert not (remedy_symbols - {"dlsym"}) & imported, remedy_symbols & imported
    assert {s.version for s in info.symbols if s.name == "dlsym"} <= {"GLIBC_2.2.5", "GLIBC_2.17"}
    assert "kernelwheel_dlsym" not in exported | imported


@pytest.mark.parametrize(
    ("flags", "abi"),
    [(["-std=c++20", "-D_GLIBCXX_USE_CXX11_ABI=1"], "cxx11"), (["-std=c++17"], "cxx98")],
)
def test_remedy_symbol_list_matches_the_source(
    so_dir: Path, flags: list[str], abi: str, tmp_path: Path
) -> None:
    """REMEDIES documents exactly what data/kernelwheel_compat.cpp defines, all hidden."""
    import subprocess

    (source,) = remedy_flags().sources
    obj = tmp_path / "compat.o"
    abi_flag = [] if abi == "cxx11" else ["-D_GLIBCXX_USE_CXX11_ABI=0"]
    subprocess.run(
        ["g++", "-c", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", *flags, *abi_flag,
         *remedy_flags().cxx_flags, str(source), "-o", str(obj)],
        check=True,
    )  # fmt: skip
    with obj.open("rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        assert isinstance(symtab, SymbolTableSection)
        defined = {
            s.name: s["st_other"]["visibility"]
            for s in symtab.iter_symbols()
            if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] != "STB_LOCAL"
        }
    gcc = int(
        subprocess.run(["g++", "-dumpversion"], capture_output=True, text=True).stdout.split(".")[0]
    )
    # what this g++'s headers emit (the compat source defines the rest only for newer ones)
    listed = {name for r in REMEDIES if r.since_gcc <= gcc for name, _ in r.symbols}
    listed -= {"__libc_single_threaded", "dlsym"}
    ours = {name for name in listed if name in defined}
    assert "_ZSt28__throw_bad_array_new_lengthv" in ours
    assert defined[SINGLE_THREADED_VARIABLE] == "STV_HIDDEN"
    assert defined["kernelwheel_dlsym"] == "STV_HIDDEN"
    assert all(defined[name] == "STV_HIDDEN" for name in ours)
    if abi == "cxx11":  # every C++11-ABI member listed is instantiated in C++20 mode
        assert {n for n in listed if "__cxx11" in n} <= ours
    else:
        assert {n for n in listed if "__cxx11" not in n} <= ours


def _exercise(path: Path) -> tuple[bytes, int, int, int, list[int], int]:
    so = ctypes.CDLL(str(path))
    so.kw_copy_shared.argtypes = [ctypes.c_long]
    so.kw_copy_shared.restype = ctypes.c_long
    so.kw_use_count.restype = ctypes.c_long
    so.kw_allocate.argtypes = [ctypes.c_ulong]
    buf = ctypes.create_string_buffer(64)
    length = so.kw_format(7, buf, len(buf))
    thrown = so.kw_allocate(ctypes.c_ulong(-1).value)  # n * sizeof(long) overflows
    fine = so.kw_allocate(4)

    # ctypes drops the GIL: four threads copy the same shared_ptr at once. Only atomic
    # reference counting (what value 0 of the redirected variable selects) keeps it exact.
    totals: list[int] = []

    def copy_many() -> None:
        totals.append(so.kw_copy_shared(200_000))

    threads = [threading.Thread(target=copy_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return buf.value, length, thrown, fine, totals, so.kw_use_count()


@pytest.mark.parametrize("variant", ["c++20-cxx11-O0", "c++17-cxx98-O0"])
def test_remedied_object_behaves_the_same(so_dir: Path, variant: str) -> None:
    """Same results with and without remedies; reference counts stay exact under threads."""
    plain = _exercise(_build(so_dir, variant, remedied=False))
    fixed = _exercise(_build(so_dir, variant, remedied=True))
    assert fixed == plain
    assert fixed[:4] == (b"kernel-7", 8, 1, 0)
    assert fixed[4] == [200_000 * len("kernel")] * 4
    assert fixed[5] == 1


# What torch's stable-ABI headers do (torch/csrc/stable/macros.h): a runtime shim lookup.
DLSYM_CPP = (
    lib.PYINIT
    + r"""
#include <dlfcn.h>
extern "C" void *kw_lookup(const char *name) { return dlsym(RTLD_DEFAULT, name); }
"""
)


def test_dlsym_remedy_binds_the_old_version_and_finds_the_same_symbols(so_dir: Path) -> None:
    flags = ["-std=c++17", "-O2"]
    plain = lib.build_so(so_dir, "dlsym-plain", DLSYM_CPP, flags=flags)
    report = check_shared_object(plain, python_abi="3.9", cxxabi="cxx11")
    (violation,) = report.violations
    assert (violation.subject, violation.version) == ("dlsym", "GLIBC_2.34")
    assert "remedy 'dlsym-glibc-2-34'" in violation.fix
    rs = remedy_flags()
    fixed = lib.build_so(
        so_dir, "dlsym-fixed", DLSYM_CPP, flags=[*flags, *rs.cxx_flags], extra_sources=rs.sources
    )
    assert check_shared_object(fixed, python_abi="3.9", cxxabi="cxx11").ok
    (version,) = {s.version for s in read_elf(fixed).symbols if s.name == "dlsym"}
    assert version in ("GLIBC_2.2.5", "GLIBC_2.17")  # x86_64, aarch64
    libc = ctypes.CDLL(None)
    found = []
    for path in (plain, fixed):
        so = ctypes.CDLL(str(path))
        so.kw_lookup.argtypes = [ctypes.c_char_p]
        so.kw_lookup.restype = ctypes.c_void_p
        found.append((so.kw_lookup(b"strlen"), so.kw_lookup(b"no_such_symbol_kw")))
    strlen = ctypes.cast(libc.strlen, ctypes.c_void_p).value
    assert found == [(strlen, None), (strlen, None)]
