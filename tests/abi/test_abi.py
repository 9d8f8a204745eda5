"""The ABI checker on tiny shared objects built here, each violating exactly one rule; its
verdicts are compared with auditwheel's analysis and with kernel-abi-check 0.14.1."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "abi"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import abi_testlib as lib  # noqa: E402
from regen_stable_abi import format_tsv, items_from_stable_abi_toml  # noqa: E402

from kernelwheel import cli  # noqa: E402
from kernelwheel.abi.checker import check_shared_object, check_wheel, read_wheel_tags
from kernelwheel.abi.policy import load_kernel_libraries, load_policy, normalize_policy
from kernelwheel.abi.report import Rule
from kernelwheel.abi.stable_abi import (
    load_stable_abi,
    parse_tsv,  # noqa: E402
)
from kernelwheel.errors import AbiError, UsageError, WheelError  # noqa: E402
from kernelwheel.model.variant import CxxAbi

pytestmark = pytest.mark.skipif(
    not (lib.have_compiler("g++") and lib.have_compiler("gcc")), reason="needs gcc and g++"
)

try:
    import kernel_abi_check  # noqa: F401

    HAVE_KAC = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_KAC = False
needs_kac = pytest.mark.skipif(
    not HAVE_KAC,
    reason="kernel-abi-check is not installed (pip install kernel-abi-check==0.14.1)",
)

MANYLINUX_RULES = {Rule.SYMBOL_VERSIONS, Rule.NEEDED_LIBS}

# --- sources: a clean baseline, then one source per rule ---------------------------------------

CLEAN_CPP = (
    lib.PYINIT
    + """
#include <string>
std::string kw_greet(const std::string &who) { return "hello " + who; }
"""
)

CLEAN_LIMITED_API_C = """
#define Py_LIMITED_API 0x03090000
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_x", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__x(void) { return PyModule_Create(&mod); }
"""

# close_range joined glibc in 2.34.
TOO_NEW_GLIBC_C = (
    lib.PYINIT_C
    + """
#define _GNU_SOURCE
#include <unistd.h>
int kw_close_all(void) { return close_range(3, ~0U, 0); }
"""
)

# gcc >= 11's allocator calls std::__throw_bad_array_new_length (GLIBCXX_3.4.29) on overflow.
TOO_NEW_GLIBCXX_CPP = (
    lib.PYINIT
    + """
#include <memory>
int *kw_alloc(unsigned long n) { return std::allocator<int>().allocate(n); }
"""
)

# PyUnicode_AsUTF8 is not in the stable ABI; PyUnicode_AsUTF8AndSize joined it in 3.10.
NOT_ABI3_C = (
    lib.PYINIT_C
    + """
#include <Python.h>
const char *kw_utf8(PyObject *o) { return PyUnicode_AsUTF8(o); }
"""
)
ABI3_310_C = (
    lib.PYINIT_C
    + """
#include <Python.h>
const char *kw_utf8(PyObject *o, Py_ssize_t *n) { return PyUnicode_AsUTF8AndSize(o, n); }
"""
)

# A function taking std::string: mangled with __cxx11 under the C++11 ABI.
STRING_API_CPP = (
    lib.PYINIT
    + """
