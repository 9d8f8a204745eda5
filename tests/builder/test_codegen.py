"""Codegen: build ids, namespaces, the registration header and the generated _ops.py guard."""

from __future__ import annotations

import inspect
import shutil
import sys
import types
from pathlib import Path

import pytest
from support.variants import TORCH213_CPU, TORCH214_CU128, TORCH214_CU130

from kernelwheel.builder import codegen
from kernelwheel.compat.guard import BuildStamp
from kernelwheel.model.project import load_project
from kernelwheel.model.variant import Variant

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
CU130 = Variant.parse(TORCH214_CU130)
CPU = Variant.parse(TORCH213_CPU)


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "img2gray"
    shutil.copytree(IMG2GRAY, dst, ignore=shutil.ignore_patterns("__pycache__", "tests"))
    return dst


def test_build_id_is_deterministic_and_content_sensitive(project_copy: Path) -> None:
    project = load_project(project_copy)
    first = codegen.build_id(project, CU130)
    assert first == codegen.build_id(load_project(project_copy), CU130)
    assert len(first) == codegen.BUILD_ID_LENGTH and int(first, 16) >= 0
    assert codegen.build_id(project, CPU) != first  # the variant is part of the id
    with_cpu = codegen.build_id(project, CU130, settings=("with-cpu-kernels",))
    assert with_cpu != first  # so are the settings that change what is compiled
    cu = project_copy / "csrc" / "img2gray.cu"
    cu.write_text(cu.read_text() + "\n// changed\n")
    assert codegen.build_id(load_project(project_copy), CU130) != first


def test_namespace_and_header() -> None:
    assert codegen.ops_namespace("img2gray", "0123abcd45") == "_img2gray_0123abcd45"
    header = codegen.REGISTRATION_HEADER
    macros = (
        "TORCH_LIBRARY_EXPAND",
        "TORCH_LIBRARY_IMPL_EXPAND",
        "STABLE_TORCH_LIBRARY_EXPAND",
        "STABLE_TORCH_LIBRARY_IMPL_EXPAND",
        "REGISTER_EXTENSION",
    )
    for macro in macros:
        assert f"#define {macro}(" in header
    assert "PyModule_Create" in header  # limited-API module creation
    # Nothing from torch: a stable-ABI source must not get torch/library.h, nor a per-torch
    # one torch/csrc/stable; each includes what its macros need.
    includes = [line for line in header.splitlines() if line.startswith("#include")]
    assert includes == ["#include <Python.h>"]


def _load_guard(source: str, fake_torch: types.ModuleType) -> None:
    """Execute the generated _ops.py up to its extension import, against a fake torch."""
    guard_only = source.split("\nfrom . import ", 1)[0]
    saved = sys.modules.get("torch")
    sys.modules["torch"] = fake_torch
    try:
        exec(compile(guard_only, "_ops.py", "exec"), {})
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved


def _fake_torch(version: str, cuda: str | None, cxx11: bool = True) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.__version__ = version  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda=cuda)  # type: ignore[attr-defined]
    torch._C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=cxx11)  # type: ignore[attr-defined]
    return torch


def _ops(variant: Variant) -> str:
    stamp = BuildStamp("img2gray", f"0.1.0+{variant.local_version}", variant)
    return codegen.ops_py("_img2gray_0123abcd45", stamp)


def test_guard_accepts_matching_torch() -> None:
    _load_guard(_ops(CU130), _fake_torch("2.14.1+cu130", "13.0"))
    _load_guard(_ops(CPU), _fake_torch("2.13.0+cpu", None))
    _load_guard(_ops(CPU), _fake_torch("2.13.0", "13.0"))  # CPU kernels run on any build


CU128 = Variant.parse(TORCH214_CU128)


