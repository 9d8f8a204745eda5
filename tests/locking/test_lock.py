"""kernelwheel lock on local Hub-layout git clones: declarations, resolution (a range picks the
highest matching tag, an integer follows branch vN), the lock file (hashes checked against the
repo and against to-wheel, stable bytes, carry-over, refresh, --check) and its reader."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, git, variant_files
from support.runners import RecordingRunner
from support.variants import HUB_NESTED as NESTED
from support.variants import TORCH214_CU130

from kernelwheel import __version__
from kernelwheel.cli import main
from kernelwheel.errors import HubError, ProjectError
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels
from kernelwheel.locking.declared import read_dependencies
from kernelwheel.locking.lockfile import LOCK_NAME, LockedKernel, LockedVariant, LockFile
from kernelwheel.locking.resolve import LockRequest, lock_project

FLAT = (TORCH214_CU130,)


def legacy_repo(root: Path, so_cache: Path, tags: tuple[str, ...]) -> HubRepo:
    """img2gray in the nested layout, one commit per release tag (each with its own binaries)."""
    repo = HubRepo(root / "img2gray")
    for tag in tags:
        add_release(repo, so_cache, tag)
    return repo


def add_release(repo: HubRepo, so_cache: Path, tag: str) -> str:
    repo.set_variants(variant_files(v, so_cache=so_cache, salt=tag) for v in NESTED)
    commit = repo.commit(f"release {tag}")
    repo.tag(tag)
    return commit


def current_repo(root: Path, so_cache: Path) -> HubRepo:
    """relu in the flat layout on branch v1 (metadata.json says 1.4.0)."""
    repo = HubRepo(root / "relu")
    move_branch(repo, so_cache, "1.4.0")
    return repo


def move_branch(repo: HubRepo, so_cache: Path, version: str) -> str:
    meta = {"name": "relu", "version": version, "python-depends": []}
    repo.set_variants(
        variant_files(
            v, layout="flat", package="relu", so_cache=so_cache, metadata=meta, salt=version
        )
        for v in FLAT
    )
    commit = repo.commit(f"build {version}")
    repo.branch("v1", commit)
    return commit


def write_project(root: Path, body: str) -> Path:
    project = root / "app"
    project.mkdir(exist_ok=True)
    (project / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n\n' + body)
    return project


DEPS = """[tool.kernelwheel.dependencies]
"drbh/img2gray" = { version = ">=1.1,<2", path = "../img2gray" }
"acme/relu" = { version = 1, path = "../relu" }
"""


@pytest.fixture
def repos(tmp_path: Path, so_cache: Path) -> tuple[HubRepo, HubRepo, Path]:
    legacy = legacy_repo(tmp_path, so_cache, ("v1.1.2", "v1.2.0", "v1.3.0", "v2.0.0"))
    current = current_repo(tmp_path, so_cache)
    return legacy, current, write_project(tmp_path, DEPS)


def blob_sha256(repo: HubRepo, rev: str, path: str) -> str:
    """The sha256 of a file at a revision, read independently (LFS pointers followed)."""
    data = subprocess.run(
        ["git", "-C", str(repo.root), "show", f"{rev}:{path}"], capture_output=True, check=True
    ).stdout
    if data.startswith(b"version https://git-lfs"):
        return data.split(b"oid sha256:")[1].split(b"\n")[0].decode()
    return hashlib.sha256(data).hexdigest()


# -- declarations -------------------------------------------------------------------------------


def test_both_tables_integers_strings_and_paths(tmp_path: Path) -> None:
    project = write_project(
        tmp_path,
        '[tool.kernels.dependencies]\n"drbh/img2gray" = ">=0.1.2,<0.2.0"\n"acme/relu" = 2\n'
        '"acme/exact" = "1.1.2"\n\n[tool.kernelwheel.dependencies]\n'
        '"acme/relu" = 2\n"acme/local" = { version = "v3", path = "clones/local" }\n',
    )
    deps = read_dependencies(project).dependencies
    assert [(d.repo, d.requested, d.request.kind.value, d.request.ref, d.path) for d in deps] == [
        ("acme/exact", "1.1.2", "exact", "v1.1.2", None),
        ("acme/local", "v3", "major", "v3", "clones/local"),
        ("acme/relu", "2", "major", "v2", None),
        ("drbh/img2gray", ">=0.1.2,<0.2.0", "range", None, None),
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '[tool.kernels.dependencies]\n"drbh/img2gray" = ">=1.2,<<2"\n',
            ['tool.kernels.dependencies."drbh/img2gray"', "'>=1.2,<<2' is not a version request"],
        ),
        (
            '[tool.kernels.dependencies]\n"drbh/img2gray" = 1.5\n',
            ["expected a version string or an integer, got 1.5", "quote it"],
        ),
        (
            '[tool.kernels.dependencies]\nimg2gray = "1"\n',
            ["tool.kernels.dependencies.img2gray", "'img2gray' is not a Hub repo id", "org/name"],
        ),
        (
            '[tool.kernels.dependencies]\n"a/b" = { version = "1", path = "x" }\n',
            ["kernelwheel's form", "move this line to [tool.kernelwheel.dependencies]"],
        ),
        (
            '[tool.kernelwheel.dependencies]\n"a/b" = { versoin = "1" }\n',
            ['tool.kernelwheel.dependencies."a/b".versoin', "did you mean 'version'?"],
        ),
        (
            '[tool.kernels.dependencies]\n"a/b" = "1"\n'
            '[tool.kernelwheel.dependencies]\n"a/b" = "2"\n',
            ["a/b is declared twice and differently", "'1'", "'2'"],
        ),
        ("[tool.kernels]\nother = 1\n", ["declares no kernels", "[tool.kernels.dependencies]"]),
        ('[tool.kernels.dependencies]\n"a/b" = "1.1.2+cu12"\n', ["local part"]),
        (
            '[tool.kernels]\ndependencies = "drbh/img2gray"\n',
            ["tool.kernels.dependencies: expected a table", "with lines such as"],
        ),
        (
            '[tool.kernelwheel.dependencies]\n"a/b" = { version = "1", path = "" }\n',
            ['dependencies."a/b".path: must not be empty', "folder of a git clone"],
        ),
        ("[tool]\nkernels = 1\n", ["tool.kernels: expected a table, got an integer (1)"]),
    ],
)
def test_declaration_errors_name_file_field_value_and_fix(
    tmp_path: Path, body: str, expected: list[str]
) -> None:
    project = write_project(tmp_path, body)
    with pytest.raises(ProjectError) as info:
        read_dependencies(project)
    text = str(info.value)
    assert text.startswith(str(project / "pyproject.toml"))
    assert "fix:" in text
    for part in expected:
        assert part in text


def test_missing_pyproject_and_unknown_clone(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match="pyproject.toml: not found"):
        read_dependencies(tmp_path)
    project = write_project(
        tmp_path, '[tool.kernelwheel.dependencies]\n"a/b" = { version = "1", path = "../nope" }\n'
    )
    with pytest.raises(ProjectError, match=r"path '../nope': no such folder") as info:
        lock_project(LockRequest(project))
    assert 'tool.kernelwheel.dependencies."a/b"' in str(info.value)


def test_unknown_tag_names_the_declaration(tmp_path: Path, so_cache: Path) -> None:
    legacy_repo(tmp_path, so_cache, ("v1.1.2",))
    project = write_project(
        tmp_path,
        '[tool.kernelwheel.dependencies]\n"drbh/img2gray" = { version = ">=3", path = '
        '"../img2gray" }\n',
    )
    with pytest.raises(HubError) as info:
        lock_project(LockRequest(project))
    text = str(info.value)
    # the file as given (the project's folder named), like the other declaration errors
    assert text.startswith(
        f'{project}/pyproject.toml: tool.kernelwheel.dependencies."drbh/img2gray"'
    )
    assert "no vX.Y.Z tag of git clone" in text and "satisfies '>=3'" in text
    assert "version tags there: v1.1.2" in text
    assert not (project / LOCK_NAME).exists()


# -- lock -----------------------------------------------------------------------------------------


def test_lock_pins_commits_and_records_file_and_wheel_hashes(
    repos: tuple[HubRepo, HubRepo, Path], tmp_path: Path
) -> None:
    legacy, current, project = repos
    result = lock_project(LockRequest(project))
    assert result.written and result.changed
    lock = LockFile.load(project / LOCK_NAME)
    assert lock.kernelwheel == __version__ and lock.source_date_epoch == 315532800

    img = lock.kernel("drbh/img2gray")
    assert img is not None
    # The range >=1.1,<2 picks the highest matching tag (v2.0.0 is outside it).
    assert (img.ref, img.version, img.requested, img.path) == (
        "v1.3.0",
        "1.3.0",
        ">=1.1,<2",
        "../img2gray",
    )
    assert img.commit == git(legacy.root, "rev-parse", "v1.3.0^{commit}")
    assert [v.name for v in img.variants] == sorted(NESTED)
    for variant in img.variants:
        for inner, sha in variant.files:
            assert sha == blob_sha256(legacy, "v1.3.0", f"build/{variant.name}/{inner}")
        assert {p.split("/")[-1] for p, _ in variant.files} >= {"__init__.py"}
    # The wheel hashes are those of the wheels to-wheel makes from the same tag.
    out = tmp_path / "towheel"
    direct = to_wheels(ToWheelRequest(str(legacy.root), "1.3.0", output_dir=out))
    made = {c.variant: c.wheel for c in direct.converted}
    for variant in img.variants:
        assert variant.wheel == made[variant.name].name
        assert variant.wheel_sha256 == hashlib.sha256(made[variant.name].read_bytes()).hexdigest()

    relu = lock.kernel("acme/relu")
    assert relu is not None
    assert (relu.ref, relu.version, relu.commit) == (
        "v1",
        "1",
        git(current.root, "rev-parse", "v1"),
    )
    (variant,) = relu.variants
    # Flat layout: metadata.json is read (into METADATA), the shim is not packaged.
    files = dict(variant.files)
    assert "metadata.json" in files and "relu/__init__.py" not in files
    assert variant.wheel == "relu-1.4.0+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


def test_lock_file_layout_is_sorted_and_diff_friendly(repos: tuple[HubRepo, HubRepo, Path]) -> None:
    _, _, project = repos
    lock_project(LockRequest(project))
    text = (project / LOCK_NAME).read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# kernelwheel.lock")
    assert "lock-version = 1" in lines and f'kernelwheel = "{__version__}"' in lines
    repos_in_order = [line for line in lines if line.startswith("repo = ")]
    assert repos_in_order == ['repo = "acme/relu"', 'repo = "drbh/img2gray"']
    names = [line for line in lines if line.startswith("name = ")]
    assert names[1:] == sorted(names[1:])  # img2gray's variants, sorted
    assert text.count("[kernel.variant.files]") == 4
    assert all(len(line) < 140 for line in lines)  # one short value a line
    assert LockFile.loads(text, project / LOCK_NAME).dumps() == text


def test_relock_with_nothing_new_is_byte_identical(repos: tuple[HubRepo, HubRepo, Path]) -> None:
    _, _, project = repos
    lock_project(LockRequest(project))
    path = project / LOCK_NAME
    first = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    again = lock_project(LockRequest(project))
    assert not again.changed and not again.written
    assert all(k.reused for k in again.kernels)
    assert path.read_bytes() == first and path.stat().st_mtime_ns == mtime
    # Converting everything again gives the same bytes too (reproducible wheels).
    refreshed = lock_project(LockRequest(project, refresh=True))
    assert not any(k.reused for k in refreshed.kernels)
    assert not refreshed.changed and path.read_bytes() == first


def test_new_tag_in_range_and_moved_branch_change_only_their_entries(
    repos: tuple[HubRepo, HubRepo, Path], so_cache: Path
) -> None:
    legacy, current, project = repos
    lock_project(LockRequest(project))
    before = LockFile.load(project / LOCK_NAME)
    add_release(legacy, so_cache, "v1.9.0")
    add_release(legacy, so_cache, "v2.1.0")  # outside the range
    moved = move_branch(current, so_cache, "1.5.0")
    result = lock_project(LockRequest(project))
    assert result.written and not any(k.reused for k in result.kernels)
    after = LockFile.load(project / LOCK_NAME)
    img, relu = after.kernel("drbh/img2gray"), after.kernel("acme/relu")
    assert img is not None and relu is not None
    assert (img.ref, img.version) == ("v1.9.0", "1.9.0")
    old = before.kernel("acme/relu")
    assert old is not None
    assert relu.commit == moved and relu.commit != old.commit
    assert relu.variants[0].wheel.startswith("relu-1.5.0+")
    assert relu.variants[0].wheel_sha256 != old.variants[0].wheel_sha256


def test_check_mode_and_cli(
    repos: tuple[HubRepo, HubRepo, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, project = repos
    assert main(["lock", str(project), "--check"]) == 1
    assert not (project / LOCK_NAME).exists()
    assert "out of date (or missing)" in capsys.readouterr().err
    assert main(["lock", str(project)]) == 0
    out = capsys.readouterr().out
    assert "drbh/img2gray '>=1.1,<2' -> v1.3.0" in out and "3 variant(s) locked" in out
    assert f"wrote {project / LOCK_NAME}" in out
    assert main(["lock", str(project), "--check"]) == 0
    assert "is up to date" in capsys.readouterr().out


def test_unconvertible_variants_are_skipped_and_named(tmp_path: Path, so_cache: Path) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    repo.set_variants(
        [
            variant_files(NESTED[0], so_cache=so_cache),
            variant_files(NESTED[1], so_cache=so_cache, too_new_glibc=True),
        ]
    )
    repo.commit("build")
    repo.tag("v1.0.0")
    project = write_project(
        tmp_path,
        '[tool.kernelwheel.dependencies]\n"drbh/img2gray" = { version = "1.0.0", path = '
        '"../img2gray" }\n',
    )
    result = lock_project(LockRequest(project))
    (outcome,) = result.kernels
    assert [r.variant for r in outcome.rejected] == [NESTED[1]]
    assert outcome.locked.skipped == (NESTED[1],)
    assert [v.name for v in outcome.locked.variants] == [NESTED[0]]
    assert f'skipped = [\n    "{NESTED[1]}",\n]' in (project / LOCK_NAME).read_text()
    allowed = lock_project(LockRequest(project, allow_abi_violations=True))
    assert (
        allowed.kernels[0].locked.skipped == () and allowed.kernels[0].locked.allow_abi_violations
    )
    assert "allow-abi-violations = true" in (project / LOCK_NAME).read_text()


# -- the lock file reader -----------------------------------------------------------------------

SAMPLE = LockFile(
    kernelwheel="0.1.0",
    source_date_epoch=315532800,
    kernels=(
        LockedKernel(
            repo="drbh/img2gray",
            requested=">=1.1,<2",
            ref="v1.3.0",
            commit="a" * 40,
            version="1.3.0",
            variants=(
                LockedVariant(
                    name="torch-cuda",
                    wheel="img2gray-1.3.0+cuda-py3-none-any.whl",
                    wheel_sha256="b" * 64,
                    files=(
                        ('img2gray/we"ird name.py', "c" * 64),
                        ("img2gray/__init__.py", "d" * 64),
                    ),
                ),
            ),
            path="../clones/img 2gray",
            skipped=("torch28-metal-aarch64-darwin",),
        ),
    ),
)


def test_round_trip_with_quoting() -> None:
    text = SAMPLE.dumps()
    assert '"img2gray/we\\"ird name.py" = ' in text
    back = LockFile.loads(text, Path(LOCK_NAME))
    assert back.dumps() == text
    assert back.kernels[0].variants[0].files[0][0] == "img2gray/__init__.py"  # sorted


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (('commit = "' + "a" * 40, 'commit = "' + "a" * 39), "kernel[0].commit: 'aaa"),
        (
            ('wheel-sha256 = "' + "b" * 64, 'wheel-sha256 = "xyz'),
            "kernel[0].variant[0].wheel-sha256",
        ),
        (("lock-version = 1", "lock-version = 7"), "lock-version 7 is not 1"),
        (('repo = "drbh/img2gray"\n', ""), "kernel[0].repo: missing"),
        (
            ("source-date-epoch = 315532800", 'source-date-epoch = "x"'),
            "expected an integer, got a string ('x')",
        ),
        (("[[kernel]]", "[[kernel]"), "invalid TOML"),
        (
            ('"img2gray/__init__.py" = "' + "d" * 64, '"img2gray/__init__.py" = "xyz'),
            "kernel[0].variant[0].files.\"img2gray/__init__.py\": 'xyz' is not a sha256",
        ),
        (('requested = ">=1.1,<2"', 'requested = "latest"'), "kernel[0].requested: VERSION"),
    ],
)
def test_reader_errors_name_the_field(edit: tuple[str, str], expected: str) -> None:
    text = SAMPLE.dumps()
    assert edit[0] in text
    with pytest.raises(ProjectError) as info:
        LockFile.loads(text.replace(edit[0], edit[1], 1), Path("proj") / LOCK_NAME)
    message = str(info.value)
    assert message.startswith(str(Path("proj") / LOCK_NAME)) and expected in message
    assert "run 'kernelwheel lock'" in message


def test_the_clones_git_runs_through_the_runner_main_is_given(
    repos: tuple[HubRepo, HubRepo, Path],
) -> None:
    legacy, current, project = repos
    runner = RecordingRunner()
    assert main(["lock", str(project)], runner) == 0
    gits = [c for c in runner.commands if c[0] == "git"]
    for clone in (legacy.root, current.root):
        assert any(str(clone.resolve()) in c for c in gits), (clone, gits)
    house = project / "house"
    runner = RecordingRunner()
    assert main(["download", str(project), "--wheelhouse", str(house)], runner) == 0
    assert any(c[0] == "git" and str(current.root.resolve()) in c for c in runner.commands)


def test_a_clone_named_otherwise_is_reported_by_its_repos_name_when_reused(
    tmp_path: Path, so_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A relock that carries a kernel over named it by its clone's folder (`relu-clone: 1 ->
    branch v1 …`), where the run that converted it said `relu`."""
    current_repo(tmp_path, so_cache).root.rename(tmp_path / "relu-clone")
    project = write_project(
        tmp_path,
        '[tool.kernelwheel.dependencies]\n"acme/relu" = { version = 1, path = "../relu-clone" }\n',
    )
    assert main(["lock", str(project)]) == 0
    capsys.readouterr()
    assert main(["lock", str(project), "--check"]) == 0
    shown = capsys.readouterr()
    assert "relu: 1 -> branch v1" in shown.out + shown.err
    assert "relu-clone:" not in shown.out + shown.err
