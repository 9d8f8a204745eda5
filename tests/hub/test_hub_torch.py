"""End to end with real torch (integration): a Hub repo whose extension registers a real
``TORCH_LIBRARY`` op, served by the loopback Hub, converted by the CLI, pip-installed into a
fresh venv layered on kernelwheel's torch 2.14.1+cu130 build environment; importing the package
registers the op and it computes; the cxx98 variant is refused by the import guard."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, variant_files
from support.hubserver import GitBackedRepo, HubState, serve_as_hub
from support.torchop import CHECK, NS, VARIANT
from support.venvs import QuickVenv

from kernelwheel.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hub_repo(extension: bytes, tmp_path_factory: pytest.TempPathFactory) -> HubRepo:
    """v1.1.2: nested layout (cxx11 and a mislabelled cxx98 copy); branch v1: flat layout."""
    repo = HubRepo(tmp_path_factory.mktemp("torchrepo") / "img2gray")
    so_cache = tmp_path_factory.mktemp("unused")
    repo.set_variants(
        variant_files(name, so_cache=so_cache, binary=(NS, extension))
        for name in (VARIANT, "torch214-cxx98-cu130-x86_64-linux")
    )
    repo.commit("nested")
    repo.tag("v1.1.2")
    repo.set_variants(
        [variant_files(VARIANT, layout="flat", so_cache=so_cache, binary=(NS, extension))]
    )
    repo.commit("flat")
    repo.branch("v1")
    return repo


@pytest.fixture
def hub(hub_repo: HubRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    state = HubState(repos={"drbh/img2gray": GitBackedRepo(hub_repo.root)})
    with serve_as_hub(state, monkeypatch, tmp_path / "hf"):
        yield state


@pytest.mark.parametrize(("version", "wheel_version"), [("1.1.2", "1.1.2"), ("1", "1")])
def test_converted_wheel_registers_and_runs_its_op(
    hub: HubState, torch_site: Path, tmp_path: Path, version: str, wheel_version: str
) -> None:
    out = tmp_path / "wheelhouse"
    # Built on this host (glibc 2.36), so the ABI check rightly reports manylinux_2_28
    # violations; writing anyway is what --allow-abi-violations is for.
    args = ["to-wheel", "drbh/img2gray", version, "-o", str(out), "--variant", VARIANT]
    assert main(args) == 8
    assert main([*args, "--allow-abi-violations"]) == 0
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install(f"img2gray=={wheel_version}+torch2.14.cu130.cxx11", find_links=out)
    assert f"OK {NS}::img2gray" in venv.run("-c", CHECK).stdout


def test_wrong_abi_variant_is_refused_by_the_guard_under_real_torch(
    hub: HubState, torch_site: Path, tmp_path: Path
) -> None:
    out = tmp_path / "wheelhouse"
    code = main(["to-wheel", "drbh/img2gray", "1.1.2", "-o", str(out), "--allow-abi-violations"])
    assert code == 0
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install("img2gray==1.1.2+torch2.14.cu130.cxx98", find_links=out)
    proc = venv.run("-c", "import img2gray", check=False)
    assert proc.returncode != 0 and "mismatch in: C++ ABI" in proc.stderr
    assert "pip install 'img2gray==1.1.2+torch2.14.cu130.cxx11'" in proc.stderr
