"""kernelwheel download from local Hub-layout git clones: the locked commit is materialised even
after its branch moved, every file and wheel is verified (a tampered LFS object or lock entry is
refused with both hashes named and nothing lands in the wheelhouse), and the wheelhouse installs
offline with pip into a fresh venv (a fake torch 2.14.1+cu130 stands in for torch): plain
--find-links picks the variant for that torch, --require-hashes -r requirements.txt too, and the
PEP 751 pylock.toml selects the right wheel."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version
from support.gitrepo import git, namespace_for
from support.shared import LockWorld, leftovers, move_relu, wheels_in
from support.tomlread import loads
from support.variants import HUB_NESTED as NESTED
from support.variants import TORCH214_CU130 as RIGHT
from support.venvs import QuickVenv, fake_torch

from kernelwheel.cli import main
from kernelwheel.errors import HubError, ProjectError, UsageError, WheelError
from kernelwheel.locking.download import DownloadRequest, download
from kernelwheel.locking.lockfile import LOCK_NAME, LockFile
from kernelwheel.locking.resolve import LockRequest, lock_project

DEPS = """[tool.kernelwheel.dependencies]
"drbh/img2gray" = { version = ">=1.1,<2", path = "../img2gray" }
"acme/relu" = { version = 1, path = "../relu" }
"""


@pytest.fixture
def world(tmp_path: Path, so_cache: Path) -> LockWorld:
    return LockWorld(tmp_path, so_cache, ("v1.1.2", "v1.2.0", "v2.0.0"))


@pytest.fixture
def app(world: LockWorld) -> Path:
    """A project depending on both repos, locked."""
    project = world.project("app", DEPS)
    lock_project(LockRequest(project))
    return project


@pytest.fixture
def lock(app: Path) -> LockFile:
    return LockFile.load(app / LOCK_NAME)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def locked_wheels(lock: LockFile) -> dict[str, str]:
    return {v.wheel: v.wheel_sha256 for k in lock.kernels for v in k.variants}


def test_download_writes_every_locked_wheel_verified(
    world: LockWorld, app: Path, lock: LockFile
) -> None:
    result = download(DownloadRequest(app, world.house))
    expected = locked_wheels(lock)
    assert wheels_in(world.house) == sorted(expected)
    assert {w.filename: sha256(w.path) for w in result.wheels} == expected
    assert leftovers(world.house) == ["requirements.txt"]  # no staging left behind
    assert result.pylock is None and "img2gray has 3 builds" in result.pylock_note
    text = result.requirements.read_text()
    assert "img2gray==1.2.0 \\\n" in text and "relu==1.4.0 \\\n" in text
    assert all(f"--hash=sha256:{h}" in text for h in expected.values())


def test_locked_commit_is_materialised_after_the_branch_moved(
    world: LockWorld, app: Path, lock: LockFile
) -> None:
    moved = move_relu(world.relu, world.so_cache, "1.5.0")
    assert git(world.relu.root, "rev-parse", "v1") == moved != world.relu_commit
    result = download(DownloadRequest(app, world.house, variants=("torch214-*",)))
    relu = [w for w in result.wheels if w.repo == "acme/relu"]
    assert [w.commit for w in relu] == [world.relu_commit]
    assert relu[0].filename.startswith("relu-1.4.0+torch2.14.cu130.cxx11-")
    assert {w.filename: w.sha256 for w in result.wheels}.items() <= locked_wheels(lock).items()


def test_variant_globs_select_and_pylock_needs_one_build_per_kernel(
    world: LockWorld, app: Path
) -> None:
    result = download(DownloadRequest(app, world.house, variants=("torch2{14,99}-*",)))
    assert [w.variant for w in result.wheels] == [RIGHT, RIGHT]
    assert ("drbh/img2gray", "torch-cuda") in result.not_selected
    assert result.pylock == world.house / "pylock.toml"
    from packaging.pylock import Pylock
    from packaging.tags import cpython_tags

    data = loads(result.pylock.read_text())
    lock = Pylock.from_dict(data)
    linux = {"sys_platform": "linux", "platform_machine": "x86_64", "python_full_version": "3.11.7"}
    tags = list(cpython_tags((3, 11), platforms=["manylinux_2_28_x86_64"]))
    chosen = {p.name: w for p, w in lock.select(environment=linux, tags=tags)}  # type: ignore[arg-type]
    assert sorted(chosen) == ["img2gray", "relu"]
    for wheel in chosen.values():
        assert wheel.path is not None and wheel.hashes["sha256"] == sha256(world.house / wheel.path)
    assert data["packages"][0]["tool"]["kernelwheel"]["repo"] == "drbh/img2gray"
    # Widening the selection again drops the pylock.toml, which would now be wrong.
    again = download(DownloadRequest(app, world.house))
    assert again.pylock is None and not (world.house / "pylock.toml").exists()


@pytest.mark.parametrize(
    ("globs", "expected"),
    [
        (("torch99-*",), "--variant 'torch99-*' matches no locked variant"),
        (("torch27-*",), "selects no variant of acme/relu"),
        (("torch{27",), "unbalanced braces"),
    ],
)
def test_bad_selection(world: LockWorld, app: Path, globs: tuple[str, ...], expected: str) -> None:
    with pytest.raises(UsageError, match=expected.replace("*", r"\*").replace("{", r"\{")):
        download(DownloadRequest(app, world.house, variants=globs))
    assert not world.house.exists() or wheels_in(world.house) == []


def test_tampered_lfs_object_is_refused_and_nothing_is_written(
    world: LockWorld, app: Path, lock: LockFile
) -> None:
    world.house.mkdir()
    (world.house / "keep.txt").write_text("mine")
    img = lock.kernel("drbh/img2gray")
    assert img is not None
    variant = next((v for v in img.variants if v.name == RIGHT), None)
    assert variant is not None
    so_name, oid = next((p, h) for p, h in variant.files if p.endswith(".so"))
    obj = world.legacy.lfs_dir / oid[:2] / oid[2:4] / oid
    data = bytearray(obj.read_bytes())
    data[-1] ^= 0xFF
    obj.write_bytes(bytes(data))
    actual = hashlib.sha256(bytes(data)).hexdigest()
    with pytest.raises(HubError) as info:
        download(DownloadRequest(app, world.house))
    message = str(info.value)
    assert f"build/{RIGHT}/{so_name}: sha256 mismatch" in message
    assert f"expected {oid}" in message and f"actual {actual}" in message
    assert "nothing was written" in message
    assert sorted(p.name for p in world.house.iterdir()) == ["keep.txt"]


def test_a_wheel_hash_the_lock_does_not_hold_is_refused(
    world: LockWorld, app: Path, lock: LockFile
) -> None:
    path = app / LOCK_NAME
    img = lock.kernel("drbh/img2gray")
    assert img is not None
    variant = next((v for v in img.variants if v.name == "torch-cuda"), None)
    assert variant is not None
    path.write_text(path.read_text().replace(variant.wheel_sha256, "0" * 64))
    with pytest.raises(HubError) as info:
        download(DownloadRequest(app, world.house))
    message = str(info.value)
    assert f"{variant.wheel}: sha256 mismatch: expected {'0' * 64}" in message
    assert f"actual {variant.wheel_sha256}" in message
    assert wheels_in(world.house) == [] and leftovers(world.house) == []
    # A plain relock carries the (unchanged) commit's entry over; --refresh recomputes it.
    assert "kernelwheel lock --refresh" in message
    assert lock_project(LockRequest(app, refresh=True)).written
    assert len(download(DownloadRequest(app, world.house)).wheels) == 4


def test_a_hash_mismatch_with_json_prints_the_error_as_json(
    world: LockWorld, app: Path, lock: LockFile, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30: --json printed nothing when download failed as a whole; the failure a machine
    most needs is one JSON document on stdout."""
    import json

    path = app / LOCK_NAME
    img = lock.kernel("drbh/img2gray")
    assert img is not None
    variant = next((v for v in img.variants if v.name == "torch-cuda"), None)
    assert variant is not None
    path.write_text(path.read_text().replace(variant.wheel_sha256, "0" * 64))
    code = main(["download", str(app), "--wheelhouse", str(world.house), "--json"])
    captured = capsys.readouterr()
    assert code == HubError.exit_code and "Traceback" not in captured.err
    doc = json.loads(captured.out)
    assert doc["ok"] is False and doc["command"] == "download" and doc["exit_code"] == code
    assert "sha256 mismatch" in doc["error"]["message"]
    assert "kernelwheel lock --refresh" in doc["error"]["hint"] + doc["error"]["message"]


