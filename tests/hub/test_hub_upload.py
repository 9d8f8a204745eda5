"""`kernelwheel upload` against the loopback Hub (the real huggingface_hub client; commits are
real git commits in the served repos): a kernel-type repo, branch v<major> made from the default
one, other variants kept, stale files of a replaced variant removed, the card beside build/, a
dry run that changes nothing, clear errors without a token or kernel-creation access; then
`to-wheel` of the same repo and version gives the wheels back. A Hub that fails (injected 5xx
answers, a commit whose answer is lost, someone else's push meanwhile) gets the upload's
retries: calls tried again, the commit made once or refused, never twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, VariantFiles, git, namespace_for, variant_files
from support.hubserver import Fault, GitBackedRepo, HubState, serve_as_hub
from support.shared import wheels_in
from support.sofiles import build_extension
from support.wheelread import read_wheel

from kernelwheel.cli import main
from kernelwheel.errors import HubError, HubUnavailable, UsageError
from kernelwheel.hub.metadata import Digest
from kernelwheel.hub.safety import git_blob_id
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels
from kernelwheel.hub.upload import Change, UploadRequest, read_layout, upload
from kernelwheel.log import SilentReporter
from kernelwheel.model.variant import BackendKind, Variant

REPO = "acme/img2gray"
TOKEN = "hf_write_token"
A = "torch214-cxx11-cu130-x86_64-linux"  # on the Hub (an older build), uploaded again
B = "torch213-cxx11-cu130-x86_64-linux"  # on the Hub only: must be kept
C = "torch214-cxx11-cpu-x86_64-linux"  # new in this upload
CARD = "# img2gray\n\nA kernel card.\n"


def _variant(name: str, so_cache: Path, salt: str, version: int = 1) -> VariantFiles:
    """Variant ``name`` as a build exports it: a CUDA one's extension carries device code."""
    backend = Variant.parse(name).backend
    assert backend is not None
    meta = {
        "name": "img2gray",
        "version": version,
        "license": "apache-2.0",
        "python-depends": [],
        "backend": {"type": backend.kind.value},
    }
    ns = namespace_for("img2gray", name, salt)
    cuda = backend.kind is BackendKind.CUDA
    binary = (ns, build_extension(so_cache, ns, fatbin=cuda))
    return variant_files(name, layout="flat", so_cache=so_cache, metadata=meta, binary=binary)


def _layout(root: Path, variants: list[VariantFiles], card: str | None = CARD) -> Path:
    for v in variants:
        for inner, data in v.files.items():
            path = root / "build" / v.name / inner
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    if card is not None:
        (root / "README.md").write_text(card)
    return root


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    state = HubState(write_token=TOKEN, root=tmp_path / "hub-repos")
    with serve_as_hub(state, monkeypatch, tmp_path / "hf-cache"):
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield state


@pytest.fixture
def existing(hub: HubState, tmp_path: Path, so_cache: Path) -> HubRepo:
    """acme/img2gray as kernel-builder left it: main, and v1 with an older A and B."""
    repo = HubRepo(tmp_path / "served")
    repo.commit("initial")
    repo.set_variants([_variant(A, so_cache, "old"), _variant(B, so_cache, "b")])
    repo.commit("v1 builds")
    repo.branch("v1")
    git(repo.root, "reset", "-q", "--hard", "HEAD~1")  # main stays without builds
    hub.repos[REPO] = GitBackedRepo(repo.root)
    return repo


def _tree(repo: Path, rev: str) -> dict[str, str]:
    out = git(repo, "ls-tree", "-r", "--full-tree", rev)
    return {line.split("\t")[1]: line.split()[2] for line in out.splitlines()}


