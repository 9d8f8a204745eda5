"""to-wheel on Hub repos holding stable-ABI, tvm-ffi and noarch variants (kernel-builder's
names): wheel tag, local version, requirements and guard of each."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gitrepo import make_repo
from support.wheelread import read_wheel

from kernelwheel.hub.guard import GUARD_MODULE
from kernelwheel.hub.towheel import ToWheelRequest, ToWheelResult, to_wheels

KINDS = {
    "torch-stable-abi210-cu130-x86_64-linux": (
        "img2gray-1.1.2+torch2.10.stable.cu130-cp39-abi3-manylinux_2_28_x86_64.whl",
        ["torch>=2.10", "apache-tvm-ffi"],
    ),
    "torch-stable-abi212-cpu-aarch64-linux": (
        "img2gray-1.1.2+torch2.12.stable.cpu-cp39-abi3-manylinux_2_28_aarch64.whl",
        ["torch>=2.12", "apache-tvm-ffi"],
    ),
    "tvm-ffi01-cu130-x86_64-linux": (
        "img2gray-1.1.2+tvmffi0.1.cu130-py3-none-manylinux_2_28_x86_64.whl",
        ["apache-tvm-ffi<0.2,>=0.1", "nvidia-cuda-runtime<14,>=13.0"],
    ),
    "tvm-ffi01-cpu-x86_64-linux": (
        "img2gray-1.1.2+tvmffi0.1.cpu-py3-none-manylinux_2_28_x86_64.whl",
        ["apache-tvm-ffi<0.2,>=0.1"],
    ),
    "torch-cuda": ("img2gray-1.1.2+cuda-py3-none-any.whl", ["torch", "apache-tvm-ffi"]),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> ToWheelResult:
    root = tmp_path_factory.mktemp("kinds")
    # Every variant's python-depends; a tvm-ffi wheel's series requirement absorbs the bare name.
    meta = {"version": 1, "python-depends": ["tvm-ffi"]}
    repo = make_repo(root / "img2gray", KINDS, so_cache=so_cache, metadata=meta)
    return to_wheels(ToWheelRequest(str(repo.root), "1.1.2", output_dir=root / "wh"))


def test_each_kind_converts(converted: ToWheelResult) -> None:
    assert converted.rejected == ()
    assert sorted(c.variant for c in converted.converted) == sorted(KINDS)


@pytest.mark.parametrize("variant", sorted(KINDS))
def test_tag_local_version_and_requirements(converted: ToWheelResult, variant: str) -> None:
    name, requires = KINDS[variant]
    done = next(c for c in converted.converted if c.variant == variant)
    assert done.wheel.name == name
    md = read_wheel(done.wheel).metadata
    assert md.get_all("Requires-Dist") == requires


def test_guards(converted: ToWheelResult) -> None:
    by = {c.variant: read_wheel(c.wheel).files for c in converted.converted}
    stable = by["torch-stable-abi210-cu130-x86_64-linux"][f"img2gray/{GUARD_MODULE}.py"].decode()
    assert "'stable_abi': True" in stable and "'torch': (2, 10)" in stable
    for tvm in ("tvm-ffi01-cu130-x86_64-linux", "tvm-ffi01-cpu-x86_64-linux"):
        files = by[tvm]
        assert f"img2gray/{GUARD_MODULE}.py" not in files  # no torch to guard against
        assert "_kernelwheel_guard" not in files["img2gray/__init__.py"].decode()
    assert f"img2gray/{GUARD_MODULE}.py" not in by["torch-cuda"]
