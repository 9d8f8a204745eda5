"""to-wheel's messages and names (issue 13): a shared object that is not ELF, a failing ABI
check marked as failed, exit code 7 documented, and the package name of a flat layout taken from
the content rather than the clone's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, make_repo, variant_files
from support.shared import leftovers, wheels_in
from support.variants import TORCH27_CU128 as CU128

from kernelwheel.cli import main
from kernelwheel.errors import WheelError
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels


def test_a_so_that_is_not_elf_fails_the_abi_check(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    repo.set_variants(
        [variant_files(CU128, so_cache=so_cache, binary=("_img2gray_0abc", b"not an ELF" * 10))]
    )
    repo.commit("build")
    out = tmp_path / "out"
    code = main(["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 8, captured.err
    assert "not an ELF" in captured.err
    assert wheels_in(out) == [] and leftovers(out) == []
    assert "ABI check" not in captured.out or "✓ img2gray: ABI check" not in captured.out


def test_an_abi_check_that_cannot_run_is_marked_failed(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "img2gray", [CU128], so_cache=so_cache, tag=None)

    def broken(wheel: Path, files: object) -> object:
        raise WheelError(f"{wheel.name}: cannot read")

    from kernelwheel.cli.ui import ConsoleUI

    ui = ConsoleUI()
    result = to_wheels(
        ToWheelRequest(str(repo.root), "1.0", revision="main", output_dir=tmp_path / "o"),
        ui,
        abi_check=broken,  # type: ignore[arg-type]
    )
    out = capsys.readouterr().out
    assert result.exit_code == WheelError.exit_code
    # Result lines (with a duration), not the start lines the progress display prints first.
    lines = [line for line in out.splitlines() if "ABI check (" in line]
    assert lines and all(ui.ok_mark not in line for line in lines), out
    assert all(ui.fail_mark in line for line in lines), out


def test_exit_code_7_is_documented() -> None:
    from kernelwheel.cli import make_parser

    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    help_text = sub.choices["to-wheel"].format_help()  # type: ignore[union-attr]
    assert "7 a wheel could not be written" in help_text


@pytest.mark.parametrize(
    ("clone", "flag", "expected"),
    [
        ("act-clone", None, "activation"),  # the shim folder and the _ops namespace agree
        ("act-clone", "relu2", "relu2"),  # --name overrides
    ],
)
def test_flat_layout_takes_the_package_name_from_the_content(
    so_cache: Path, tmp_path: Path, clone: str, flag: str | None, expected: str
) -> None:
    repo = make_repo(
        tmp_path / clone, [CU128], so_cache=so_cache, layout="flat", package="activation"
    )
    meta = json.loads((repo.root / f"build/{CU128}/metadata.json").read_text())
    assert "name" not in meta  # the package name can only come from the content
    out = tmp_path / "out"
    extra = ["--name", flag] if flag else []
    assert main(["to-wheel", str(repo.root), "1.1.2", "-o", str(out), *extra]) == 0
    (wheel,) = wheels_in(out)
    assert wheel.startswith(f"{expected}-1.1.2+"), wheel
    from support.wheelread import read_wheel

    files = read_wheel(out / wheel).files
    assert f"{expected}/_ops.py" in files and not any(f.startswith("act_clone") for f in files)