def test_stale_or_foreign_lock_is_refused(
    world: LockWorld, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyproject = app / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(">=1.1,<2", ">=1.1,<3"))
    with pytest.raises(ProjectError, match="out of date with pyproject.toml") as info:
        download(DownloadRequest(app, world.house))
    assert "drbh/img2gray is declared '>=1.1,<3' but locked as '>=1.1,<2'" in str(info.value)
    pyproject.write_text(pyproject.read_text().replace(">=1.1,<3", ">=1.1,<2"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    with pytest.raises(ProjectError, match="SOURCE_DATE_EPOCH=315532800"):
        download(DownloadRequest(app, world.house))
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    lock = app / LOCK_NAME
    lock.write_text(lock.read_text().replace('kernelwheel = "', 'kernelwheel = "9', 1))
    with pytest.raises(ProjectError, match="install kernelwheel==9"):
        download(DownloadRequest(app, world.house))
    lock.unlink()
    with pytest.raises(ProjectError, match="kernelwheel.lock: not found"):
        download(DownloadRequest(app, world.house))
    assert not world.house.exists()


def test_cli(world: LockWorld, app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["download", str(app), "--wheelhouse", str(world.house), "--variant", RIGHT])
    assert code == 0
    out = capsys.readouterr().out
    assert "2 wheel(s) verified against kernelwheel.lock and written" in out
    assert f"pylock.toml: {world.house / 'pylock.toml'}" in out
    assert f"--find-links {world.house} -r {world.house / 'requirements.txt'}" in out
    assert "pip takes the label" not in out  # one build per kernel: pip cannot pick wrong
    assert main(["download", str(app), "--wheelhouse", str(world.house), "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "pylock.toml not written: img2gray has 3 builds" in out
    # before: the pip line alone, which takes the label that sorts highest (cu130 on a driver
    # of 12.6, a CUDA build under a CPU torch of the same series)
    assert "pip takes the label that sorts highest" in out
    install = (
        f"kernelwheel install img2gray==1.2.0 relu==1.4.0 --no-index --find-links {world.house}"
    )
    assert install in out


@pytest.mark.parametrize("name", ["requirements.txt", "pylock.toml"])
def test_a_users_file_in_the_wheelhouse_is_refused_not_replaced(
    world: LockWorld, app: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Issue 38, 3: a requirements.txt or pylock.toml kernelwheel did not write is the user's:
    refused naming it, before anything is converted, and nothing lands in the wheelhouse;
    kernelwheel's own earlier output is replaced; --force replaces the user's."""
    world.house.mkdir(parents=True)
    users = world.house / name
    users.write_text("# my own pins\nnumpy==2.1\n")
    argv = ["download", str(app), "--wheelhouse", str(world.house), "--variant", RIGHT]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{users} was not written by kernelwheel" in err and "--force" in err
    assert users.read_text() == "# my own pins\nnumpy==2.1\n"
    assert leftovers(world.house) == [name] and wheels_in(world.house) == []

    users.unlink()
    assert main(argv) == 0  # kernelwheel's own requirements.txt and pylock.toml now
    mine = {n: (world.house / n).read_text() for n in ("requirements.txt", "pylock.toml")}
    (world.house / "requirements.txt").write_text(mine["requirements.txt"] + "# stale\n")
    assert main(argv) == 0  # kernelwheel's own output: replaced, no question asked
    assert (world.house / "requirements.txt").read_text() == mine["requirements.txt"]

    users.write_text("# my own pins\n")
    assert main([*argv, "--force"]) == 0
    assert users.read_text() == mine[name]


# -- offline pip installs ------------------------------------------------------------------------

CHECK = """
import sys, img2gray, relu
ns = {ns!r}
print("loaded", sys.modules["img2gray." + ns].LOADED)
"""


@pytest.fixture(scope="module")
def torch_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_torch(tmp_path_factory.mktemp("torch"), "2.14.1+cu130", "13.0", cxx11=True)


@pytest.mark.slow  # a real pip install into a fresh venv
def test_pip_installs_the_variant_for_the_installed_torch_offline(
    world: LockWorld, app: Path, torch_site: Path, tmp_path: Path
) -> None:
    download(DownloadRequest(app, world.house))
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install("img2gray", "relu", find_links=world.house)
    assert venv.installed_version("img2gray") == "1.2.0+torch2.14.cu130.cxx11"
    assert venv.installed_version("relu") == "1.4.0+torch2.14.cu130.cxx11"
    ns = namespace_for("img2gray", RIGHT, "v1.2.0")
    assert f"loaded {ns}" in venv.run("-c", CHECK.format(ns=ns)).stdout


def test_pip_require_hashes_installs_and_refuses_altered_wheels(
    world: LockWorld, app: Path, torch_site: Path, tmp_path: Path
) -> None:
    result = download(DownloadRequest(app, world.house))
    requirements = str(result.requirements)
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install("--require-hashes", "-r", requirements, find_links=world.house)
    assert venv.installed_version("img2gray") == "1.2.0+torch2.14.cu130.cxx11"
    # Another build under the name pip would pick: its hash is not listed, so pip passes it
    # over for the best build whose hash is (here the noarch one), never installing it.
    right = next(w for w in result.wheels if w.variant == RIGHT and w.repo == "drbh/img2gray")
    wrong = next(w for w in result.wheels if w.variant == NESTED[0])
    os.replace(wrong.path, right.path)
    swapped = QuickVenv(tmp_path / "swapped", [torch_site])
    swapped.pip_install("--require-hashes", "-r", requirements, find_links=world.house)
    assert swapped.installed_version("img2gray") == "1.2.0+cuda"
    # With one build per kernel there is nothing else: an altered wheel stops the install.
    house = tmp_path / "one"
    only = download(DownloadRequest(app, house, variants=(RIGHT,)))
    with (house / right.filename).open("ab") as fh:
        fh.write(b"\0")
    refused = QuickVenv(tmp_path / "refused", [torch_site])
    proc = refused.pip_install(
        "--require-hashes", "-r", str(only.requirements), find_links=house, check=False
    )
    assert proc.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in proc.stdout + proc.stderr
    assert refused.run("-c", "import img2gray", check=False).returncode != 0


def _pylock_pip() -> str | None:
    """A Python whose pip reads pylock.toml (pip >= 26.1): KERNELWHEEL_PYLOCK_PIP, else this
    interpreter's pip when it is recent enough."""
    for python in (os.environ.get("KERNELWHEEL_PYLOCK_PIP"), sys.executable):
        if not python:
            continue
        proc = subprocess.run(
            [python, "-m", "pip", "--version"], capture_output=True, text=True, check=False
        )
        parts = proc.stdout.split()
        if proc.returncode == 0 and len(parts) > 1 and Version(parts[1]) >= Version("26.1"):
            return python
    return None


def test_pip_installs_from_pylock_toml(
    world: LockWorld, app: Path, torch_site: Path, tmp_path: Path
) -> None:
    python = _pylock_pip()
    if python is None:
        pytest.skip(
            "no pip >= 26.1 (the first to install from pylock.toml); set "
            "KERNELWHEEL_PYLOCK_PIP to a Python that has one"
        )
    result = download(DownloadRequest(app, world.house, variants=(RIGHT,)))
    assert result.pylock is not None
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    cmd = [python, "-m", "pip", "--python", str(venv.python), "install", "--isolated", "--no-index"]
    proc = subprocess.run([*cmd, "-r", str(result.pylock)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert venv.installed_version("img2gray") == "1.2.0+torch2.14.cu130.cxx11"
    assert venv.installed_version("relu") == "1.4.0+torch2.14.cu130.cxx11"
    wheel = next(w for w in result.wheels if w.repo == "drbh/img2gray")
    with wheel.path.open("ab") as fh:
        fh.write(b"\0")
    other = QuickVenv(tmp_path / "other", [torch_site])
    cmd[4] = str(other.python)
    proc = subprocess.run([*cmd, "-r", str(result.pylock)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stdout + proc.stderr


def test_a_full_disk_is_not_blamed_on_the_lock(
    world: LockWorld, app: Path, lock: LockFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wheels that could not be written (no space left) were reported as an integrity problem
    (exit 9) with "run 'kernelwheel lock --refresh'": the lock is fine, the disk is full."""
    import kernelwheel.hub.towheel as towheel

    def full(*args: object, **kwargs: object) -> Path:
        raise WheelError("cannot write x.whl into DIR: No space left on device", hint="free space")

    monkeypatch.setattr(towheel, "write_wheel", full)
    with pytest.raises(WheelError) as info:
        download(DownloadRequest(app, world.house))
    assert "No space left on device" in str(info.value) and "--refresh" not in str(info.value)
    assert wheels_in(world.house) == [] and leftovers(world.house) == []


def test_a_full_disk_while_locking_writes_no_lock(
    world: LockWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel that could not be written while locking (no space left in TMPDIR) was recorded as
    ``skipped``, exit 0, and later locks carried that over: the variant left the lock for good."""
    import kernelwheel.hub.towheel as towheel

    app = world.project("app", DEPS)
    real = towheel.write_wheel

    def full(spec: Any, out_dir: Path, **kwargs: Any) -> Path:
        if "cu130" in spec.version:
            raise WheelError("cannot write x.whl: No space left on device", hint="free space")
        return real(spec, out_dir, **kwargs)

    monkeypatch.setattr(towheel, "write_wheel", full)
    with pytest.raises(WheelError, match="No space left on device"):
        lock_project(LockRequest(app))
    assert not (app / LOCK_NAME).exists()


def test_a_folder_where_a_wheel_goes_is_refused_before_anything_is_moved_in(
    world: LockWorld, app: Path, lock: LockFile
) -> None:
    """A folder named as a locked wheel: before, the wheels sorted before it were moved in, then
    the rename failed (exit 1, naming the staging folder), and no requirements.txt was written."""
    last = max(locked_wheels(lock))
    (world.house / last).mkdir(parents=True)
    with pytest.raises(UsageError) as err:
        download(DownloadRequest(app, world.house))
    assert f"{world.house / last} is a folder, where download would put that wheel" in str(
        err.value
    )
    assert sorted(p.name for p in world.house.iterdir()) == [last]  # nothing moved in or left
    assert not any((world.house / last).iterdir())


def test_a_narrower_download_removes_the_earlier_downloads_other_builds(
    world: LockWorld, app: Path, lock: LockFile
) -> None:
    """Everything, then one torch's builds into the same folder: the other builds the first run
    wrote are removed (requirements.txt no longer lists them, and pip would take one whose label
    sorts higher, then fail its hash check); a wheel of the user's, or one altered, stays."""
    download(DownloadRequest(app, world.house))
    mine = world.house / "mine-1.0-py3-none-any.whl"
    mine.write_bytes(b"mine")
    narrowed = download(DownloadRequest(app, world.house, variants=("torch214-*",)))
    kept = sorted(w.filename for w in narrowed.wheels)
    assert wheels_in(world.house) == sorted([*kept, mine.name])
    assert sorted(p.name for p in narrowed.removed) == sorted(set(locked_wheels(lock)) - set(kept))
    text = narrowed.requirements.read_text()
    assert all(f"--hash=sha256:{sha256(world.house / name)}" in text for name in kept)
    # A locked wheel's name on other bytes is not download's own: left where it is.
    other = next(name for name in locked_wheels(lock) if name not in kept)
    (world.house / other).write_bytes(b"changed")
    assert download(DownloadRequest(app, world.house, variants=("torch214-*",))).removed == ()
    assert (world.house / other).read_bytes() == b"changed"