def test_upload_keeps_other_variants_and_to_wheel_gives_the_wheels_back(
    hub: HubState, existing: HubRepo, tmp_path: Path, so_cache: Path
) -> None:
    new_a, new_c = _variant(A, so_cache, "new"), _variant(C, so_cache, "c")
    layout = _layout(tmp_path / "layout", [new_a, new_c])
    main_before, v1_before = (git(existing.root, "rev-parse", r) for r in ("main", "v1"))
    old = _tree(existing.root, "v1")

    # The dry run says what would change, and changes nothing.
    plan = upload(UploadRequest(layout, REPO, dry_run=True))
    assert (plan.branch, plan.create_repo, plan.create_branch, plan.kept) == (
        "v1",
        False,
        False,
        (B,),
    )
    changes = {f.path: f.change for f in plan.changes}
    old_so = next(p for p in old if p.startswith(f"build/{A}/_img2gray_") and p.endswith(".so"))
    new_so = next(p for p in new_a.files if p.startswith("_img2gray_") and p.endswith(".so"))
    assert changes[old_so] is Change.REMOVE  # the older build's extension, stale now
    assert changes[f"build/{A}/{new_so}"] is Change.ADD
    assert changes[f"build/{A}/_ops.py"] is Change.UPDATE  # it names the new namespace
    assert all(changes[f"build/{C}/{inner}"] is Change.ADD for inner in new_c.files)
    assert changes["README.md"] is Change.UPDATE
    assert not any(p.startswith(f"build/{B}/") for p in changes)
    assert hub.commits == [] and git(existing.root, "rev-parse", "v1") == v1_before

    reporter = SilentReporter()
    result = upload(UploadRequest(layout, REPO), reporter)
    assert result.commit == git(existing.root, "rev-parse", "v1") != v1_before
    assert git(existing.root, "rev-parse", "main") == main_before  # only v1 moved
    assert git(existing.root, "rev-parse", "v1^") == v1_before  # one commit on top
    now = _tree(existing.root, "v1")
    assert {p: o for p, o in now.items() if p.startswith(f"build/{B}/")} == {
        p: o for p, o in old.items() if p.startswith(f"build/{B}/")
    }
    for v in (new_a, new_c):
        assert {p for p in now if p.startswith(f"build/{v.name}/")} == {
            f"build/{v.name}/{inner}" for inner in v.files
        }
        for inner, data in v.files.items():
            assert now[f"build/{v.name}/{inner}"] == git_blob_id(data)
    assert now["README.md"] == git_blob_id(CARD.encode())
    # Every call went to the kernel-type repo; the commit was one of explicit operations.
    asked = [p for p in hub.requests() if REPO in p]
    assert asked and all(p.startswith(("/api/kernels/", "/kernels/")) for p in asked), asked
    (commit,) = hub.commits
    keys = {line["key"] for line in commit["lines"]}
    assert keys == {"header", "file", "deletedFile"} and commit["revision"] == "v1"
    assert any(r.name.startswith("commit to v1") for r in reporter.results)

    # The same repo and version, converted back: every variant, the new A's bytes.
    out = tmp_path / "wheels"
    back = to_wheels(ToWheelRequest(REPO, "1", output_dir=out))
    assert back.rejected == () and back.resolution.ref == "v1"
    assert sorted(c.variant for c in back.converted) == sorted([A, B, C])
    a_wheel = next(c.wheel for c in back.converted if c.variant == A)
    files = read_wheel(a_wheel).files
    assert files[f"img2gray/{new_so}"] == new_a.files[new_so]
    assert len(wheels_in(out)) == 3

    # Uploading the same layout again changes nothing.
    again = upload(UploadRequest(layout, REPO))
    assert again.commit is None and again.changes == () and len(hub.commits) == 1


