"""lock + download end to end with real torch (integration): a Hub repo (loopback server) whose
torch 2.14 variant registers a real ``TORCH_LIBRARY`` op, next to a torch 2.7 build; the CLI
locks and downloads it, and ``pip install --require-hashes --no-index`` from the wheelhouse into
a fresh venv layered on the torch 2.14.1+cu130 build environment picks the torch 2.14 wheel,
whose op registers and computes. The op and the environment are those of test_hub_torch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, variant_files
from support.hubserver import GitBackedRepo, HubState, serve_as_hub
from support.torchop import CHECK, NS, VARIANT
from support.variants import TORCH27_CU128 as OTHER
from support.venvs import QuickVenv

from kernelwheel.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture
def hub(
    extension: bytes,
    so_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[HubState]:
    root = tmp_path_factory.mktemp("lockrepo")
    repo = HubRepo(root / "img2gray")
    repo.set_variants(
        [
            variant_files(VARIANT, so_cache=so_cache, binary=(NS, extension)),
            variant_files(OTHER, so_cache=so_cache),
        ]
    )
    repo.commit("release")
    repo.tag("v1.2.0")
    state = HubState(repos={"drbh/img2gray": GitBackedRepo(repo.root)})
    with serve_as_hub(state, monkeypatch, root / "hf"):
        yield state


def test_locked_wheelhouse_installs_offline_and_runs_under_real_torch(
    hub: HubState, torch_site: Path, tmp_path: Path
) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.kernels.dependencies]\n"drbh/img2gray" = ">=1,<2"\n'
    )
    # Built on this host (glibc 2.36): the ABI check reports manylinux_2_28 violations for the
    # real op, which is what --allow-abi-violations (recorded in the lock) is for.
    assert main(["lock", str(project), "--allow-abi-violations"]) == 0
    house = tmp_path / "wheelhouse"
    assert main(["download", str(project), "--wheelhouse", str(house)]) == 0
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install("--require-hashes", "-r", str(house / "requirements.txt"), find_links=house)
    assert venv.installed_version("img2gray") == "1.2.0+torch2.14.cu130.cxx11"
    assert f"OK {NS}::img2gray" in venv.run("-c", CHECK).stdout
