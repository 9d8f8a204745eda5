"""--no-index end to end, short of a real build: the pip command line the environment step
runs, from the flag, the environment variable or pyproject.toml. The build is given a runner
that starts nothing (support.runners), so nothing is downloaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.runners import Reply, ScriptedRunner
from support.variants import TORCH214_CPU as CPU

from kernelwheel.builder import preflight
from kernelwheel.cli import main
from kernelwheel.errors import ToolchainError

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"


class PipRunner(ScriptedRunner):
    """Creates no venv and installs nothing: pip fails, so the build stops after its first pip
    command, which the tests read."""

    def __init__(self) -> None:
        super().__init__(self._answer)

    @staticmethod
    def _answer(cmd: list[str], cwd: Path | None) -> Reply:
        if "pip" in cmd:
            return Reply(code=1, stderr="stopped by the test")
        if cmd[-1].startswith("-print-file-name="):  # the compiler has a shared libstdc++
            return Reply(stdout="/usr/lib/" + cmd[-1].split("=", 1)[1])
        return Reply(code=0 if "venv" in cmd else 127)

    @property
    def calls(self) -> list[list[str]]:
        """The environment's commands (not git's, which the version reads)."""
        return [c for c in self.commands if "venv" in c or "pip" in c]


@pytest.fixture
def pip_calls() -> PipRunner:
    return PipRunner()


def build(tmp_path: Path, runner: PipRunner, *flags: str, project: Path = IMG2GRAY) -> int:
    args = ["build", str(project), "--variant", CPU, "-o", str(tmp_path / "wh")]
    return main([*args, "--cache-dir", str(tmp_path / "cache"), *flags], runner)


def pip_install(calls: list[list[str]]) -> list[str]:
    (venv, pip) = calls
    assert venv[1:3] == ["-m", "venv"]
    assert pip[1:4] == ["-m", "pip", "install"]
    return pip


def test_default_build_uses_pypi_and_the_recipe_index(
    tmp_path: Path, pip_calls: PipRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip is faked: PyTorch's CPU index counts as reachable (builder.preflight asks it first)
    monkeypatch.setattr(preflight, "_unreachable", lambda url: None)
    assert build(tmp_path, pip_calls) == ToolchainError.exit_code
    pip = pip_install(pip_calls.calls)
    assert "--no-index" not in pip
    assert pip[pip.index("--extra-index-url") + 1].startswith("https://download.pytorch.org/")
    assert "torch==2.14.1+cpu" in pip


def test_no_index_flag_gives_pip_only_find_links(
    tmp_path: Path, pip_calls: PipRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    assert (
        build(tmp_path, pip_calls, "--no-index", "--find-links", str(wheels))
        == ToolchainError.exit_code
    )
    pip = pip_install(pip_calls.calls)
    assert pip[pip.index("--no-index") :][:3] == ["--no-index", "--find-links", str(wheels)]
    assert "--index-url" not in pip and "--extra-index-url" not in pip
    err = capsys.readouterr().err
    assert f"log: {tmp_path / 'wh' / 'logs' / f'{CPU}.log'}" in err  # the failure names the log


def test_no_index_from_the_environment(
    tmp_path: Path, pip_calls: PipRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWHEEL_NO_INDEX", "1")
    monkeypatch.setenv("KERNELWHEEL_FIND_LINKS", "/srv/wheels")
    assert build(tmp_path, pip_calls) == ToolchainError.exit_code
    pip = pip_install(pip_calls.calls)
    assert "--no-index" in pip and pip[pip.index("--find-links") + 1] == "/srv/wheels"
    assert "--extra-index-url" not in pip


def test_no_index_from_pyproject(tmp_path: Path, pip_calls: PipRunner) -> None:
    project = tmp_path / "img2gray"
    shutil.copytree(IMG2GRAY, project, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (project / "pyproject.toml").write_text(
        '[tool.kernelwheel]\nno-index = true\nfind-links = ["wheels"]\n'
    )
    assert build(tmp_path, pip_calls, project=project) == ToolchainError.exit_code
    pip = pip_install(pip_calls.calls)
    assert "--no-index" in pip and pip[pip.index("--find-links") + 1] == str(project / "wheels")
    assert "--extra-index-url" not in pip
