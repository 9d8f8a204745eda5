"""Small things users trip on: -V, --traceback after the command, --help stating the real
default, a shell glob that matched nothing, the matrix's torch column explained."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwheel import __version__
from kernelwheel.cli import main
from kernelwheel.errors import UsageError

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"


def help_of(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([flag])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"kernelwheel {__version__}"


@pytest.mark.parametrize("where", ["before", "after"])
def test_traceback_before_or_after_the_command(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["build", str(tmp_path / "nope")]
    args = ["--traceback", *args] if where == "before" else [*args, "--traceback"]
    main(args)
    assert "Traceback" in capsys.readouterr().err
    main(["build", str(tmp_path / "nope")])
    assert "Traceback" not in capsys.readouterr().err


def test_quiet_and_verbose_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["matrix", str(IMG2GRAY), "-q", "-v"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_build_help_states_the_real_default(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, "build")
    assert "ONE variant is built: the default for this machine" in text
    assert "--build '*' builds the whole matrix" in text
    assert "(default: none: the one default variant for this machine; '*' builds every" in text
    assert "--json" in text and "--verbose" in text and "--quiet" in text
    assert "(default: '*', the whole matrix)" in help_of(capsys, "matrix")


def test_every_command_that_writes_has_json(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("build", "to-wheel", "index", "lock", "download", "check", "matrix"):
        assert "--json" in help_of(capsys, command), command


def test_a_shell_glob_that_matched_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    # An unmatched glob reaches the program as the pattern itself.
    assert main(["check", f"{house}/*.whl"]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert f"no file matched '{house}/*.whl'" in err and "not a valid wheel" not in err
    assert main(["check", str(house / "a.whl")]) == UsageError.exit_code
    assert f"{house / 'a.whl'}: no such file" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["k.whl", "k.abi3.so"])
def test_a_link_that_loops_or_leads_nowhere_is_named_as_such(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check`` of a link to itself (or of two links to each other) said "no such file" of a
    file ``ls`` lists."""
    loop, a, b, dangling = (tmp_path / f"{p}{name}" for p in ("", "a", "b", "d"))
    loop.symlink_to(loop)
    a.symlink_to(b)
    b.symlink_to(a)
    dangling.symlink_to(tmp_path / "gone.whl")
    fix = "fix: point it at a wheel or .so file (ls -l shows where it points)"
    for path, what in ((loop, "loops"), (a, "loops"), (dangling, "points to no file")):
        assert main(["check", str(path)]) == UsageError.exit_code
        err = capsys.readouterr().err
        assert f"{path}: a symbolic link that {what} (-> {path.readlink()})" in err, err
        assert fix in err and "no such file" not in err


def test_a_shell_glob_in_a_folder_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "wheelhous"  # a typo: no such folder
    assert main(["check", f"{missing}/*.whl"]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert f"no file matched '{missing}/*.whl'" in err
    assert f"there is no folder {missing}" in err and "holds no such file" not in err


def test_matrix_explains_the_torch_column(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", str(IMG2GRAY), "--build", "torch214-*", "--arch", "x86_64"]) == 0
    out = capsys.readouterr().out
    assert "torch===2.14.1" in out and "torch==2.14.1+cpu" in out
    assert "torch===X.Y.Z (PEP 440 arbitrary equality)" in out
    assert "is PyPI's own build of that release" in out
    assert "torch===X.Y.Z" in help_of(capsys, "matrix")
