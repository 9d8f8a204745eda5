"""lock and download against the loopback Hub (the real huggingface_hub client, repos served from
git): [tool.kernels.dependencies] resolved on the Hub, the same hashes as from a clone, byte-stable
relocks, downloads at the locked commit after the branch moved, a tampered download refused
with both hashes named, unknown repos named by their declaration, and offline downloads from
the cache."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.gitrepo import git
from support.hubserver import GitBackedRepo, HubState, serve_as_hub
from support.shared import LockWorld, leftovers, move_relu, wheels_in
from support.variants import TORCH214_CU130 as RIGHT

from kernelwheel.errors import HubError
from kernelwheel.locking.download import DownloadRequest, download
from kernelwheel.locking.lockfile import LOCK_NAME, LockFile
from kernelwheel.locking.resolve import LockRequest, lock_project
from kernelwheel.log import SilentReporter

TAGS = ("v1.1.2", "v1.2.0", "v1.10.0", "v2.0.0")
HUB_DEPS = """[tool.kernels.dependencies]
"drbh/img2gray" = ">=1.1,<2"
"acme/relu" = 1
"""
CLONE_DEPS = """[tool.kernelwheel.dependencies]
"drbh/img2gray" = { version = ">=1.1,<2", path = "../img2gray" }
"acme/relu" = { version = 1, path = "../relu" }
"""


@pytest.fixture
def world(tmp_path: Path, so_cache: Path) -> LockWorld:
    # v1.10.0 > v1.2.0, as versions; an annotated tag
    return LockWorld(tmp_path, so_cache, TAGS, annotated=("v1.10.0",))


@pytest.fixture
def hub(world: LockWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    state = HubState(
        repos={
            "drbh/img2gray": GitBackedRepo(world.legacy.root),
            "acme/relu": GitBackedRepo(world.relu.root),
        }
    )
    with serve_as_hub(state, monkeypatch, tmp_path / "hf-cache"):
        yield state


def test_hub_lock_matches_the_clone_lock_and_relocks_identically(
    hub: HubState, world: LockWorld
) -> None:
    project = world.project("app", HUB_DEPS)
    result = lock_project(LockRequest(project))
    assert result.written
    lock = LockFile.load(project / LOCK_NAME)
    img, relu = lock.kernel("drbh/img2gray"), lock.kernel("acme/relu")
    assert img is not None and relu is not None
    assert (img.ref, img.version) == ("v1.10.0", "1.10.0")  # highest tag in range, annotated
    assert img.commit == git(world.legacy.root, "rev-parse", "v1.10.0^{commit}")
    assert (relu.ref, relu.commit, relu.path) == ("v1", world.relu_commit, None)
    # A lock made from git clones of the same repos records the same variants and hashes.
    cloned = world.project("cloned", CLONE_DEPS)
    lock_project(LockRequest(cloned))
    other = LockFile.load(cloned / LOCK_NAME)
    for kernel in lock.kernels:
        twin = other.kernel(kernel.repo)
        assert twin is not None and twin.path is not None
        assert (twin.commit, twin.variants) == (kernel.commit, kernel.variants)
    # Relocking asks the Hub for refs only and leaves the bytes alone; so does --refresh.
    text = (project / LOCK_NAME).read_bytes()
    hub.log.clear()
    again = lock_project(LockRequest(project))
    assert not again.changed and all(k.reused for k in again.kernels)
    assert not any("/resolve/" in p for p in hub.requests())
    assert lock_project(LockRequest(project, refresh=True)).changed is False
    assert (project / LOCK_NAME).read_bytes() == text


def _hub_paths(hub: HubState) -> list[str]:
    """What was asked of the repos (not huggingface_hub's own lookups)."""
    return [p for p in hub.requests() if "drbh/img2gray" in p or "acme/relu" in p]


def test_lock_and_download_ask_for_kernel_type_repos(
    hub: HubState, world: LockWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = world.project("app", HUB_DEPS)
    reporter = SilentReporter()
    lock_project(LockRequest(project), reporter)
    fresh_cache(world, monkeypatch)
    result = download(DownloadRequest(project, world.house), reporter)
    assert result.wheels
    asked = _hub_paths(hub)
    assert any(p.startswith("/api/kernels/acme/relu/") for p in asked)
    assert all(p.startswith(("/api/kernels/", "/kernels/")) for p in asked), asked
    assert any("/resolve/" in p for p in asked)
    assert reporter.messages == []
    cached = sorted(d.name for d in (world.root / "other-cache").iterdir() if "--" in d.name)
    assert cached == ["kernels--acme--relu", "kernels--drbh--img2gray"]


def test_lock_and_download_fall_back_to_a_model_type_repo_and_say_so(
    hub: HubState, world: LockWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.types["acme/relu"] = "model"  # only img2gray was migrated to a kernel repo
    project = world.project("app", HUB_DEPS)
    reporter = SilentReporter()
    lock = lock_project(LockRequest(project), reporter).lock
    relu = lock.kernel("acme/relu")
    assert relu is not None and (relu.ref, relu.commit) == ("v1", world.relu_commit)
    told = [m for scope, m in reporter.messages if "no kernel-type repo" in m]
    assert [scope for scope, m in reporter.messages if m in told] == ["relu"]
    assert "acme/relu" in told[0] and "model-type repo" in told[0]
    fresh_cache(world, monkeypatch)
    hub.log.clear()
    reporter = SilentReporter()
    result = download(DownloadRequest(project, world.house), reporter)
    expected = {v.wheel: v.wheel_sha256 for k in lock.kernels for v in k.variants}
    assert {w.filename: w.sha256 for w in result.wheels} == expected
    assert any("no kernel-type repo" in m for _, m in reporter.messages)
    relu_files = [p for p in _hub_paths(hub) if "/resolve/" in p and "acme/relu" in p]
    assert relu_files and all(p.startswith("/acme/relu/resolve/") for p in relu_files)
    img_files = [p for p in _hub_paths(hub) if "/resolve/" in p and "img2gray" in p]
    assert img_files and all(p.startswith("/kernels/drbh/img2gray/resolve/") for p in img_files)


def fresh_cache(world: LockWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another machine (a Docker build): nothing of the lock run is cached."""
    monkeypatch.setenv("HF_HUB_CACHE", str(world.root / "other-cache"))


def test_hub_download_fetches_the_locked_commit_after_the_branch_moved(
    hub: HubState, world: LockWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = world.project("app", HUB_DEPS)
    lock_project(LockRequest(project))
    lock = LockFile.load(project / LOCK_NAME)
    moved = move_relu(world.relu, world.so_cache, "1.5.0")
    hub.log.clear()
    fresh_cache(world, monkeypatch)
    result = download(DownloadRequest(project, world.house))
    expected = {v.wheel: v.wheel_sha256 for k in lock.kernels for v in k.variants}
    assert {w.filename: w.sha256 for w in result.wheels} == expected
    assert {w.filename: hashlib.sha256(w.path.read_bytes()).hexdigest() for w in result.wheels} == (
        expected
    )
    files = [p.split("/resolve/", 1)[1] for p in hub.requests("GET") if "/resolve/" in p]
    commits = {k.commit for k in lock.kernels}
    assert files and all(f.split("/", 1)[0] in commits for f in files)
    assert moved not in "".join(hub.requests())
    assert leftovers(world.house) == ["requirements.txt"]


def test_tampered_hub_download_is_refused(
    hub: HubState, world: LockWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = world.project("app", HUB_DEPS)
    lock_project(LockRequest(project))
    img = LockFile.load(project / LOCK_NAME).kernel("drbh/img2gray")
    assert img is not None
    variant = next((v for v in img.variants if v.name == RIGHT), None)
    assert variant is not None
    expected = dict(variant.files)["img2gray/_ops.py"]
    path = f"build/{RIGHT}/img2gray/_ops.py"
    show = ["git", "-C", str(world.legacy.root), "show", f"v1.10.0:{path}"]
    data = bytearray(subprocess.run(show, capture_output=True, check=True).stdout)
    assert hashlib.sha256(bytes(data)).hexdigest() == expected
    data[0] ^= 0x01  # same size, other bytes
    hub.tamper[("drbh/img2gray", path)] = bytes(data)
    fresh_cache(world, monkeypatch)
    with pytest.raises(HubError) as info:
        download(DownloadRequest(project, world.house))
    message = str(info.value)
    assert f"{path}: sha256 mismatch: expected {expected}" in message
    assert f"actual {hashlib.sha256(bytes(data)).hexdigest()}" in message
    assert wheels_in(world.house) == [] and leftovers(world.house) == []


def test_unknown_hub_repo_names_its_declaration(hub: HubState, world: LockWorld) -> None:
    project = world.project("app", '[tool.kernels.dependencies]\n"nobody/nothing" = 1\n')
    with pytest.raises(HubError) as info:
        lock_project(LockRequest(project))
    message = str(info.value)
    declared = "tool.kernels.dependencies.\"nobody/nothing\" = '1'"
    assert message.startswith(f"{project}/pyproject.toml: {declared}")
    assert "repository not found" in message and "HF_TOKEN" in message


def test_offline_download_from_the_cache(
    hub: HubState, world: LockWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = world.project("app", HUB_DEPS)
    lock_project(LockRequest(project))
    online = download(DownloadRequest(project, world.house, variants=(RIGHT,)))
    asked = len(hub.log)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    offline = download(DownloadRequest(project, world.root / "offline", variants=(RIGHT,)))
    assert [w.sha256 for w in offline.wheels] == [w.sha256 for w in online.wheels]
    assert offline.pylock is not None and online.pylock is not None
    assert offline.pylock.read_text() == online.pylock.read_text()
    assert len(hub.log) == asked  # not one request
