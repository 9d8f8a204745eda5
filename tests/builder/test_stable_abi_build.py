"""Stable-ABI builds: the ABI target the compiler gets, the torch the build may use, the import
guard of the wheel; and, for real, the fixture kernel tests/fixtures/stable_axpy built against
torch 2.14.1, installed with pip next to torch 2.13.0+cpu and called."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from venv import create as create_venv

import pytest
from support.builds import CPU_VARIANT, CUDA_VARIANT, build_env
from support.installkit import UV, isolated_env
from support.layered import LayeredVenv
from support.wheelread import read_wheel

from kernelwheel.abi.checker import check_wheel
from kernelwheel.abi.report import Rule
from kernelwheel.builder import codegen
from kernelwheel.builder.pipeline import _check_env_matches
from kernelwheel.cli import main
from kernelwheel.compat.guard import BuildStamp
from kernelwheel.errors import ToolchainError
from kernelwheel.model.variant import TorchVersion, Variant
from kernelwheel.toolchain.envs import EnvInfo

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "stable_axpy"
STABLE_CPU = Variant.parse("torch-stable-abi210-cpu-x86_64-linux")
STABLE_CU130 = Variant.parse("torch-stable-abi210-cu130-x86_64-linux")


def test_target_version_is_torchs_encoding_of_the_abi_release() -> None:
    # torch/csrc/stable/version.h: (((0ULL + major) << 56) | ((0ULL + minor) << 48))
    assert TorchVersion(2, 9).target_version == "0x0209000000000000"
    assert TorchVersion(2, 10).target_version == "0x020a000000000000"
    assert int(TorchVersion(2, 14).target_version, 16) == (2 << 56) | (14 << 48)


def test_registration_header_has_the_stable_macros() -> None:
    header = codegen.REGISTRATION_HEADER
    expand = "#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)"
    assert expand in header
    assert "#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE)" in header
    assert "STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)" in header


def _env(torch: str, cuda: str | None) -> EnvInfo:
    p = Path("/env/bin/python")
    return EnvInfo(p, "3.11", "x86_64", Path("/env/site"), torch, cuda, None, True)


def test_a_stable_build_needs_a_torch_at_least_as_new_as_its_abi() -> None:
    for torch in ("2.10.0", "2.14.1+cu130"):  # any newer torch, even of another flavour
        _check_env_matches(_env(torch, "13.0"), STABLE_CPU)
    _check_env_matches(_env("2.14.1", "13.0"), STABLE_CU130)
    with pytest.raises(ToolchainError, match="has the older torch 2.9.1") as info:
        _check_env_matches(_env("2.9.1", None), STABLE_CPU)
    assert "build with torch 2.10 or newer" in (info.value.hint or "")
    with pytest.raises(ToolchainError, match="needs torch built for CUDA 13.0"):
        _check_env_matches(_env("2.14.1", "12.8"), STABLE_CU130)


def _fake_torch(version: str, cuda: str | None) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.__version__ = version  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda=cuda)  # type: ignore[attr-defined]
    torch._C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True)  # type: ignore[attr-defined]
    return torch


def _guard(variant: Variant, version: str, cuda: str | None) -> None:
    """Run the generated _ops.py's guard (up to the extension import) under a fake torch."""
    stamp = BuildStamp("stable-axpy", f"1.0.0+{variant.local_version}", variant)
    source = codegen.ops_py("_stable_axpy_0123456789", stamp).split("\nfrom . import ", 1)[0]
    saved = sys.modules.get("torch")
    sys.modules["torch"] = _fake_torch(version, cuda)
    try:
        exec(compile(source, "_ops.py", "exec"), {})
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved


@pytest.mark.parametrize(
    ("variant", "torch", "cuda"),
    [
        (STABLE_CPU, "2.10.0+cpu", None),
        (STABLE_CPU, "2.13.0+cpu", None),
        (STABLE_CPU, "2.14.1+cu130", "13.0"),  # CPU ops run under every flavour
        (STABLE_CPU, "3.1.0", None),
        (STABLE_CU130, "2.11.0+cu130", "13.0"),
        (STABLE_CU130, "2.14.1", "13.2"),  # same CUDA major
    ],
)
def test_the_guard_accepts_any_newer_torch_of_the_right_flavour(
    variant: Variant, torch: str, cuda: str | None
) -> None:
    _guard(variant, torch, cuda)


