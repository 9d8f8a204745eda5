"""Converted wheels installed with pip into fresh venvs (a fake torch 2.14.1+cu130 stands in for
torch: pip sees it installed, the import guard reads its version facts): the right variant imports
and loads its extension; a wrong one is refused by pip or by the guard, with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gitrepo import HubRepo, make_repo, namespace_for, variant_files
from support.venvs import QuickVenv, fake_torch

from kernelwheel.hub.towheel import ToWheelRequest, to_wheels

# Real pip and uv installs into fresh venvs: seconds each (pytest -m 'not slow' skips them).
pytestmark = pytest.mark.slow

VARIANTS = (
    "torch214-cxx11-cu130-x86_64-linux",  # matches the fake torch
    "torch214-cxx98-cu130-x86_64-linux",  # wrong C++ ABI: the guard
    "torch214-cxx11-cu126-x86_64-linux",  # wrong CUDA major: the guard
    "torch27-cxx11-cu128-x86_64-linux",  # wrong torch: pip
    "torch-cuda",
)
RIGHT = "img2gray==1.1.2+torch2.14.cu130.cxx11"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> Path:
    cache = so_cache
    root = tmp_path_factory.mktemp("install")
    nested = make_repo(root / "img2gray", VARIANTS, so_cache=cache)
    out = root / "wheelhouse"
    result = to_wheels(ToWheelRequest(str(nested.root), "1.1.2", output_dir=out))
    assert result.rejected == ()
    flat = HubRepo(root / "flat" / "img2gray")
    flat.set_variants(
        [variant_files(VARIANTS[0], layout="flat", so_cache=cache, metadata={"name": "img2gray"})]
    )
    flat.commit("flat")
    result = to_wheels(
        ToWheelRequest(str(flat.root), "1.2.0", revision="main", output_dir=root / "flat-wheels")
    )
    assert result.rejected == ()
    return out


@pytest.fixture(scope="module")
def torch_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_torch(tmp_path_factory.mktemp("torch"), "2.14.1+cu130", "13.0", cxx11=True)


CHECK = """
import sys, img2gray
ns = {ns!r}
print("loaded", sys.modules["img2gray." + ns].LOADED)
print("ops", img2gray.ops.name)
print("prefix", img2gray.add_op_namespace_prefix("img2gray"))
"""


def test_right_variant_installs_imports_and_loads_its_extension(
    wheelhouse: Path, torch_site: Path, tmp_path: Path
) -> None:
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install(RIGHT, find_links=wheelhouse)
    assert venv.installed_version("img2gray") == "1.1.2+torch2.14.cu130.cxx11"
    ns = namespace_for("img2gray", VARIANTS[0])
    out = venv.run("-c", CHECK.format(ns=ns)).stdout
    assert f"loaded {ns}" in out and f"ops {ns}" in out and f"prefix {ns}::img2gray" in out


def test_flat_layout_installs_as_the_package(
    wheelhouse: Path, torch_site: Path, tmp_path: Path
) -> None:
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install(
        "img2gray==1.2.0+torch2.14.cu130.cxx11", find_links=wheelhouse.parent / "flat-wheels"
    )
    ns = namespace_for("img2gray", VARIANTS[0])
    assert f"loaded {ns}" in venv.run("-c", CHECK.format(ns=ns)).stdout
    pkg = venv.purelib / "img2gray"
    assert not (pkg / "img2gray").exists() and not (pkg / "metadata.json").exists()


def test_pip_refuses_a_wheel_for_another_torch(
    wheelhouse: Path, torch_site: Path, tmp_path: Path
) -> None:
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    proc = venv.pip_install(
        "img2gray==1.1.2+torch2.7.cu128.cxx11", find_links=wheelhouse, check=False
    )
    assert proc.returncode != 0
    assert "torch==2.7.*" in proc.stdout + proc.stderr
    assert venv.run("-c", "import img2gray", check=False).returncode != 0  # nothing installed


@pytest.mark.parametrize(
    ("local", "mismatch"),
    [("torch2.14.cu130.cxx98", "C++ ABI"), ("torch2.14.cu126.cxx11", "CUDA major version")],
)
def test_guard_refuses_a_wheel_for_another_abi_or_cuda(
    wheelhouse: Path, torch_site: Path, tmp_path: Path, local: str, mismatch: str
) -> None:
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install(f"img2gray==1.1.2+{local}", find_links=wheelhouse)  # torch==2.14.* is met
    proc = venv.run("-c", "import img2gray", check=False)
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and f"mismatch in: {mismatch}" in proc.stderr
    assert f"img2gray 1.1.2+{local}" in proc.stderr
    assert f"pip install '{RIGHT}'" in proc.stderr  # names the wheel to install instead


def test_noarch_wheel_installs_anywhere(wheelhouse: Path, torch_site: Path, tmp_path: Path) -> None:
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install("img2gray==1.1.2+cuda", find_links=wheelhouse)
    out = venv.run("-c", "import img2gray; print(img2gray.img2gray_reference([(255, 255, 255)]))")
    assert out.stdout.strip() == "[255]"
