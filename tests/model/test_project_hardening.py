"""build.toml's hostile cases (issue 13 items 8-10): a folder named build.toml, a dangling or
escaping source symlink, an absurdly long name, deeply nested arrays. Each is a ProjectError
naming the file, the key and the fix; never a traceback or a wrong hint."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from model.test_project import VALID, load_error, make_project

from kernelwheel.cli import main
from kernelwheel.errors import ProjectError


def test_build_toml_that_is_a_folder(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", None)
    (root / "build.toml").mkdir()
    err = load_error(root)
    assert "build.toml: is a folder, not a file" in str(err) and "not found" not in str(err)


def test_dangling_source_symlink_names_its_target(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", VALID)
    (root / "csrc/img2gray.cu").unlink()
    os.symlink("gone/img2gray.cu", root / "csrc/img2gray.cu")
    err = load_error(root)
    assert err.key == "kernel.img2gray.src"
    assert "is a symlink to 'gone/img2gray.cu', which does not exist" in str(err)
    assert "did you mean" not in str(err)


@pytest.mark.parametrize("where", ["file", "folder"])
def test_source_symlinks_leading_outside_the_project_are_refused(
    tmp_path: Path, where: str
) -> None:
    """Decision: refused (not followed with a warning); see docs/options.md."""
    outside = tmp_path / "shared"
    outside.mkdir()
    (outside / "img2gray.cu").write_text("// outside\n")
    root = make_project(tmp_path / "p", VALID)
    if where == "file":
        (root / "csrc/img2gray.cu").unlink()
        os.symlink(outside / "img2gray.cu", root / "csrc/img2gray.cu")
    else:
        for f in (root / "csrc").iterdir():
            f.unlink()
        (root / "csrc").rmdir()
        os.symlink(outside, root / "csrc")
    err = load_error(root)
    assert err.key == "kernel.img2gray.src"
    assert "leads outside the project root through a symlink" in str(err)
    assert str(outside.resolve()) in str(err)


def test_a_symlink_inside_the_project_is_fine(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", VALID)
    (root / "csrc/real.cu").write_text("// real\n")
    (root / "csrc/img2gray.cu").unlink()
    os.symlink("real.cu", root / "csrc/img2gray.cu")
    from kernelwheel.model.project import load_project

    assert load_project(root).name == "img2gray"


def test_a_300_character_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "a" * 300
    root = make_project(tmp_path / "p", f'[general]\nname = "{name}"\n', package=None)
    err = load_error(root)
    assert err.key == "general.name" and "300 characters long" in str(err)
    assert main(["matrix", str(root)]) == ProjectError.exit_code
    assert "Traceback" not in capsys.readouterr().err


def test_deeply_nested_arrays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = "[" * 5000 + "]" * 5000
    root = make_project(tmp_path / "p", VALID + f"\n[kernel.x]\nsrc = {deep}\n")
    err = load_error(root)
    assert "nested too deeply" in str(err) and str(root / "build.toml") in str(err)
    assert main(["matrix", str(root)]) == ProjectError.exit_code
    assert "Traceback" not in capsys.readouterr().err


def test_a_utf8_bom_is_named(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", None)
    (root / "build.toml").write_bytes(b"\xef\xbb\xbf" + VALID.encode())
    err = load_error(root)
    assert "byte order mark" in str(err) and "Invalid statement" not in str(err)
    assert "without BOM" in str(err)
