"""to-wheel on hostile repos (issue 13): variant folders that collide on one wheel name, a name
the file system refuses, a deeply nested metadata.json: that variant is reported, the others are
written, never a traceback or half a result."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gitrepo import HubRepo, variant_files
from support.shared import leftovers, wheels_in
from support.variants import TORCH27_CPU as CPU
from support.variants import TORCH27_CU128 as CU128

from kernelwheel.cli import main
from kernelwheel.errors import WheelError


def test_two_folders_naming_one_wheel_are_both_refused(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decision: refuse both (reported with the other's name), never a crash or half a result;
    the other variants are written."""
    repo = HubRepo(tmp_path / "img2gray")
    alias = "torch27-cxx11-cu12.8-x86_64-linux"  # parses to the same variant as cu128
    repo.set_variants(
        [
            variant_files(CU128, so_cache=so_cache),
            variant_files(alias, so_cache=so_cache, salt="alias"),
            variant_files(CPU, so_cache=so_cache),
        ]
    )
    repo.commit("build")
    out = tmp_path / "out"
    code = main(["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" not in err
    assert wheels_in(out) == ["img2gray-1.0+torch2.7.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]
    assert leftovers(out) == []
    assert f"{CU128}: not converted" in err and f"{alias}: not converted" in err
    assert f"same wheel as {alias}" in err and f"same wheel as {CU128}" in err
    assert "img2gray-1.0+torch2.7.cu128.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl" in err


def test_a_name_the_file_system_refuses_rejects_that_variant_only(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    long = "torch2" + "7" * 200 + "-cxx11-cu128-x86_64-linux"  # a folder fits, the wheel not
    repo.set_variants(
        [variant_files(CPU, so_cache=so_cache), variant_files(long, so_cache=so_cache)]
    )
    repo.commit("build")
    out = tmp_path / "out"
    code = main(["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == WheelError.exit_code, err
    assert "Traceback" not in err
    assert f"{long}: not converted: cannot write the wheel" in err
    assert "too long" in err.lower()
    assert len(wheels_in(out)) == 1 and leftovers(out) == []


def test_deeply_nested_metadata_json_rejects_that_variant_only(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    bad = variant_files(CU128, so_cache=so_cache)
    bad.files["metadata.json"] = b'{"python-depends": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    repo.set_variants([variant_files(CPU, so_cache=so_cache), bad])
    repo.commit("build")
    out = tmp_path / "out"
    code = main(["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 9, err
    assert "Traceback" not in err
    assert f"{CU128}: not converted" in err and "metadata.json" in err and "nested" in err
    assert len(wheels_in(out)) == 1 and leftovers(out) == []


def test_a_full_disk_names_the_wheel_and_the_option_not_the_staging_folder(
    so_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full disk while a converted wheel was written said "cannot write <wheel> into
    <out>/.kernelwheel-to-wheel-…" (a folder the user never made) and no option."""
    import errno
    import os

    from kernelwheel.wheels import writer

    def full(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer, "_write_member", full)
    repo = HubRepo(tmp_path / "img2gray")
    repo.set_variants([variant_files(CPU, so_cache=so_cache)])
    repo.commit("build")
    out = tmp_path / "out"
    code = main(["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == WheelError.exit_code, err
    assert "Traceback" not in err and ".kernelwheel-" not in err, err
    wheel = "img2gray-1.0+torch2.7.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    assert f"cannot write {wheel} into {out}: No space left on device" in err, err
    assert "free space on that disk" in err and "--output-dir" in err, err
    assert wheels_in(out) == [] and leftovers(out) == []