#include <string>
void kw_takes(const std::string &s);  // provided by "torch"
int kw_call(const std::string &s) { kw_takes(s); return (int)s.size(); }
"""
)

NEEDS_DEP_C = (
    lib.PYINIT_C + "int kwdep_answer(void);\nint kw_call(void) { return kwdep_answer(); }\n"
)
DEP_C = "int kwdep_answer(void) { return 42; }\n"


@pytest.fixture(scope="module")
def so_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("abi-so")


@pytest.fixture(scope="module")
def clean_so(so_dir: Path) -> Path:
    return lib.build_so(so_dir, "clean", CLEAN_CPP, flags=["-O2", "-D_GLIBCXX_USE_CXX11_ABI=1"])


@pytest.fixture(scope="module")
def dep_lib(so_dir: Path) -> Path:
    """A tiny library of our own, libkwdep.so: on no allowlist."""
    built = lib.build_so(so_dir, "kwdep", DEP_C, compiler="gcc", flags=["-Wl,-soname,libkwdep.so"])
    target = so_dir / "deps" / "libkwdep.so"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(built.read_bytes())
    return target


def _case(so_dir: Path, case: str, dep_lib: Path) -> tuple[Path, dict[str, object]]:
    """Build one violating object; return it with the check arguments that expose it."""
    if case == "glibc":
        return lib.build_so(so_dir, case, TOO_NEW_GLIBC_C, compiler="gcc"), {}
    if case == "glibcxx":
        return lib.build_so(so_dir, case, TOO_NEW_GLIBCXX_CPP, flags=["-O2"]), {}
    if case == "not-abi3":
        flags = ["-O2", f"-I{lib.PY_INCLUDE}"]
        return lib.build_so(so_dir, case, NOT_ABI3_C, compiler="gcc", flags=flags), {}
    if case == "cxx-abi":
        flags = ["-O2", "-D_GLIBCXX_USE_CXX11_ABI=1"]
        return lib.build_so(so_dir, case, STRING_API_CPP, flags=flags), {"cxxabi": "cxx98"}
    if case == "library":
        link = [f"-L{dep_lib.parent}", "-lkwdep"]
        return lib.build_so(so_dir, case, NEEDS_DEP_C, compiler="gcc", link=link), {}
    raise AssertionError(case)


CASES = {
    "glibc": Rule.SYMBOL_VERSIONS,
    "glibcxx": Rule.SYMBOL_VERSIONS,
    "not-abi3": Rule.PYTHON_ABI,
    "cxx-abi": Rule.CXX_ABI,
    "library": Rule.NEEDED_LIBS,
}


# --- policy and data ------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_policy_caps_come_from_auditwheel(arch: str) -> None:
    policy = load_policy("manylinux_2_28", arch)
    assert policy.cap("GLIBC") == "2.28"
    assert policy.cap("GLIBCXX") == "3.4.24"
    assert policy.cap("CXXABI") == "1.3.11"
    assert policy.cap("GCC") == "7.0.0"
    assert policy.allows("GLIBC_2.17") and not policy.allows("GLIBC_2.32")
    assert policy.allows("CXXABI_TM_1")
    assert policy.allows("libcudart.so.13")  # a version prefix the policy does not cap
    assert {"libc.so.6", "libstdc++.so.6", "libm.so.6"} <= policy.whitelist
    assert policy.tag == f"manylinux_2_28_{arch}"


def test_policy_names() -> None:
    assert normalize_policy("manylinux_2_28") == ("manylinux_2_28", None)
    assert normalize_policy("manylinux_2_28_aarch64") == ("manylinux_2_28", "aarch64")
    assert normalize_policy("manylinux2014") == ("manylinux_2_17", None)
    with pytest.raises(UsageError, match="unknown manylinux policy 'manylinux_9_99'") as exc:
        normalize_policy("manylinux_9_99")
    assert exc.value.hint and "manylinux_2_28" in exc.value.hint


def test_kernel_library_patterns() -> None:
    libs = load_kernel_libraries()
    for soname, group in [
        ("libtorch.so", "torch"),
        ("libc10.so", "torch"),
        ("libc10_cuda.so", "torch"),
        ("libtorch_cuda.so", "torch"),
        ("libcudart.so.13", "cuda"),
        ("libcuda.so.1", "cuda"),
        ("libcublasLt.so.12", "cuda"),
        ("libnvrtc.so.13", "cuda"),
    ]:
        assert libs.provided_by(soname) == group, soname
    assert libs.provided_by("libkwdep.so") is None
    assert libs.forbidden_reason("libtorch_python.so")
    assert libs.forbidden_reason("libpython3.11.so.1.0")
    assert "libc10.so" in libs.exclude_patterns()
    assert libs.first_release("GLIBCXX_3.4.29") == "gcc 11.1"


def test_stable_abi_data() -> None:
    stable = load_stable_abi()
    assert len(stable) > 900
    assert stable["PyModule_Create2"].added == (3, 2)
    assert stable["PyUnicode_AsUTF8AndSize"].added == (3, 10)
    assert stable["_Py_Dealloc"].abi_only
    assert not stable["PyErr_SetFromWindowsErr"].on_linux()
    assert stable["PyOS_AfterFork_Child"].on_linux()
    assert "PyUnicode_AsUTF8" not in stable


def test_stable_abi_generator_reads_cpython_toml() -> None:
    toml = """
