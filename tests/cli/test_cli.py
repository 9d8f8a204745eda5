"""The CLI owns output and exit codes: clear messages, distinct codes, no traceback unless asked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.runners import Reply, ScriptedRunner
from support.tinykernel import write_tiny_kernel

from kernelwheel.builder import preflight
from kernelwheel.cli import main
from kernelwheel.compat.gpus import query_gpus
from kernelwheel.errors import ProjectError, UsageError

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("build", "matrix", "check"):
        assert command in out


def test_pytests_words_before_the_double_dash_are_shown_where_they_go(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, hinted in ((["test", "-x"], True), (["build", "-x"], False)):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2  # refused before anything runs
        err = capsys.readouterr().err
        assert "unrecognized arguments: -x" in err
        assert ("kernelwheel test [DIR] -- -x -k NAME" in err) is hinted


def test_missing_project_is_a_project_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["build", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert code == ProjectError.exit_code
    assert "build.toml" in err and "Traceback" not in err


def test_bad_build_toml_names_file_key_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "img2gray"
    shutil.copytree(IMG2GRAY, project, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    toml = project / "build.toml"
    toml.write_text(toml.read_text().replace("depends", "depend", 1))
    code = main(["build", str(project), "--print-build-identifiers"])
    err = capsys.readouterr().err
    assert code == ProjectError.exit_code
    assert str(toml) in err and "depend" in err and "did you mean 'depends'" in err


def test_traceback_only_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--traceback", "build", str(tmp_path / "nope")])
    assert "Traceback" in capsys.readouterr().err


def test_print_build_identifiers_default_and_selected(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default is this machine's (plan.defaults, tests/plan/test_defaults.py): CUDA where
    # nvidia-smi lists a GPU, else the CPU variant; no virtual environment's torch decides here,
    # and PyTorch's index answers (else the newest variant within reach: test_preflight.py).
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setattr(preflight, "_unreachable", lambda url: None)
    assert main(["build", str(IMG2GRAY), "--print-build-identifiers"]) == 0
    flavour = "cu132" if query_gpus().present else "cpu"
    assert capsys.readouterr().out.split() == [f"torch215-cxx11-{flavour}-x86_64-linux"]
    args = ["build", str(IMG2GRAY), "--print-build-identifiers", "--build", "torch21{3,4}-*cpu*"]
    assert main([*args, "--arch", "x86_64"]) == 0
    assert capsys.readouterr().out.split() == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch214-cxx11-cpu-x86_64-linux",
    ]


def test_variant_outside_the_matrix_is_refused_with_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["build", str(IMG2GRAY), "--variant", "torch27-cxx98-cu128-x86_64-linux"])
    assert code == UsageError.exit_code
    assert "cxx98" in capsys.readouterr().err


def test_selector_matching_nothing_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", str(IMG2GRAY), "--print-build-identifiers", "--build", "torch99-*"])
    assert code == UsageError.exit_code
    assert "torch99-*" in capsys.readouterr().err


def test_only_the_command_run_is_imported() -> None:
    """main() imports the module of the command it runs; --version none; help and unknown
    commands all of them (so they are listed)."""
    import subprocess
    import sys

    from kernelwheel.cli import COMMANDS, _commands_needed

    assert _commands_needed(["--version"]) == ()
    assert _commands_needed(["--traceback", "--version"]) == ()
    assert _commands_needed(["to-wheel", "org/repo", "1"]) == ("to_wheel",)
    assert _commands_needed(["--traceback", "build", "--version", "1.0", "."]) == ("build",)
    for argv in ([], ["--help"], ["-h", "build"], ["bogus"], ["--traceback"], ["--", "build"]):
        assert _commands_needed(argv) == COMMANDS, argv
    probe = (
        "import sys\nfrom kernelwheel.cli import main\ntry:\n    main(['--version'])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('kernelwheel.')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "kernelwheel.cli.build" not in loaded and "kernelwheel.builder" not in loaded
    assert "kernelwheel.hub" not in loaded and "kernelwheel.abi" not in loaded


def test_without_dir_the_project_is_found_from_its_subfolder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `kernelwheel build` and `matrix` with no DIR plan the project the current folder lies in,
    # its build.toml found upward (model.project.find_project_root), as DIR would.
    root = write_tiny_kernel(tmp_path / "tiny")
    every = ["--print-build-identifiers", "--build", "*"]
    assert main(["build", str(root), *every]) == 0
    expected = capsys.readouterr().out.split()
    assert expected and all("-cpu-" in name for name in expected)  # tiny-add: cpu only
    monkeypatch.chdir(root / "torch-ext" / "tiny_add")
    assert main(["build", *every]) == 0
    assert capsys.readouterr().out.split() == expected
    assert main(["matrix", "--json"]) == 0
    planned = [entry["name"] for entry in json.loads(capsys.readouterr().out)["include"]]
    assert sorted(planned) == sorted(expected)
    # outside any project: where it looked, and no traceback
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["build", *every]) == ProjectError.exit_code
    err = capsys.readouterr().err
    assert f"no build.toml found in {elsewhere} or a folder above it, up to " in err
    assert "Traceback" not in err


def test_without_dir_a_subfolder_s_build_writes_to_the_project_s_wheelhouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From torch-ext/<package>/ a ./wheelhouse would be packaged by the next build: the output
    # folder is the project's. No process runs: the build environment's creation fails at once
    # (a scripted runner), which leaves the variant's log where the wheel would go.
    root = write_tiny_kernel(tmp_path / "tiny")
    links = tmp_path / "links"  # the torch wheel "is here": no index is asked
    links.mkdir()
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.delenv("CXX", raising=False)

    def answer(cmd: list[str], cwd: Path | None) -> Reply:
        if "-print-file-name=libstdc++.so" in cmd:  # the compiler links libstdc++ dynamically
            return Reply(stdout="/usr/lib/gcc/x86_64-linux-gnu/12/libstdc++.so\n")
        return Reply(code=1, stderr="refused by the test\n")

    monkeypatch.chdir(root / "torch-ext" / "tiny_add")
    variant = "torch213-cxx11-cpu-x86_64-linux"
    args = ["build", "--variant", variant, "--cache-dir", str(tmp_path / "cache")]
    assert main(args, runner=ScriptedRunner(answer)) != 0
    assert (root / "wheelhouse" / "logs" / f"{variant}.log").is_file()
    assert not (root / "torch-ext" / "tiny_add" / "wheelhouse").exists()
