"""Codegen: build ids, namespaces, the registration header and the generated _ops.py guard."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from kernelwheel.builder import codegen
from kernelwheel.model.project import load_project
from kernelwheel.model.variant import Variant

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
CU130 = Variant.parse("torch214-cxx11-cu130-x86_64-linux")
CPU = Variant.parse("torch213-cxx11-cpu-x86_64-linux")


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
    cu = project_copy / "csrc" / "img2gray.cu"
    cu.write_text(cu.read_text() + "\n// changed\n")
    assert codegen.build_id(load_project(project_copy), CU130) != first


def test_namespace_and_header() -> None:
    assert codegen.ops_namespace("img2gray", "0123abcd45") == "_img2gray_0123abcd45"
    header = codegen.REGISTRATION_HEADER
    for macro in ("TORCH_LIBRARY_EXPAND", "TORCH_LIBRARY_IMPL_EXPAND", "REGISTER_EXTENSION"):
        assert f"#define {macro}(" in header
    assert "PyModule_Create" in header  # limited-API module creation


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


def _ops(variant: Variant, cuda_major: int | None) -> str:
    stamp = codegen.BuildStamp("img2gray", f"0.1.0+{variant.local_version}", variant, cuda_major)
    return codegen.ops_py("_img2gray_0123abcd45", stamp)


def test_guard_accepts_matching_torch() -> None:
    _load_guard(_ops(CU130, 13), _fake_torch("2.14.1+cu130", "13.0"))
    _load_guard(_ops(CPU, None), _fake_torch("2.13.0+cpu", None))
    _load_guard(_ops(CPU, None), _fake_torch("2.13.0", "13.0"))  # CPU kernels run on any build


@pytest.mark.parametrize(
    ("running", "what", "suggest"),
    [
        (("2.13.0+cpu", None, True), "torch version, CUDA", CPU),
        (
            ("2.14.1+cpu", None, True),
            "CUDA (this torch is a CPU-only build)",
            Variant.parse("torch214-cxx11-cpu-x86_64-linux"),
        ),
        (
            ("2.14.1", "12.8", True),
            "CUDA major version",
            Variant.parse("torch214-cxx11-cu128-x86_64-linux"),
        ),
        (
            ("2.14.1+cu130", "13.0", False),
            "C++ ABI",
            Variant.parse("torch214-cxx98-cu130-x86_64-linux"),
        ),
    ],
)
def test_guard_names_built_running_and_the_wheel_to_install(
    running: tuple[str, str | None, bool], what: str, suggest: Variant
) -> None:
    with pytest.raises(ImportError) as info:
        _load_guard(_ops(CU130, 13), _fake_torch(*running))
    msg = str(info.value)
    assert "was built for torch 2.14, CUDA 13, cxx11 ABI" in msg
    assert f"this Python runs torch {running[0]}" in msg
    assert what in msg
    # The generated suggestion must equal the one formatter's output for that variant.
    assert f"img2gray==0.1.0+{suggest.local_version}" in msg


def test_stable_abi_guard_accepts_newer_torch() -> None:
    stable = Variant.parse("torch-stable-abi210-cu130-x86_64-linux")
    _load_guard(_ops(stable, 13), _fake_torch("2.14.1", "13.0"))
    with pytest.raises(ImportError, match="torch >= 2.10"):
        _load_guard(_ops(stable, 13), _fake_torch("2.9.1", "13.0"))
