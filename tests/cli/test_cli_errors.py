"""Errors instead of tracebacks (issue 13 items 8 and 9): unusable output folders, a wheel with an
invalid Version in the index, `build --build '*'` on a project with no kernels, a lock kernel
with no variants. Each is a documented exit code and a message naming the thing and the fix."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag

from kernelwheel.cli import main
from kernelwheel.errors import ProjectError, UsageError, WheelError
from kernelwheel.wheels import WheelSpec, write_wheel


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


@pytest.fixture
def afile(tmp_path: Path) -> Path:
    path = tmp_path / "afile"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("below", [False, True], ids=["is-a-file", "under-a-file"])
def test_to_wheel_output_that_is_a_file(
    tmp_path: Path, afile: Path, below: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.gitrepo import HubRepo

    repo = HubRepo(tmp_path / "img2gray")
    repo.write_file("build/torch-universal/img2gray/__init__.py", b"")
    repo.commit("build")
    out = afile / "sub" if below else afile
    code, err = _run(
        capsys, "to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)
    )
    assert code == UsageError.exit_code, err
    assert str(out) in err and "--output-dir" in err and "fix:" in err
    assert afile.read_text() == "not a folder\n"


def test_index_output_under_a_file(
    tmp_path: Path, afile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "house"
    _wheel(house, "1.0")
    code, err = _run(capsys, "index", str(house), "-o", str(afile / "simple"))
    assert code == UsageError.exit_code, err
    assert "--output" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_output_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    house = tmp_path / "house"
    _wheel(house, "1.0")
    code, err = _run(capsys, "index", str(house), "-o", str(ro / "simple"))
    assert code == UsageError.exit_code, err
    assert "not writable" in err


def _wheel(folder: Path, version: str) -> Path:
    spec = WheelSpec(name="demo", version="1.0", tag=Tag("py3", "none", "any"), files={})
    wheel = write_wheel(spec, folder)
    if version == "1.0":
        return wheel
    # Rewrite METADATA's Version (the file name keeps 1.0).
    with zipfile.ZipFile(wheel) as zf:
        entries = [(i, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(wheel, "w") as zf:
        for info, data in entries:
            if info.filename.endswith("/METADATA"):
                data = data.replace(b"Version: 1.0", f"Version: {version}".encode())
            zf.writestr(info, data)
    return wheel


def test_index_of_a_wheel_with_an_invalid_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "house"
    _wheel(house, "not a version!")
    code, err = _run(capsys, "index", str(house), "-o", str(tmp_path / "simple"))
    assert code == WheelError.exit_code, err
    assert "demo-1.0-py3-none-any.whl" in err and "'not a version!'" in err
    assert not (tmp_path / "simple").exists()


def test_build_star_on_a_project_without_kernels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "build.toml").write_text(
        '[general]\nname = "demo"\nversion = "1.0"\nbackends = ["cuda"]\n'
    )
    (tmp_path / "torch-ext" / "demo").mkdir(parents=True)
    (tmp_path / "torch-ext" / "demo" / "__init__.py").write_text("")
    out = tmp_path / "out"
    code, err = _run(capsys, "build", str(tmp_path), "--build", "*", "-o", str(out))
    # A project without kernels is pure Python: one py3-none-any wheel, not an error.
    assert code == 0, err
    assert [p.name for p in out.glob("*.whl")] == ["demo-1.0-py3-none-any.whl"]


def test_download_of_a_lock_kernel_with_no_variants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernelwheel import __version__
    from kernelwheel.locking.lockfile import LOCK_NAME, LockedKernel, LockFile
    from kernelwheel.wheels import source_date_epoch

    kernel = LockedKernel(
        repo="acme/relu",
        requested="1",
        ref="refs/heads/v1",
        commit="a" * 40,
        version="1.4.0",
        variants=(),
        skipped=("torch27-cxx11-cu128-riscv64-linux",),
    )
    lock = LockFile(
        kernelwheel=__version__, source_date_epoch=source_date_epoch(), kernels=(kernel,)
    )
    (tmp_path / LOCK_NAME).write_text(lock.dumps())
    house = tmp_path / "house"
    code, err = _run(capsys, "download", str(tmp_path), "--wheelhouse", str(house))
    assert code == ProjectError.exit_code, err
    assert "locks no variant of acme/relu" in err and "riscv64" in err
    fix = err.split("fix:", 1)[1]
    assert "kernelwheel lock" in fix and "acme/relu" in fix
    assert not house.exists() or not any(house.iterdir())
