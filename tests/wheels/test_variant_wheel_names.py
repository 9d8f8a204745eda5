"""PEP 825 variant wheels that kernelwheel wrote (``index --wheel-variants``:
``img2gray-0.1.0-cp310-abi3-manylinux_2_28_x86_64-cu130.whl``, a variant label after the
platform) are read back by ``check`` and ``index`` (issue 38 family 10: both refused the name),
through the one wheel-name parser (model/wheelname)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename

from kernelwheel.cli import main
from kernelwheel.model.wheelname import parse_wheel_name
from kernelwheel.wheels import WheelSpec, write_wheel

TAG = Tag("cp310", "abi3", "manylinux_2_28_x86_64")


@pytest.fixture(scope="module")
def variant_wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("variant-names")
    house = root / "wh"
    for flavour in ("cu126", "cu130"):
        files = {"img2gray/__init__.py": f"FLAVOUR = {flavour!r}\n".encode()}
        write_wheel(WheelSpec("img2gray", f"0.1.0+torch2.14.{flavour}.cxx11", TAG, files), house)
    assert main(["index", str(house), "-o", str(root / "site"), "--wheel-variants"]) == 0
    found = sorted((root / "site" / "torch2.14" / "variants").rglob("*.whl"))
    assert [parse_wheel_name(w.name).label for w in found] == ["cu126", "cu130"]
    return found


def test_check_accepts_the_variant_wheels_kernelwheel_wrote(
    variant_wheels: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", *map(str, variant_wheels)])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "not a valid wheel file name" not in out + err


def test_index_accepts_the_variant_wheels_kernelwheel_wrote(
    variant_wheels: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "wh"
    house.mkdir()
    for wheel in variant_wheels:
        (house / wheel.name).write_bytes(wheel.read_bytes())
    code = main(["index", str(house), "-o", str(tmp_path / "site")])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    listed = (tmp_path / "site" / "all" / "img2gray" / "index.html").read_text()
    assert all(w.name in listed for w in variant_wheels)
    assert "wheel variant (label cu126, PEP 825)" in out + err  # why not in a flavour


def test_the_parser_reads_labels_and_refuses_what_is_no_wheel_name() -> None:
    plain = parse_wheel_name("a-1.0-cp310-abi3-linux_x86_64.whl")
    assert plain.label is None and str(plain.version) == "1.0"
    built = parse_wheel_name("a-1.0-1-cp310-abi3-linux_x86_64.whl")  # a build tag, no label
    assert built.label is None and built.build == (1, "")
    labelled = parse_wheel_name("a-1.0-1-cp310-abi3-linux_x86_64-cu126.whl")
    assert labelled.label == "cu126" and labelled.build == (1, "")
    for bad in (
        "a-1.0-cp310-abi3-linux_x86_64-CU126.whl",  # a label is lowercase
        "a-1.0-cp310-abi3-linux_x86_64-cu-126.whl",  # one part too many
        "a-1.0-cp310-abi3.whl",
        "a-1.0-cp310-abi3-linux_x86_64-cu126.zip",
    ):
        with pytest.raises(InvalidWheelFilename):
            parse_wheel_name(bad)