@pytest.mark.parametrize(
    ("variant", "torch", "cuda", "mismatch", "advice"),
    [
        (
            STABLE_CPU,
            "2.9.1+cpu",
            None,
            "torch version (built for torch >= 2.10)",
            "Upgrade torch to 2.10 or newer, or install the build for this torch",
        ),
        (
            STABLE_CU130,
            "2.13.0+cpu",
            None,
            "backend (a cu130 build; this torch has no CUDA)",
            "Install the build for this torch",
        ),
        (
            STABLE_CU130,
            "2.12.1+cu128",
            "12.8",
            "CUDA major version (built with CUDA 13.0)",
            "Install the build for this torch",
        ),
    ],
)
def test_the_guard_refuses_older_torch_and_wrong_flavour(
    variant: Variant, torch: str, cuda: str | None, mismatch: str, advice: str
) -> None:
    with pytest.raises(ImportError) as info:
        _guard(variant, torch, cuda)
    message = str(info.value)
    flavour = "CPU" if variant is STABLE_CPU else "CUDA 13.0"
    built = f"stable-axpy 1.0.0+{variant.local_version} was built for torch >= 2.10, {flavour}"
    assert built in message
    assert f"this Python runs torch {torch}" in message
    assert f"mismatch in: {mismatch}. {advice}" in message


# --- for real -----------------------------------------------------------------------------------

CHECK = r"""
import torch, stable_axpy
assert torch.__version__.startswith("2.13.0"), torch.__version__
gen = torch.Generator().manual_seed(20)
for shape in [(1,), (7, 13), (3, 5, 17), (0, 4), (100_003,)]:
    x = torch.randn(shape, generator=gen)
    y = torch.randn(shape, generator=gen)
    alpha = float(torch.randn((), generator=gen))
    got = stable_axpy.axpy(x, y, alpha)
    torch.testing.assert_close(got, alpha * x + y, rtol=1e-6, atol=1e-6)
    assert got.shape == x.shape and got.dtype == torch.float32
try:
    stable_axpy.axpy(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
except RuntimeError as exc:
    assert "x and y must be float32" in str(exc), exc
else:
    raise AssertionError("float64 inputs were accepted")
print("OK", stable_axpy.add_op_namespace_prefix("axpy"), torch.__version__)
"""


@pytest.fixture(scope="module")
def stable_cpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The fixture's CPU stable-ABI variant built against torch 2.14.1: (wheelhouse, cache)."""
    root = tmp_path_factory.mktemp("stable-cpu")
    wheelhouse, cache = root / "wheelhouse", root / "cache"
    builder = build_env(CUDA_VARIANT)  # torch 2.14.1 (a CUDA build; the CPU variant needs none)
    code = main(
        [
            "build",
            str(FIXTURE),
            "--variant",
            STABLE_CPU.name,
            "--python",
            str(builder.python),
            "--output-dir",
            str(wheelhouse),
            "--cache-dir",
            str(cache),
        ]
    )
    assert code == 0
    return wheelhouse, cache


@pytest.mark.integration
def test_built_against_torch_214_it_runs_under_torch_213_cpu(
    stable_cpu: tuple[Path, Path], venv_for: Callable[..., LayeredVenv]
) -> None:
    wheelhouse, cache = stable_cpu
    (wheel,) = wheelhouse.glob("*.whl")
    local = "1.0.0+torch2.10.stable.cpu"  # general.version = 1
    assert wheel.name == f"stable_axpy-{local}-cp310-abi3-manylinux_2_28_x86_64.whl"
    # Compiled for the ABI of torch 2.10, whatever torch built it.
    stage = cache / "work" / "stable_axpy" / STABLE_CPU.name
    spec = json.loads((stage / "compile.json").read_text())
    assert ["TORCH_TARGET_VERSION", "0x020a000000000000"] in spec["define_macros"]
    report = check_wheel(wheel)
    assert report.ok and report.status(Rule.TORCH_ABI) is True
    meta = read_wheel(wheel).metadata
    assert meta.get_all("Requires-Dist") == ["torch>=2.10"]

    # Plain pip, by name from a find-links folder holding only the stable-ABI wheel, installs it
    # for the torch that is there and leaves torch alone (issue 20 item 5). (uv does not see
    # this test venv's torch, which is layered in through a .pth file: the next test.)
    venv = venv_for(CPU_VARIANT)  # torch 2.13.0+cpu
    pip = venv.pip("--no-index", "--find-links", str(wheelhouse), "stable_axpy")
    (done,) = [line for line in pip.stdout.splitlines() if line.startswith("Successfully")]
    assert done.split()[2:] == ["stable_axpy-1.0.0+torch2.10.stable.cpu"], pip.stdout
    assert "torch>=2.10 in" in pip.stdout and "(2.13.0+cpu)" in pip.stdout  # already satisfied
    out = venv.run("-c", CHECK).stdout
    assert out.startswith("OK _stable_axpy_") and out.rstrip().endswith("2.13.0+cpu"), out


