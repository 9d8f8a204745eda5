"""Issue 30, for ``kernelwheel index``: it owns only what it wrote (a manifest), refuses an input
inside its output, never deletes a user's file, replaces atomically; and every wheel passes the
record rule (streamed, ratio-capped) before it is published. Each reproduction from the issue's
text is a test, with tampered wheels made here with zipfile."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.installkit import kernel_wheel
from support.tamper import add_zero_member, rewrite

from kernelwheel.cli import main
from kernelwheel.errors import KernelwheelError, UsageError, WheelError
from kernelwheel.wheels.index import build_index
from kernelwheel.wheels.site import LEGACY_MARKER, MANIFEST

LOCALS = ("torch2.14.cu130.cxx11", "torch2.14.cpu.cxx11")


def _house(root: Path, *locals_: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for local in locals_ or LOCALS:
        kernel_wheel(root, local)
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_an_input_wheelhouse_inside_the_output_is_refused_and_kept(tmp_path: Path) -> None:
    """``index SITE/incoming -o SITE`` lost ``incoming/``."""
    site = tmp_path / "site"
    incoming = _house(site / "incoming")
    before = _tree(incoming)
    assert main(["index", str(incoming), "-o", str(site)]) == UsageError.exit_code
    assert _tree(incoming) == before and sorted(p.name for p in site.iterdir()) == ["incoming"]
    with pytest.raises(UsageError, match="inside --output"):
        build_index(site, site)  # the output itself as input


def test_a_cname_and_other_user_files_survive_every_run(tmp_path: Path) -> None:
    """``index WH -o SITE`` deleted a ``CNAME`` file (and everything else SITE held)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "CNAME").write_text("kernels.example.org\n")
    (site / "docs").mkdir()
    (site / "docs" / "about.html").write_text("mine")
    house = _house(tmp_path / "wh")
    first = build_index(house, site)
    assert (site / "CNAME").read_text() == "kernels.example.org\n"
    manifest = json.loads((site / MANIFEST).read_text())
    assert "CNAME" not in manifest["entries"] and "docs" not in manifest["entries"]
    assert {"index.html", "files", "all", "cu130", "cpu"} <= set(manifest["entries"])
    # A second run with fewer flavours removes the flavour it wrote before, nothing else.
    (house / next(p.name for p in house.glob("*cu130*"))).unlink()
    second = build_index(house, site)
    assert "cu130" in first.flavours and "cu130" not in second.flavours
    assert not (site / "cu130").exists() and (site / "cpu" / "index.html").exists()
    assert (site / "CNAME").exists() and (site / "docs" / "about.html").read_text() == "mine"
    leftovers = [
        p.name for p in site.iterdir() if p.name.startswith(".kernelwheel-") and p.is_dir()
    ]
    assert leftovers == []


def test_a_user_file_in_the_way_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "cpu").mkdir(parents=True)
    (site / "cpu" / "notes.txt").write_text("mine")
    code = main(["index", str(_house(tmp_path / "wh")), "-o", str(site)])
    assert code == UsageError.exit_code
    assert _tree(site) == {"cpu/notes.txt": b"mine"}  # nothing written, nothing removed


def test_an_index_from_an_older_kernelwheel_is_refused(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / LEGACY_MARKER).write_text("written by 'kernelwheel index'; replaced on every run\n")
    (site / "CNAME").write_text("x")
    with pytest.raises(UsageError, match="older kernelwheel"):
        build_index(_house(tmp_path / "wh"), site)
    assert (site / "CNAME").exists()


def _tampered(kind: str, house: Path) -> Path:
    wheel = next(house.glob("*cu130*"))
    package = "img2gray/__init__.py"
    if kind == "dotdot":
        return rewrite(wheel, add=(("../evil.py", b"import os\n"),))
    if kind == "absolute":
        return rewrite(wheel, add=(("/tmp/evil.py", b"import os\n"),))
    if kind == "duplicate":
        return rewrite(wheel, add=((package, b"print('second copy')\n"),), listed=False)
    if kind == "hash":
        return rewrite(wheel, replace={package: b"print('changed after RECORD')\n"})
    assert kind == "zeros"
    return add_zero_member(wheel, "img2gray/zeros.bin", 1 << 30)


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("dotdot", "../evil.py: escapes the install folder"),
        ("absolute", "/tmp/evil.py: escapes the install folder"),
        ("duplicate", "img2gray/__init__.py: appears 2 times in the archive"),
        ("hash", "img2gray/__init__.py: does not match its RECORD hash"),
        ("zeros", "img2gray/zeros.bin: would unpack"),
    ],
)
def test_index_refuses_tampered_wheels_and_keeps_the_published_index(
    tmp_path: Path, kind: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``index`` published wheels with ``../`` or absolute members, duplicate members, wrong
    RECORD hashes, or a 1 GiB zero member. Now the run stops naming the wheel and the problem,
    and the index published before is left byte for byte."""
    house = _house(tmp_path / "wh")
    site = tmp_path / "site"
    build_index(house, site)
    before = _tree(site)
    bad = _tampered(kind, house)
    assert main(["index", str(house), "-o", str(site)]) == WheelError.exit_code
    err = capsys.readouterr().err
    assert bad.name in err and named in err and "Traceback" not in err
    assert _tree(site) == before


def test_a_run_interrupted_between_swaps_is_finished_by_the_next(tmp_path: Path) -> None:
    """The manifest lists old and new entries while they are swapped: an entry moved in by a
    run that died is still owned, so the next run replaces it instead of refusing it."""
    house = _house(tmp_path / "wh", "torch2.14.cpu.cxx11")
    site = tmp_path / "site"
    build_index(house, site)
    # What a run that died after moving in a new flavour but before the final manifest leaves:
    shutil.copytree(site / "cpu", site / "cu130")
    data = json.loads((site / MANIFEST).read_text())
    data["entries"] = sorted([*data["entries"], "cu130"])
    (site / MANIFEST).write_text(json.dumps(data))
    _house(house, "torch2.14.cu130.cxx11")
    result = build_index(house, site)
    assert "cu130" in result.flavours and "cu130" in (site / "cu130" / "index.html").read_text()


def test_a_full_disk_leaves_no_output_folder_and_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``index`` on a full disk left its empty output folder (and the folders above it it had
    made) behind; now they go, as the staged index does, and the fix is the full disk's."""
    import errno

    from kernelwheel.wheels import index

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(index, "_write_tree", full)
    house = _house(tmp_path / "house")
    assert main(["index", str(house), "-o", str(tmp_path / "www" / "simple")]) == 1
    err = capsys.readouterr().err
    assert f"cannot write the index into {tmp_path / 'www' / 'simple'}" in err
    assert "free space on that disk" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["house"]
    # an output folder that was there stays, with the user's file in it
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "CNAME").write_text("example.org\n")
    with pytest.raises(KernelwheelError, match="No space left"):
        build_index(house, tmp_path / "site")
    assert _tree(tmp_path / "site") == {"CNAME": b"example.org\n"}