[function.PyArg_Parse]
    added = '3.2'
[function._Py_Dealloc]
    added = '3.2'
    abi_only = true
[data.PyExc_WindowsError]
    added = '3.7'  # (and 3.6.1)
    ifdef = 'MS_WINDOWS'
[struct.PyObject]
    added = '3.2'
[const.Py_tp_dealloc]
    added = '3.2'
"""
    items = items_from_stable_abi_toml(toml)
    assert {i.name for i in items} == {"PyArg_Parse", "_Py_Dealloc", "PyExc_WindowsError"}
    table = parse_tsv(format_tsv(items, source="test"))
    assert table["_Py_Dealloc"].abi_only and table["_Py_Dealloc"].kind == "function"
    assert table["PyExc_WindowsError"].ifdef == "MS_WINDOWS"
    assert table["PyExc_WindowsError"].added == (3, 7)


@pytest.mark.parametrize(
    ("local", "abi"),
    [
        ("torch2.14.cu130.cxx11", "cxx11"),
        ("torch2.6.cu124.cxx98", "cxx98"),
        ("torch27cu128cxx11", "cxx11"),
        ("torch26cu118cxx98", "cxx98"),
        ("cu12torch2.8cxx11abitrue", "cxx11"),
        ("cu12torch2.8cxx11abifalse", "cxx98"),
        ("torch210cu130cxx11", "cxx11"),
        ("torch2.14.cpu", None),
        ("cuda", None),
        (None, None),
    ],
)
def test_cxxabi_in_local_version(local: str | None, abi: str | None) -> None:
    found = CxxAbi.in_local_version(local)
    assert (found.value if found is not None else None) == abi


def test_read_wheel_tags() -> None:
    tags = read_wheel_tags("img2gray-0.1.0+torch2.14.cu130.cxx11-cp310-abi3-linux_x86_64.whl")
    assert (tags.python_abi, tags.cxxabi, tags.arch, tags.claimed_policy) == (
        "3.10",
        "cxx11",
        "x86_64",
        None,
    )
    tags = read_wheel_tags("img2grey-1.1.2+torch27cu128cxx98-cp39-abi3-manylinux_2_28_aarch64.whl")
    assert (tags.python_abi, tags.cxxabi, tags.arch, tags.claimed_policy) == (
        "3.9",
        "cxx98",
        "aarch64",
        "manylinux_2_28",
    )
    tags = read_wheel_tags(
        "x-1.0-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.manylinux_2_28_x86_64.whl"
    )
    assert tags.claimed_policy == "manylinux_2_17"  # the strictest claim
    tags = read_wheel_tags("x-1.0-cp311-cp311-linux_x86_64.whl")
    assert tags.python_abi is None and tags.cxxabi is None
    tags = read_wheel_tags("x-1.0-py3-none-any.whl")
    assert tags.arch is None
    with pytest.raises(WheelError, match="not a valid wheel file name"):
        read_wheel_tags("not-a-wheel.zip")


# --- one rule per object ------------------------------------------------------------------------


def test_clean_object_passes_every_rule(clean_so: Path, tmp_path: Path) -> None:
    report = check_shared_object(clean_so, python_abi="3.9", cxxabi="cxx11", torch_stable_abi=True)
    assert report.ok, [v.one_line() for v in report.violations]
    assert set(report.checked) == {r for r in Rule if r.per_object}
    assert all(report.status(r) for r in Rule if r.per_object)
    assert "GLIBCXX" in dict(report.requires)
    verdict = lib.auditwheel_verdict(lib.wheel_with_so(tmp_path, clean_so))
    assert verdict.complies, verdict
    if HAVE_KAC:
        assert lib.kac_manylinux(clean_so) == set()
        assert lib.kac_python(clean_so, "3.9") == set()


def test_limited_api_extension_is_clean(so_dir: Path) -> None:
    so = lib.build_so(
        so_dir, "limited", CLEAN_LIMITED_API_C, compiler="gcc", flags=[f"-I{lib.PY_INCLUDE}"]
    )
    report = check_shared_object(so, python_abi="3.9", cxxabi=None)
    assert report.ok, [v.one_line() for v in report.violations]
    assert report.status(Rule.CXX_ABI) is None
    if HAVE_KAC:
        assert lib.kac_python(so, "3.9") == set()


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_object_violates_exactly_its_rule(
    case: str, so_dir: Path, dep_lib: Path, tmp_path: Path
) -> None:
    so, kwargs = _case(so_dir, case, dep_lib)
    report = check_shared_object(so, **kwargs)  # type: ignore[arg-type]
    violated = {v.rule for v in report.violations}
    assert violated == {CASES[case]}, [v.one_line() for v in report.violations]
    for v in report.violations:
        assert v.cause and v.fix and v.file == str(so)

    # auditwheel judges the manylinux rules only: it must agree on those, and see nothing in
    # the kernelwheel-only rules (Python stable ABI, C++ ABI).
    wheel = lib.wheel_with_so(tmp_path, so)
    verdict = lib.auditwheel_verdict(wheel, ldpaths=str(dep_lib.parent))
    mine_ok = not (violated & MANYLINUX_RULES)
    assert verdict.complies == mine_ok, verdict
    assert verdict.symbols_ok == (report.status(Rule.SYMBOL_VERSIONS) is not False)
    assert verdict.external_libs == {
        v.subject for v in report.violations if v.rule is Rule.NEEDED_LIBS
    }


def test_too_new_glibc_names_symbol_and_version(so_dir: Path, dep_lib: Path) -> None:
    so, _ = _case(so_dir, "glibc", dep_lib)
    (v,) = check_shared_object(so).violations
    assert (v.subject, v.version) == ("close_range", "GLIBC_2.34")
    assert "GLIBC <= 2.28" in v.cause and "manylinux_2_28" in v.fix


def test_too_new_glibcxx_names_symbol_and_remedy(so_dir: Path, dep_lib: Path) -> None:
    so, _ = _case(so_dir, "glibcxx", dep_lib)
    (v,) = check_shared_object(so).violations
    assert (v.subject, v.version) == ("_ZSt28__throw_bad_array_new_lengthv", "GLIBCXX_3.4.29")
    assert "std::__throw_bad_array_new_length()" in v.cause
    assert "remedy" in v.fix


def test_stable_abi_version_floor(so_dir: Path) -> None:
    so = lib.build_so(
        so_dir, "abi310", ABI3_310_C, compiler="gcc", flags=["-O2", f"-I{lib.PY_INCLUDE}"]
    )
    (v,) = check_shared_object(so, python_abi="3.9").violations
    assert (v.rule, v.subject, v.version) == (Rule.PYTHON_ABI, "PyUnicode_AsUTF8AndSize", "3.10")
    assert "cp310-abi3" in v.fix
    assert check_shared_object(so, python_abi="3.10").ok
    assert check_shared_object(so, python_abi=None).status(Rule.PYTHON_ABI) is None


def test_cxx11_object_passes_as_cxx11(so_dir: Path, dep_lib: Path) -> None:
    so, _ = _case(so_dir, "cxx-abi", dep_lib)
    assert check_shared_object(so, cxxabi="cxx11").ok
    report = check_shared_object(so, cxxabi="cxx98")
    assert all("__cxx11" in v.subject for v in report.violations)


def test_cxx98_object_checked_as_cxx11(so_dir: Path) -> None:
    so = lib.build_so(
        so_dir, "old-abi", STRING_API_CPP, flags=["-O2", "-D_GLIBCXX_USE_CXX11_ABI=0"]
    )
    assert check_shared_object(so, cxxabi="cxx98").ok
    report = check_shared_object(so, cxxabi="cxx11")
    assert {v.rule for v in report.violations} == {Rule.CXX_ABI}
    (v,) = report.violations  # only the unversioned import from "torch"
    assert v.subject == "_Z8kw_takesRKSs"
    assert "pre-C++11 std::string ABI" in v.cause


@pytest.mark.parametrize(
    "needed", ["libtorch.so", "libc10.so", "libc10_cuda.so", "libcudart.so.13", "libcuda.so.1"]
)
def test_torch_and_cuda_libraries_are_allowed(so_dir: Path, needed: str, tmp_path: Path) -> None:
    stub = lib.build_so(
        so_dir, "stub-" + needed, DEP_C, compiler="gcc", flags=[f"-Wl,-soname,{needed}"]
    )
    link_dir = so_dir / ("link-" + needed)
    link_dir.mkdir(exist_ok=True)
    (link_dir / needed).write_bytes(stub.read_bytes())
    so = lib.build_so(
        so_dir,
        "needs-" + needed,
        NEEDS_DEP_C,
        compiler="gcc",
        link=[f"-L{link_dir}", f"-l:{needed}"],
    )
    report = check_shared_object(so)
    assert needed in report.needed and report.ok
    # auditwheel agrees once told not to graft torch/CUDA (what kernelwheel's repair passes).
    wheel = lib.wheel_with_so(tmp_path, so)
    verdict = lib.auditwheel_verdict(
        wheel, exclude=load_kernel_libraries().exclude_patterns(), ldpaths=str(link_dir)
    )
    assert verdict.complies and not verdict.external_libs


def test_libtorch_python_is_forbidden(so_dir: Path) -> None:
    stub = lib.build_so(
        so_dir, "stub-tp", DEP_C, compiler="gcc", flags=["-Wl,-soname,libtorch_python.so"]
    )
    link_dir = so_dir / "link-tp"
    link_dir.mkdir(exist_ok=True)
    (link_dir / "libtorch_python.so").write_bytes(stub.read_bytes())
    so = lib.build_so(
        so_dir, "needs-tp", NEEDS_DEP_C, compiler="gcc", link=[f"-L{link_dir}", "-ltorch_python"]
    )
    (v,) = check_shared_object(so).violations
    assert (v.rule, v.subject) == (Rule.NEEDED_LIBS, "libtorch_python.so")
    assert "TORCH_LIBRARY" in v.fix


def test_executable_stack_and_arch_mismatch(so_dir: Path, clean_so: Path) -> None:
    so = lib.build_so(so_dir, "execstack", DEP_C, compiler="gcc", flags=["-Wl,-z,execstack"])
    (v,) = check_shared_object(so, python_abi=None, cxxabi=None).violations
    assert (v.rule, v.subject) == (Rule.ELF, "PT_GNU_STACK")
    (v,) = check_shared_object(clean_so, arch="aarch64").violations
    assert v.rule is Rule.ELF and "x86_64" in v.cause


@needs_kac
@pytest.mark.parametrize("case", sorted(CASES))
def test_agrees_with_kernel_abi_check(case: str, so_dir: Path, dep_lib: Path) -> None:
    """kernel-abi-check checks symbol versions and Python symbols (not libraries, not the C++
    ABI): on those two rules its findings must equal ours, symbol by symbol."""
    so, kwargs = _case(so_dir, case, dep_lib)
    report = check_shared_object(so, **kwargs)  # type: ignore[arg-type]
    ours_versions = set()
    for v in report.violations:
        if v.rule is Rule.SYMBOL_VERSIONS:
            assert v.version is not None
            prefix, _, version = v.version.partition("_")
            ours_versions.add((prefix, v.subject, version))
    ours_python = {(v.subject, v.version) for v in report.violations if v.rule is Rule.PYTHON_ABI}
    assert lib.kac_manylinux(so) == ours_versions
    assert lib.kac_python(so, "3.9") == ours_python


@needs_kac
def test_agrees_with_kernel_abi_check_on_version_floor(so_dir: Path) -> None:
    so = lib.build_so(
        so_dir, "abi310", ABI3_310_C, compiler="gcc", flags=["-O2", f"-I{lib.PY_INCLUDE}"]
    )
    for floor in ("3.9", "3.10"):
        ours = {
            (v.subject, v.version) for v in check_shared_object(so, python_abi=floor).violations
        }
        assert lib.kac_python(so, floor) == ours


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        check_shared_object(tmp_path / "missing.so")
    text = tmp_path / "text.so"
    text.write_text("not elf")
    with pytest.raises(UsageError, match="not a readable ELF"):
        check_shared_object(text)
    with pytest.raises(UsageError, match="unknown C\\+\\+ ABI"):
        check_shared_object(text, cxxabi="cxx17")
    bad = tmp_path / "x-1.0-cp39-abi3-linux_x86_64.whl"
    bad.write_text("not a zip")
    with pytest.raises(WheelError, match="not a zip archive"):
        check_wheel(bad)


# --- wheels -------------------------------------------------------------------------------------


def test_check_wheel_reads_abi_from_the_name(so_dir: Path, dep_lib: Path, tmp_path: Path) -> None:
    so, _ = _case(so_dir, "cxx-abi", dep_lib)  # a cxx11 object
    cxx11 = lib.wheel_with_so(
        tmp_path, so, filename="pkg-0.1.0+torch2.14.cu130.cxx11-cp310-abi3-linux_x86_64.whl"
    )
    report = check_wheel(cxx11)
    assert report.ok and (report.python_abi, report.cxxabi, report.arch) == (
        "3.10",
        "cxx11",
        "x86_64",
    )
    assert report.policy == "manylinux_2_28_x86_64"
    assert [o.file for o in report.objects] == ["pkg/_x.abi3.so"]

    cxx98 = lib.wheel_with_so(
        tmp_path, so, filename="pkg-0.1.0+torch26cu124cxx98-cp39-abi3-linux_x86_64.whl"
    )
    report = check_wheel(cxx98)
    assert not report.ok and {v.rule for v in report.violations} == {Rule.CXX_ABI}
    assert report.violations[0].file == "pkg/_x.abi3.so"
    assert "pkg/_x.abi3.so" in report.summary()

    plain = lib.wheel_with_so(tmp_path, so, filename="pkg-0.1.0-cp39-abi3-linux_x86_64.whl")
    assert check_wheel(plain).cxxabi is None  # no ABI in the version: not checked


def test_check_wheel_accepts_libraries_it_ships(
    so_dir: Path, dep_lib: Path, tmp_path: Path
) -> None:
    so, _ = _case(so_dir, "library", dep_lib)
    wheel = lib.make_wheel(
        tmp_path,
        "pkg-0.1.0-cp39-abi3-linux_x86_64.whl",
        {"pkg/__init__.py": b"", "pkg/_x.abi3.so": so, "pkg.libs/libkwdep.so": dep_lib},
    )
    report = check_wheel(wheel)
    assert report.ok, report.summary()
    assert len(report.objects) == 2


def test_pure_tag_with_native_code_is_flagged(clean_so: Path, tmp_path: Path) -> None:
    wheel = lib.wheel_with_so(tmp_path, clean_so, filename="pkg-0.1.0-py3-none-any.whl")
    report = check_wheel(wheel)
    assert {v.rule for v in report.violations} == {Rule.ELF}


def test_policy_from_tag(clean_so: Path, tmp_path: Path) -> None:
    wheel = lib.wheel_with_so(
        tmp_path, clean_so, filename="pkg-0.1.0-cp39-abi3-manylinux_2_5_x86_64.whl"
    )
    report = check_wheel(wheel, policy=None)
    assert report.policy == "manylinux_2_5_x86_64"
    assert not report.ok  # GLIBCXX 3.4.21 is far too new for manylinux_2_5
    with pytest.raises(UsageError, match="is for aarch64"):
        check_wheel(wheel, policy="manylinux_2_28_aarch64")


# --- the command --------------------------------------------------------------------------------


def test_cli_clean_wheel_exits_0(
    clean_so: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = lib.wheel_with_so(
        tmp_path, clean_so, filename="pkg-0.1.0+torch2.14.cpu.cxx11-cp39-abi3-linux_x86_64.whl"
    )
    assert cli.main(["check", str(wheel)]) == 0
    out = capsys.readouterr().out
    assert "pkg/_x.abi3.so" in out and "complies" in out
    for rule in Rule:
        assert rule.value in out


def test_cli_violation_exits_with_abi_error(
    so_dir: Path, dep_lib: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    so, _ = _case(so_dir, "glibc", dep_lib)
    wheel = lib.wheel_with_so(tmp_path, so)
    assert cli.main(["check", str(wheel)]) == AbiError.exit_code == 8
    captured = capsys.readouterr()
    assert "close_range (GLIBC_2.34)" in captured.out
    assert "cause:" in captured.out and "fix:" in captured.out
    assert "1 ABI violation(s)" in captured.err

    assert cli.main(["check", "--json", str(wheel)]) == 8
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False
    (entry,) = data["reports"]
    assert entry["kind"] == "wheel" and entry["rules"]["symbol-versions"] is False
    (violation,) = entry["objects"][0]["violations"]
    assert violation["subject"] == "close_range" and violation["version"] == "GLIBC_2.34"


def test_cli_shared_object_and_overrides(
    so_dir: Path, dep_lib: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    so, _ = _case(so_dir, "not-abi3", dep_lib)
    assert cli.main(["check", str(so)]) == 8
    assert "PyUnicode_AsUTF8" in capsys.readouterr().out
    assert cli.main(["check", "--python-abi", "none", str(so)]) == 0
    capsys.readouterr()
    assert cli.main(["check", "--policy", "manylinux_7_7", str(so)]) == UsageError.exit_code


def test_wheel_members_are_not_extracted_outside(clean_so: Path, tmp_path: Path) -> None:
    """A hostile member name is only displayed, never used as an extraction path."""
    wheel = lib.make_wheel(
        tmp_path,
        "pkg-0.1.0-cp39-abi3-linux_x86_64.whl",
        {"pkg/__init__.py": b"", "../../escape.so": clean_so},
    )
    report = check_wheel(wheel, cxxabi=None)
    assert [o.file for o in report.objects] == ["../../escape.so"]
    assert not (tmp_path.parent / "escape.so").exists()
    with zipfile.ZipFile(wheel) as zf:
        assert "../../escape.so" in zf.namelist()


# --- the ELF reader -----------------------------------------------------------------------------


def test_fast_elf_reader_agrees_with_pyelftools(
    so_dir: Path, clean_so: Path, dep_lib: Path, tmp_path: Path
) -> None:
    """read_elf's struct-based path gives what pyelftools reads, object for object (the tests'
    own objects, aarch64 and 32-bit ones where the machine has some, system libraries), and
    hands anything it does not handle (truncated, not ELF) to pyelftools."""
    import glob
    import io

    from kernelwheel.abi import _elf

    lib.build_so(so_dir, "strapi", STRING_API_CPP, flags=["-D_GLIBCXX_USE_CXX11_ABI=0"])
    found = [p for p in so_dir.rglob("*.so") if p.is_file()]
    for pattern in (
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6*",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/aarch64-linux-gnu/lib/libstdc++.so.6*",
        "/usr/libexec/valgrind/*-x86-linux.so",
    ):
        found += [Path(p) for p in sorted(glob.glob(pattern))[:2]]
    compared = 0
    for path in found:
        data = path.read_bytes()
        if data[:4] != _elf.ELF_MAGIC:
            continue
        reference = _elf._read_reference(path, io.BytesIO(data))
        assert _elf._read_fast(data) == reference, path
        assert _elf.read_elf(path) == reference == _elf.read_elf(path, data)
        compared += 1
    assert compared >= 3
    truncated = clean_so.read_bytes()[:200]
    with pytest.raises(_elf._Unusual):
        _elf._read_fast(truncated)
    with pytest.raises(_elf.NotElfError):
        _elf.read_elf(tmp_path / "cut.so", truncated)
