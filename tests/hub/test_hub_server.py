"""to-wheel from the Hub: the real huggingface_hub client against a loopback server that answers
the Hub's endpoints from git repositories (refs, revision info, paginated tree, resolve)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.gitrepo import DEFECT_CASES, SEED_13, HubRepo, git, make_repo, variant_files
from support.hubserver import Fault, GitBackedRepo, HubState, serve_as_hub
from support.shared import leftovers, wheels_in

from kernelwheel.cli import main
from kernelwheel.errors import HubError
from kernelwheel.hub.hubsource import HubSettings
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels
from kernelwheel.log import SilentReporter

REPO = "drbh/img2gray"


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> HubRepo:
    """The seed's 13 variants plus the defect cases; tag v1.1.2, later a v1 branch (flat) and
    tag v2.0.0."""
    repo = make_repo(
        tmp_path_factory.mktemp("hub") / "img2gray", SEED_13 + DEFECT_CASES, so_cache=so_cache
    )
    repo.set_variants(
        variant_files(
            "torch214-cxx11-cu130-x86_64-linux",
            layout="flat",
            so_cache=so_cache,
            metadata={"name": "img2gray", "version": "1.4.0", "python-depends": []},
        )
        for _ in [0]
    )
    repo.commit("flat v1")
    repo.branch("v1")
    repo.tag("v2.0.0")
    return repo


@pytest.fixture(scope="module")
def backed(seed: HubRepo) -> GitBackedRepo:
    return GitBackedRepo(seed.root)  # caches trees and blobs across tests


@pytest.fixture
def hub(
    backed: GitBackedRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HubState]:
    state = HubState(repos={REPO: backed})
    with serve_as_hub(state, monkeypatch, tmp_path / "hf-cache"):
        yield state


def test_downloads_only_build_of_the_resolved_revision(
    hub: HubState, seed: HubRepo, tmp_path: Path
) -> None:
    result = to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path / "out"))
    assert result.rejected == ()
    assert result.resolution.commit == git(seed.root, "rev-parse", "v1.1.2^{commit}")
    assert result.where.startswith(f"Hub repo {REPO} (http://127.0.0.1:")
    assert len(wheels_in(tmp_path / "out")) == len(SEED_13 + DEFECT_CASES)
    downloads = hub.requests("GET")
    files = [p.split("/resolve/", 1)[1] for p in downloads if "/resolve/" in p]
    assert files and all(f.split("/", 1)[1].startswith("build/") for f in files)
    assert not any("README.md" in p or ".gitattributes" in p for p in downloads)
    # Files were fetched at the commit, not by the moving tag name.
    assert all(f.startswith(result.resolution.commit + "/") for f in files)


def test_every_request_goes_to_the_kernel_type_repo(
    hub: HubState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reporter = SilentReporter()
    to_wheels(ToWheelRequest(REPO, "1", output_dir=tmp_path / "out"), reporter)
    asked = [p for p in hub.requests() if REPO in p]  # not huggingface_hub's own lookups
    api = [p for p in asked if p.startswith("/api/")]
    files = [p for p in asked if "/resolve/" in p]
    assert api and all(p.startswith(f"/api/kernels/{REPO}/") for p in api), api
    assert files and all(p.startswith(f"/kernels/{REPO}/resolve/") for p in files), files
    assert reporter.messages == []  # no fallback to tell of
    # huggingface_hub's cache keeps it as a kernel repo; offline, that folder is what is read.
    cache = tmp_path / "hf-cache"
    assert [d.name for d in cache.iterdir() if "--" in d.name] == ["kernels--drbh--img2gray"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = to_wheels(ToWheelRequest(REPO, "1", output_dir=tmp_path / "offline"))
    assert wheels_in(tmp_path / "offline") == wheels_in(tmp_path / "out") != []
    assert "model-type" not in offline.where


def test_a_model_type_repo_is_read_after_the_kernel_one_is_not_found(
    hub: HubState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.types[REPO] = "model"  # a Hub (or mirror) that has the repo only as a model
    reporter = SilentReporter()
    result = to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path / "out"), reporter)
    assert len(result.converted) == len(SEED_13 + DEFECT_CASES)
    asked = [p for p in hub.requests() if REPO in p]
    # The kernel repo was asked for first, once; then everything came from the model repo.
    assert asked[0] == f"/api/kernels/{REPO}/refs"
    assert [p for p in asked if p.startswith("/api/kernels/")] == [asked[0]]
    assert all(p.startswith(f"/api/models/{REPO}/") for p in asked[1:] if p.startswith("/api/"))
    files = [p for p in asked if "/resolve/" in p]
    assert files and all(p.startswith(f"/{REPO}/resolve/") for p in files)
    (message,) = [m for scope, m in reporter.messages if scope == "img2gray"]
    assert "no kernel-type repo" in message and "model-type repo" in message
    assert result.where.endswith("model-type repo)")
    # Offline, a cache holding only models--drbh--img2gray is read the same way, and says so.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reporter = SilentReporter()
    to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path / "offline"), reporter)
    assert wheels_in(tmp_path / "offline") == wheels_in(tmp_path / "out")
    assert any("models--" in m for _, m in reporter.messages), reporter.messages


def test_a_repo_of_neither_type_names_both(hub: HubState, tmp_path: Path) -> None:
    with pytest.raises(HubError, match="neither as a kernel repo nor as a model repo") as info:
        to_wheels(ToWheelRequest("nobody/nothing", "1", output_dir=tmp_path))
    assert "fix:" in str(info.value)
    assert [p for p in hub.requests() if "nobody" in p] == [
        "/api/kernels/nobody/nothing/refs",
        "/api/models/nobody/nothing/refs",
    ]


def test_hub_and_clone_give_identical_wheels(hub: HubState, seed: HubRepo, tmp_path: Path) -> None:
    pick = ("torch27-cxx11-cu128-x86_64-linux", "torch-cuda", "torch210-*")
    from_hub = to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path / "a", variants=pick))
    from_git = to_wheels(
        ToWheelRequest(str(seed.root), "1.1.2", output_dir=tmp_path / "b", variants=pick)
    )
    assert len(from_hub.converted) == 3
    for c in from_hub.converted:
        assert c.wheel.read_bytes() == (tmp_path / "b" / c.wheel.name).read_bytes()
    assert {c.wheel.name for c in from_git.converted} == set(wheels_in(tmp_path / "a"))


def test_variant_selection_limits_the_download(hub: HubState, tmp_path: Path) -> None:
    to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path, variants=("*-aarch64-linux",)))
    files = [p.split("/build/", 1)[1] for p in hub.requests("GET") if "/resolve/" in p]
    assert files and all(f.split("/")[0].endswith("-aarch64-linux") for f in files)


def test_paginated_listing(hub: HubState, tmp_path: Path) -> None:
    hub.page_size = 7
    result = to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path))
    assert len(result.converted) == len(SEED_13 + DEFECT_CASES)
    assert sum("/tree/" in p for p in hub.requests("GET")) > 3


def test_major_branch_and_ranges(hub: HubState, tmp_path: Path) -> None:
    result = to_wheels(ToWheelRequest(REPO, "1", output_dir=tmp_path))
    assert result.resolution.ref == "v1"
    assert [c.wheel.name for c in result.converted] == [
        "img2gray-1.4.0+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    ]
    assert (
        to_wheels(
            ToWheelRequest(REPO, ">=1,<2", output_dir=tmp_path, variants=("torch-cuda",))
        ).resolution.ref
        == "v1.1.2"
    )
    assert to_wheels(ToWheelRequest(REPO, ">=1", output_dir=tmp_path)).resolution.ref == "v2.0.0"


def test_wrong_sha256_stops_with_nothing_written(
    hub: HubState, seed: HubRepo, tmp_path: Path
) -> None:
    state = GitBackedRepo(seed.root)
    commit = git(seed.root, "rev-parse", "v1.1.2^{commit}")
    victim = next(
        e
        for p, e in sorted(state.tree(commit).items())
        if p.startswith("build/torch27-cxx11-cu128-x86_64-linux/") and e.lfs_oid
    )
    good = state.content(victim)
    hub.tamper[(REPO, victim.path)] = bytes([good[0] ^ 0xFF]) + good[1:]  # same size
    out = tmp_path / "out"
    with pytest.raises(HubError) as info:
        to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=out))
    message = str(info.value)
    assert victim.path in message and victim.lfs_oid is not None and victim.lfs_oid in message
    assert "does not match what the source announced" in message
    assert wheels_in(out) == [] and leftovers(out) == []


def test_private_repo_needs_hf_token(
    hub: HubState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.private[REPO] = "hf_secret"
    with pytest.raises(HubError, match="repository not found \\(or private\\)") as info:
        to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path))
    assert "HF_TOKEN" in str(info.value)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    result = to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path, variants=("torch-cuda",)))
    assert len(result.converted) == 1


def _shown(out: Path, captured: pytest.CaptureResult[str]) -> str:
    """Everything a run wrote: its stdout, stderr and every log file under ``out``."""
    logs = "".join(p.read_text() for p in out.rglob("*.log"))
    return captured.out + captured.err + logs


@pytest.mark.parametrize("given", ["hf_secret\n", " hf_secret\r\n"])
def test_a_token_from_a_file_is_stripped_and_never_shown(
    hub: HubState,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    given: str,
) -> None:
    """Issue 38, 4: HF_TOKEN=$(cat FILE) ends in a newline, which no HTTP header may hold
    (httpx refused it, and the error quoted the whole header): the token is stripped and
    the private repo converts."""
    hub.private[REPO] = "hf_secret"
    monkeypatch.setenv("HF_TOKEN", given)
    out = tmp_path / "out"
    argv = ["to-wheel", REPO, "1.1.2", "-o", str(out), "--variant", "torch-cuda", "--verbose"]
    assert main(argv) == 0
    assert len(wheels_in(out)) == 1
    assert "hf_secret" not in _shown(out, capsys.readouterr())


@pytest.mark.parametrize(
    ("given", "kind"),
    [("hf_sécretQ9", "a non-ASCII character (character 5 of 11)"), ("hf_se cretQ9", "whitespace")],
)
def test_a_token_no_hub_token_can_be_is_refused_unsent_and_unshown(
    hub: HubState,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    given: str,
    kind: str,
) -> None:
    monkeypatch.setenv("HF_TOKEN", given)
    out = tmp_path / "out"
    hub.log.clear()
    assert main(["to-wheel", REPO, "1.1.2", "-o", str(out), "--json", "--traceback"]) == 2
    captured = capsys.readouterr()
    assert f"HF_TOKEN: the Hub token holds {kind}" in captured.err
    assert "set HF_TOKEN to the token alone" in captured.err
    shown = _shown(out, captured)
    assert "cretQ9" not in shown and "<redacted>" not in shown  # the token is never quoted
    assert hub.requests() == []  # nothing was sent


def test_offline_uses_the_cache_only(
    hub: HubState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    online = to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path / "online"))
    asked = len(hub.log)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    for version, revision in (("1.1.2", None), ("<2", None), ("1.1.2", online.resolution.commit)):
        out = tmp_path / f"offline-{len(list(tmp_path.iterdir()))}"
        result = to_wheels(ToWheelRequest(REPO, version, revision=revision, output_dir=out))
        assert result.resolution.commit == online.resolution.commit
        assert wheels_in(out) == wheels_in(tmp_path / "online")
        for name in wheels_in(out):
            assert (out / name).read_bytes() == (tmp_path / "online" / name).read_bytes()
    assert len(hub.log) == asked  # not one request
    with pytest.raises(HubError, match="has no tag v2.0.0") as info:
        to_wheels(ToWheelRequest(REPO, "2.0.0", output_dir=tmp_path / "x"))
    assert "only refs cached by earlier downloads are known" in str(info.value)


def test_offline_with_an_empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(HubError, match="not in the local cache"):
        to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path / "o"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(HubError, match="no refs of this repo are in the local cache"):
        to_wheels(ToWheelRequest(REPO, "1.1.2", output_dir=tmp_path / "o"))


def test_settings_follow_the_environment(tmp_path: Path) -> None:
    s = HubSettings.from_env({"HF_HOME": str(tmp_path), "HF_TOKEN": "t", "HF_HUB_OFFLINE": "yes"})
    assert (s.cache_dir, s.token, s.offline) == (tmp_path / "hub", "t", True)
    assert s.endpoint == "https://huggingface.co"
    s = HubSettings.from_env({"HF_HUB_CACHE": str(tmp_path / "c"), "HF_ENDPOINT": "http://x/"})
    assert (s.cache_dir, s.endpoint, s.offline, s.token) == (
        tmp_path / "c",
        "http://x",
        False,
        None,
    )


@pytest.mark.parametrize(
    ("repo", "version", "match"),
    [
        ("nobody/nothing", "1.1.2", "repository not found"),
        (REPO, "9.9.9", "has no tag v9.9.9"),
        (REPO, "7", "has no branch v7"),
    ],
)
def test_errors_name_the_repo_and_the_fix(
    hub: HubState, tmp_path: Path, repo: str, version: str, match: str
) -> None:
    with pytest.raises(HubError, match=match) as info:
        to_wheels(ToWheelRequest(repo, version, output_dir=tmp_path))
    assert "fix:" in str(info.value) and f"Hub repo {repo}" in str(info.value)


def test_repo_without_build(hub: HubState, tmp_path: Path) -> None:
    empty = HubRepo(tmp_path / "empty")
    empty.commit("nothing yet")
    empty.tag("v0.1.0")
    hub.repos["drbh/empty"] = GitBackedRepo(empty.root)
    with pytest.raises(HubError, match="has no build/ folder"):
        to_wheels(ToWheelRequest("drbh/empty", "0.1.0", output_dir=tmp_path / "o"))


def test_cli_in_a_fresh_process(hub: HubState, tmp_path: Path) -> None:
    """The console script path: environment read by a new interpreter, exit code, output."""
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("kernelwheel")),
            "to-wheel",
            REPO,
            "1.1.2",
            "-o",
            str(tmp_path),
            "--variant",
            "torch27-cxx11-cu128-*",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "revision: 1.1.2 -> tag v1.1.2 (commit " in proc.stdout
    assert wheels_in(tmp_path) == [
        "img2gray-1.1.2+torch2.7.cu128.cxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
        "img2gray-1.1.2+torch2.7.cu128.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ]


def test_a_commit_lookup_that_never_answers_is_bounded(
    hub: HubState, seed: HubRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """repo_info's own default (timeout=None) would wait for as long as the Hub takes; the
    lookup of a commit given with --revision is bounded like every other call."""
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")
    commit = git(seed.root, "rev-parse", "v1.1.2^{commit}")
    hub.faults.append(Fault("GET", "/revision/", 200, times=3, delay=2.5))
    with pytest.raises(HubError, match="no answer within 1 s, 3 tries") as info:
        to_wheels(ToWheelRequest(REPO, "1.1.2", revision=commit, output_dir=tmp_path / "out"))
    assert f"looking up commit {commit}" in str(info.value)
    assert hub.faults[0].times == 0  # all three tries reached the slow endpoint