def _header_versions(torch_dir: Path) -> dict[str, TorchVersion | None]:
    """Each shim function and its version guard, read from that torch's own headers with the
    table's regeneration script."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    try:
        import regen_torch_shim_versions as regen
    finally:
        sys.path.pop(0)
    found: dict[str, TorchVersion | None] = {}
    for sub in regen.HEADER_DIRS:
        for header in sorted((torch_dir / "include" / sub).rglob("*.h")):
            for name, since in regen.declarations(header.read_text(errors="replace")):
                found.setdefault(name, TorchVersion(*since) if since else None)
    return found


@pytest.mark.integration
def test_its_measured_floor_is_the_shim_table_of_the_torch_that_built_it(
    stable_cpu: tuple[Path, Path],
) -> None:
    wheelhouse, _ = stable_cpu
    (wheel,) = wheelhouse.glob("*.whl")
    report = check_wheel(wheel)
    measured = report.measured_torch
    assert "torch_library_impl" in measured.imports and not measured.unknown
    # Against torch 2.14.1's own headers (the torch it was built with), not the package data.
    headers = _header_versions(build_env(CUDA_VARIANT).purelib / "torch")
    guarded = [headers[name] for name in measured.imports if headers[name] is not None]
    assert measured.floor == max(guarded)
    # Compiled for the ABI of 2.10, the headers offer nothing newer: declared == measured.
    assert measured.floor == TorchVersion(2, 10)
    assert report.declared_floor == TorchVersion(2, 10) and not report.torch_floor_warning


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


@pytest.mark.integration
def test_uv_installs_it_next_to_a_real_torch_213_cpu_and_it_runs(
    stable_cpu: tuple[Path, Path], tmp_path: Path
) -> None:
    # A venv holding the real torch 2.13.0+cpu as installed distributions: those pip installed
    # into the CPU build environment, hard-linked into its site-packages (what pip would unpack
    # from the same wheels, in a second instead of a minute), then plain uv, offline, by name.
    wheelhouse, _ = stable_cpu
    root = tmp_path / "venv"
    create_venv(root)
    python = root / "bin" / "python"
    site = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    shutil.copytree(build_env(CPU_VARIANT).purelib, site, copy_function=_link, dirs_exist_ok=True)
    version = [str(python), "-c", "import torch; print(torch.__version__)"]
    before = subprocess.run(version, check=True, capture_output=True, text=True).stdout.strip()
    assert before == "2.13.0+cpu"
    uv = [str(UV), "pip", "install", "--python", str(python), "--no-index"]
    uv += ["--find-links", str(wheelhouse), "stable_axpy"]
    proc = subprocess.run(uv, capture_output=True, text=True, env=isolated_env(), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "+ stable-axpy==1.0.0+torch2.10.stable.cpu" in proc.stderr, proc.stderr
    assert "- torch" not in proc.stderr, proc.stderr  # torch neither replaced nor removed
    after = subprocess.run(version, check=True, capture_output=True, text=True).stdout.strip()
    assert after == before
    out = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("OK _stable_axpy_") and out.stdout.rstrip().endswith("2.13.0+cpu")


# One call into libc10's C++ API, declared by hand (its header refuses TORCH_TARGET_VERSION).
PLANTED = r"""
#include <cstdint>
namespace c10 { namespace detail {
[[noreturn]] void torchCheckFail(const char* func, const char* file, uint32_t line,
                                 const char* msg);
} }
void kw_planted_check(bool ok) {
  if (!ok) c10::detail::torchCheckFail("kw", __FILE__, __LINE__, "planted");
}
"""


@pytest.mark.integration
def test_a_build_that_uses_the_unstable_api_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "planted"
    shutil.copytree(FIXTURE, project)
    (project / "csrc" / "unstable.cpp").write_text(PLANTED)
    toml = project / "build.toml"
    sources = '"csrc/axpy_cpu.cpp", "csrc/unstable.cpp"]'
    toml.write_text(toml.read_text().replace('"csrc/axpy_cpu.cpp"]', sources))
    wheelhouse = tmp_path / "wheelhouse"
    args = ["build", str(project), "--variant", STABLE_CPU.name]
    args += ["--python", str(build_env(CUDA_VARIANT).python), "--output-dir", str(wheelhouse)]
    assert main([*args, "--cache-dir", str(tmp_path / "cache")]) != 0
    err = capsys.readouterr().err
    assert "torch-abi violations no repair can fix" in err
    assert "_ZN3c106detail14torchCheckFailEPKcS2_jS2_" in err
    assert "is libtorch's C++ API (c10::)" in err
    assert not list(wheelhouse.glob("*.whl"))