def test_a_new_repo_is_a_kernel_repo_with_the_branch_made_from_main(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    layout = _layout(tmp_path / "layout", [_variant(C, so_cache, "c", version=2)])
    plan = upload(UploadRequest(layout, REPO, dry_run=True))
    assert (plan.create_repo, plan.create_branch, plan.branch) == (True, True, "v2")
    assert REPO not in hub.repos
    result = upload(UploadRequest(layout, REPO))
    assert hub.type_of(REPO) == "kernel"
    assert any(p == "/api/repos/create" for p in hub.requests("POST"))
    root = hub.repos[REPO].root
    assert git(root, "rev-parse", "v2^") == git(root, "rev-parse", "main")
    assert result.commit == git(root, "rev-parse", "v2")
    back = to_wheels(ToWheelRequest(REPO, "2", output_dir=tmp_path / "wheels"))
    assert [c.variant for c in back.converted] == [C]


def test_without_a_token_nothing_is_asked(
    hub: HubState,
    existing: HubRepo,
    tmp_path: Path,
    so_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_TOKEN")
    from huggingface_hub import constants

    # and no token stored by `hf auth login` on this machine
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-stored-token"))
    layout = _layout(tmp_path / "layout", [_variant(C, so_cache, "c")])
    hub.log.clear()
    with pytest.raises(UsageError, match="no Hub token") as info:
        upload(UploadRequest(layout, REPO))
    assert "HF_TOKEN" in str(info.value) and "hf auth login" in str(info.value)
    assert hub.requests() == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match="HF_HUB_OFFLINE is set"):
        upload(UploadRequest(layout, REPO, dry_run=True))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    # A dry run reads a public repo without one.
    assert upload(UploadRequest(layout, REPO, dry_run=True)).kept == (B, A)


def test_no_kernel_creation_access_is_a_clear_error(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    hub.may_create_kernels = False
    layout = _layout(tmp_path / "layout", [_variant(C, so_cache, "c")])
    with pytest.raises(HubError, match="forbidden \\(403") as info:
        upload(UploadRequest(layout, REPO))
    assert "kernel-creation access" in str(info.value) and REPO not in hub.repos


def test_a_wrong_token_is_a_clear_error(
    hub: HubState,
    existing: HubRepo,
    tmp_path: Path,
    so_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_read_only")
    layout = _layout(tmp_path / "layout", [_variant(C, so_cache, "c")])
    with pytest.raises(HubError, match="refused the token \\(401") as info:
        upload(UploadRequest(layout, REPO))
    assert "HF_TOKEN" in str(info.value) and hub.commits == []


def test_layouts_upload_refuses(tmp_path: Path, so_cache: Path) -> None:
    with pytest.raises(UsageError, match="no build/ folder"):
        upload(UploadRequest(tmp_path, REPO))
    with pytest.raises(UsageError, match="hbu: no such folder"):  # a typo is not 'no build/'
        upload(UploadRequest(tmp_path / "hbu", REPO))
    mixed = _layout(tmp_path / "mixed", [_variant(A, so_cache, "a"), _variant(C, so_cache, "c", 2)])
    with pytest.raises(UsageError, match="different versions"):
        upload(UploadRequest(mixed, REPO))
    one = _layout(tmp_path / "one", [_variant(C, so_cache, "c")])
    with pytest.raises(UsageError, match="--version 3, but the variants' metadata.json say"):
        upload(UploadRequest(one, REPO, version=3))
    with pytest.raises(UsageError, match="not a Hub repo id"):
        upload(UploadRequest(one, "no-slash"))
    # A folder changed since its export (its digest says otherwise) is not pushed.
    variant = one / "build" / C
    meta = json.loads((variant / "metadata.json").read_text())
    files = {p.relative_to(variant).as_posix(): p.read_bytes() for p in variant.rglob("*.py")}
    files.update({p.name: p.read_bytes() for p in variant.glob("*.so")})
    meta["digest"] = Digest.of(files).to_dict()
    (variant / "metadata.json").write_text(json.dumps(meta))
    assert read_layout(one).variants == (C,)
    (variant / "_ops.py").write_text("# edited by hand\n")
    with pytest.raises(UsageError, match="_ops.py does not match its sha256") as info:
        read_layout(one)
    assert "rebuild the variant" in str(info.value)


def test_cli_dry_run_json(
    hub: HubState,
    existing: HubRepo,
    tmp_path: Path,
    so_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    layout = _layout(tmp_path / "layout", [_variant(C, so_cache, "c")])
    out = StringIO()
    with redirect_stdout(out):
        code = main(["upload", str(layout), "--repo", REPO, "--dry-run", "--json"])
    assert code == 0
    data = json.loads(out.getvalue())
    assert (data["repo_type"], data["branch"], data["dry_run"], data["commit"]) == (
        "kernel",
        "v1",
        True,
        None,
    )
    assert data["kept"] == [B, A] and data["variants"] == [C]
    assert {f["change"] for f in data["files"] if f["path"].startswith(f"build/{C}/")} == {"add"}
    assert hub.commits == []


# -- a Hub that fails ---------------------------------------------------------------------------


@pytest.fixture
def c_upload(existing: HubRepo, tmp_path: Path, so_cache: Path) -> tuple[VariantFiles, Path, str]:
    """A layout of variant C to upload onto ``existing``, and v1's head before."""
    c = _variant(C, so_cache, "c")
    return c, _layout(tmp_path / "layout", [c]), git(existing.root, "rev-parse", "v1")


def _c_files(root: Path, rev: str, c: VariantFiles) -> bool:
    now = _tree(root, rev)
    return all(now.get(f"build/{C}/{inner}") == git_blob_id(d) for inner, d in c.files.items())


def test_server_errors_are_tried_again_and_the_commit_made_once(
    hub: HubState, existing: HubRepo, c_upload: tuple[VariantFiles, Path, str]
) -> None:
    c, layout, before = c_upload
    hub.faults += [
        Fault("GET", "/refs", 502),
        Fault("GET", "/tree/", 503),
        Fault("POST", "/commit/", 503),  # answered before the commit is made
    ]
    result = upload(UploadRequest(layout, REPO))
    assert [f.times for f in hub.faults] == [0, 0, 0]  # every fault was met
    assert result.commit == git(existing.root, "rev-parse", "v1")
    assert git(existing.root, "rev-parse", "v1^") == before  # one commit on top
    assert len(hub.commits) == 1 and _c_files(existing.root, "v1", c)


def test_a_commit_whose_answer_is_lost_is_not_made_again(
    hub: HubState,
    existing: HubRepo,
    c_upload: tuple[VariantFiles, Path, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    c, layout, before = c_upload
    hub.faults.append(Fault("POST", "/commit/", None))  # made, then the connection closes
    assert main(["upload", str(layout), "--repo", REPO]) == 0
    head = git(existing.root, "rev-parse", "v1")
    assert git(existing.root, "rev-parse", "v1^") == before  # once, not twice
    assert len(hub.commits) == 1 and _c_files(existing.root, "v1", c)
    assert f"commit {head}" in capsys.readouterr().out


def test_someone_elses_push_meanwhile_is_refused(
    hub: HubState, existing: HubRepo, c_upload: tuple[VariantFiles, Path, str]
) -> None:
    c, layout, before = c_upload
    served = hub.repos[REPO]

    def other_push() -> None:
        served.commit_files("v1", before, "someone else", {"NOTES.md": b"theirs\n"}, [], [])

    hub.faults.append(Fault("POST", "/commit/", 503, then=other_push))
    with pytest.raises(HubError, match="the branch moved") as info:
        upload(UploadRequest(layout, REPO))
    assert not isinstance(info.value, HubUnavailable)
    assert "rerun 'kernelwheel upload'" in str(info.value)
    assert git(existing.root, "rev-parse", "v1^") == before  # only their commit on top
    assert "NOTES.md" in _tree(existing.root, "v1") and not _c_files(existing.root, "v1", c)
    assert hub.commits == []


def test_a_hub_that_keeps_failing_stops_with_the_tries(
    hub: HubState,
    existing: HubRepo,
    c_upload: tuple[VariantFiles, Path, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, layout, before = c_upload
    hub.faults.append(Fault("POST", "/commit/", 503, times=3))
    assert main(["upload", str(layout), "--repo", REPO]) == HubError.exit_code
    err = capsys.readouterr().err
    assert "503" in err and "tried 3 times and is not on v1" in err and "retry later" in err
    assert "Traceback" not in err
    assert git(existing.root, "rev-parse", "v1") == before and hub.commits == []
