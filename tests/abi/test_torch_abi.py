"""The torch-abi rule: a build against libtorch's stable ABI imports only its extern "C" shim.
Tiny objects built here import what a kernel would: the shim's C functions (allowed), or
libtorch's C++ API (at::, c10::, torch::; planted violations the rule must refuse)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "abi"))
import abi_testlib as lib  # noqa: E402

from kernelwheel import cli  # noqa: E402
from kernelwheel.abi import checker  # noqa: E402
from kernelwheel.abi._elf import read_elf  # noqa: E402
from kernelwheel.abi.checker import check_shared_object, check_wheel, read_wheel_tags  # noqa: E402
from kernelwheel.abi.policy import load_kernel_libraries  # noqa: E402
from kernelwheel.abi.report import Rule  # noqa: E402
from kernelwheel.errors import AbiError  # noqa: E402

pytestmark = pytest.mark.skipif(not lib.have_compiler("g++"), reason="needs g++")

# What torch/csrc/stable compiles to: calls into the C shim, header-only C++ of its own (defined
# here), std:: from libstdc++ (versioned imports), and a declaration in torch::stable.
STABLE_CPP = (
    lib.PYINIT
    + r"""
#include <cstdint>
#include <string>
extern "C" int32_t aoti_torch_get_numel(void *tensor, int64_t *ret);
extern "C" int32_t torch_library_impl(const char *name, void *fn, uint64_t version);
namespace torch { namespace stable { namespace detail {
inline int64_t numel(void *t) { int64_t n = 0; aoti_torch_get_numel(t, &n); return n; }
void kw_declared_in_stable();
} } }
extern "C" int64_t kw_numel(void *t, const char *who) {
    std::string name(who);
    torch::stable::detail::kw_declared_in_stable();
    torch_library_impl(name.c_str(), nullptr, 0);
    return torch::stable::detail::numel(t) + static_cast<int64_t>(name.size());
}
"""
)

# Each plants one kind of libtorch C++ import, declared by hand as a stray header would.
PLANTED = {
    "member-function": (
        "namespace at { struct Tensor { long numel() const; }; }\n"
        'extern "C" long kw(const at::Tensor *t) { return t->numel(); }\n',
        "_ZNK2at6Tensor5numelEv",
        "at",
    ),
    "free-function": (
        "namespace c10 { namespace detail {\n"
        "[[noreturn]] void torchCheckFail(const char *, const char *, unsigned, const char *);\n"
        "} }\n"
        'extern "C" void kw(int ok) { if (!ok) c10::detail::torchCheckFail("f", "x", 1, "m"); }\n',
        "_ZN3c106detail14torchCheckFailEPKcS2_jS2_",
        "c10",
    ),
    "typeinfo": (
        "namespace c10 { struct Error { virtual ~Error(); }; }\n"
        'extern "C" int kw(void (*f)()) { try { f(); } catch (const c10::Error &) { return 1; } '
        "return 0; }\n",
        "_ZTIN3c105ErrorE",
        "c10",
    ),
    "signature": (
        "namespace at { struct Tensor; }\n"
        "void kw_other_library(const at::Tensor &);\n"
        'extern "C" void kw(const at::Tensor *t) { kw_other_library(*t); }\n',
        "_Z16kw_other_libraryRKN2at6TensorE",
        "at",
    ),
    "torch-namespace": (
        "namespace torch { namespace autograd { void kw_grad_mode(bool); } }\n"
        'extern "C" void kw() { torch::autograd::kw_grad_mode(true); }\n',
        "_ZN5torch8autograd12kw_grad_modeEb",
        "torch",
    ),
}


@pytest.fixture(scope="module")
def so_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("torch-abi")


def _build(so_dir: Path, name: str, source: str) -> Path:
    return lib.build_so(so_dir, name, source, flags=["-O2", "-std=c++17"])


def _planted(so_dir: Path, case: str) -> Path:
    return _build(so_dir, f"planted-{case}", lib.PYINIT + PLANTED[case][0])


def test_the_rule_reads_its_namespaces_from_the_policy_data() -> None:
    libs = load_kernel_libraries()
    assert libs.torch_namespaces == ("at", "c10", "torch", "caffe2")
    assert libs.torch_stable_namespaces == ("torch::stable", "torch::headeronly")


def test_a_stable_abi_object_passes(so_dir: Path) -> None:
    so = _build(so_dir, "stable", STABLE_CPP)
    report = check_shared_object(so, python_abi="3.9", cxxabi="cxx11", torch_stable_abi=True)
    assert Rule.TORCH_ABI in report.checked
    assert report.ok, [v.one_line() for v in report.violations]
    imported = {s.name for s in read_elf(so).symbols if not s.defined}
    # It does import from libtorch (the shim), from torch::stable, and std:: C++ symbols.
    assert {"aoti_torch_get_numel", "torch_library_impl"} <= imported
    assert "_ZN5torch6stable6detail21kw_declared_in_stableEv" in imported
    assert any(name.startswith("_ZNSt7__cxx11") for name in imported)


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_planted_libtorch_cxx_import_is_refused(so_dir: Path, case: str) -> None:
    _, symbol, namespace = PLANTED[case]
    so = _planted(so_dir, case)
    report = check_shared_object(so, python_abi="3.9", cxxabi="cxx11", torch_stable_abi=True)
    assert {v.rule for v in report.violations} == {Rule.TORCH_ABI}
    (violation,) = report.violations
    assert violation.subject == symbol
    assert f"is libtorch's C++ API ({namespace}::)" in violation.cause
    assert checker.demangle(symbol) in violation.cause
    assert "torch/csrc/stable" in violation.fix and "torch.stable-abi" in violation.fix
    # A per-torch build may use the C++ API: the rule is not applied to it.
    per_torch = check_shared_object(so, python_abi="3.9", cxxabi="cxx11")
    assert per_torch.ok and per_torch.status(Rule.TORCH_ABI) is None


def test_without_a_demangler_the_mangled_scope_still_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    libs = load_kernel_libraries()
    monkeypatch.setattr(checker, "demangle", lambda name: name)
    judged = {
        "_ZNK2at6Tensor5numelEv": "at",
        "_ZTIN3c105ErrorE": "c10",
        "_ZTVN3c105ErrorE": "c10",
        "_ZN5torch8autograd12kw_grad_modeEb": "torch",
        "_ZN6caffe28TypeMeta3fooEv": "caffe2",
        "_ZN5torch6stable6detail21kw_declared_in_stableEv": None,
        "_ZN5torch10headeronly3fooEv": None,
        "_ZN12attribute_kw3fooEv": None,  # "2at" inside another name is no scope
        "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE10_M_disposeEv": None,
    }
    assert {name: checker._torch_namespace(name, libs) for name in judged} == judged


def _wheel(tmp_path: Path, so: Path, local: str) -> Path:
    name = f"pkg-0.1.0+{local}-cp39-abi3-linux_x86_64.whl"
    return lib.wheel_with_so(tmp_path / local, so, filename=name)


def test_the_wheels_local_version_turns_the_rule_on(so_dir: Path, tmp_path: Path) -> None:
    so = _planted(so_dir, "member-function")
    for local, stable_abi in [
        ("torch2.10.stable.cu130", True),
        ("torch210stablecpu", True),  # the compact spelling
        ("torch2.10.cpu.cxx11", False),
        ("cu12torch2.8cxx11abiTRUE", False),  # a foreign label
    ]:
        tags = read_wheel_tags(f"p-1+{local}-cp39-abi3-linux_x86_64.whl")
        assert tags.torch_stable_abi is stable_abi, local
    stable = check_wheel(_wheel(tmp_path, so, "torch2.10.stable.cpu"))
    assert not stable.ok and stable.status(Rule.TORCH_ABI) is False
    assert {v.rule for v in stable.violations} == {Rule.TORCH_ABI}
    per_torch = check_wheel(_wheel(tmp_path, so, "torch2.13.cpu.cxx11"))
    assert per_torch.ok and per_torch.status(Rule.TORCH_ABI) is None
    # Explicit either way.
    assert check_wheel(_wheel(tmp_path, so, "torch2.10.stable.cu130"), torch_stable_abi=False).ok
    forced = check_wheel(_wheel(tmp_path, so, "torch2.14.cpu.cxx11"), torch_stable_abi=True)
    assert forced.status(Rule.TORCH_ABI) is False


def test_check_command_applies_the_rule(
    so_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    so = _planted(so_dir, "free-function")
    assert cli.main(["check", str(so), "--torch-abi", "stable"]) == AbiError.exit_code
    out = capsys.readouterr().out
    assert "torch stable ABI" in out and "torch-abi" in out
    assert "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)" in out
    assert cli.main(["check", str(so)]) == 0  # a .so is a per-torch build unless told
    wheel = _wheel(tmp_path, so, "torch2.10.stable.cpu")
    assert cli.main(["check", str(wheel)]) == AbiError.exit_code
    assert cli.main(["check", str(wheel), "--torch-abi", "full"]) == 0