@pytest.mark.parametrize(
    ("build", "running", "what", "suggest"),
    [
        (CU130, ("2.13.0+cpu", None, True), "torch version (built for torch 2.14), backend", CPU),
        # Flavour mismatches: a CUDA build under a CPU torch, a CUDA 12 build under CUDA 13.
        (
            CU130,
            ("2.14.1+cpu", None, True),
            "backend (a cu130 build; this torch has no CUDA)",
            Variant.parse("torch214-cxx11-cpu-x86_64-linux"),
        ),
        (CU128, ("2.14.1+cu130", "13.0", True), "CUDA major version (built with CUDA 12.8)", CU130),
        (
            CU130,
            ("2.14.1", "12.8", True),
            "CUDA major version (built with CUDA 13.0)",
            CU128,
        ),
        (
            CU130,
            ("2.14.1+cu130", "13.0", False),
            "C++ ABI (built cxx11)",
            Variant.parse("torch214-cxx98-cu130-x86_64-linux"),
        ),
    ],
)
def test_guard_names_built_running_the_right_build_and_the_install_command(
    build: Variant, running: tuple[str, str | None, bool], what: str, suggest: Variant
) -> None:
    with pytest.raises(ImportError) as info:
        _load_guard(_ops(build), _fake_torch(*running))
    msg = str(info.value)
    assert f"was built for torch 2.14, CUDA {build.backend.cuda_version}, cxx11 ABI" in msg  # type: ignore[union-attr]
    assert f"this Python runs torch {running[0]}" in msg
    assert f"mismatch in: {what}" in msg
    # The generated suggestion must equal the one formatter's output for that variant.
    assert f"img2gray==0.1.0+{suggest.local_version}" in msg
    assert "kernelwheel install 'img2gray==0.1.0' --find-links" in msg


def test_a_dev_builds_guard_says_to_build_again_not_to_install(tmp_path: Path) -> None:
    # a venv linked to the dev build by its .pth, its torch then changed: the refusal said
    # "kernelwheel install 'kx==0.3.0' --find-links <your wheelhouse>", of a wheel never built
    stamp = BuildStamp("kx", "0.3.0+torch2.13.cpu.cxx11", CPU, dev_of=str(tmp_path / "kx"))
    with pytest.raises(ImportError) as info:
        _load_guard(codegen.ops_py("_kx_dev0123", stamp), _fake_torch("2.14.1+cu130", "13.0"))
    assert str(info.value) == (
        f"the dev build of kx ({tmp_path}/kx) was built for torch 2.13, CPU, cxx11 ABI, but this "
        "Python runs torch 2.14.1+cu130 (CUDA 13.0, cxx11 ABI); mismatch in: torch version "
        f"(built for torch 2.13). Build it for this torch: kernelwheel dev {tmp_path}/kx with "
        "this Python's environment active (or --python), or delete the kernelwheel-dev-*.pth "
        "in its site-packages that links this build"
    )
    _load_guard(codegen.ops_py("_kx_dev0123", stamp), _fake_torch("2.13.0+cpu", None))
    # a release's _ops.py is what it was: the same bytes as a stamp without dev_of
    release = BuildStamp("kx", "0.3.0+torch2.13.cpu.cxx11", CPU)
    assert "dev build" not in codegen.ops_py("_kx_0123", release)


def test_guard_suggests_in_the_spelling_of_its_own_label() -> None:
    """A wheel stamped in the compact style (+torch214cu130cxx11) names the compact build."""
    stamp = BuildStamp("img2gray", "0.1.0+torch214cu130cxx11", CU130)
    source = codegen.ops_py("_img2gray_0123abcd45", stamp)
    with pytest.raises(ImportError, match=r"img2gray==0\.1\.0\+torch214cpucxx11"):
        _load_guard(source, _fake_torch("2.14.1+cpu", None))


def test_guard_runs_the_rules_module_verbatim() -> None:
    """One implementation: the guard embeds kernelwheel.compat.rules' own source."""
    from kernelwheel.compat import rules as compat

    source = _ops(CU130)
    assert inspect.getsource(compat) in source
    assert "def problems(" not in source.replace(inspect.getsource(compat), "")


def test_stable_abi_guard_accepts_newer_torch() -> None:
    stable = Variant.parse("torch-stable-abi210-cu130-x86_64-linux")
    _load_guard(_ops(stable), _fake_torch("2.14.1", "13.0"))
    with pytest.raises(ImportError, match="torch >= 2.10"):
        _load_guard(_ops(stable), _fake_torch("2.9.1", "13.0"))
