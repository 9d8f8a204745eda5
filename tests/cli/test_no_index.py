"""--no-index end to end, short of a real build: the pip command line the environment step
runs, from the flag, the environment variable or pyproject.toml. pip is intercepted at the one
place build environments run it (envs.run_checked), so nothing is downloaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.variants import TORCH214_CPU as CPU

import kernelwheel.builder.envs as envs
from kernelwheel.builder import preflight
from kernelwheel.cli import main
from kernelwheel.errors import ToolchainError

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"


@pytest.fixture
def pip_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake(cmd: list[str], log: Path | None, what: str, hint: str | None = None) -> None:
        calls.append([str(c) for c in cmd])
        if "pip" in cmd:
            raise ToolchainError(f"failed to {what}: stopped by the test (log: {log})")

    monkeypatch.setattr(envs, "run_checked", fake)
    return calls


def build(tmp_path: Path, *flags: str, project: Path = IMG2GRAY) -> int:
    args = ["build", str(project), "--variant", CPU, "-o", str(tmp_path / "wh")]
    return main([*args, "--cache-dir", str(tmp_path / "cache"), *flags])


def pip_install(calls: list[list[str]]) -> list[str]:
    (venv, pip) = calls
    assert venv[1:3] == ["-m", "venv"]
    assert pip[1:4] == ["-m", "pip", "install"]
    return pip


def test_default_build_uses_pypi_and_the_recipe_index(
    tmp_path: Path, pip_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip is faked: PyTorch's CPU index counts as reachable (builder.preflight asks it first)
    monkeypatch.setattr(preflight, "_unreachable", lambda url: None)
    assert build(tmp_path) == ToolchainError.exit_code
    pip = pip_install(pip_calls)
    assert "--no-index" not in pip
    assert pip[pip.index("--extra-index-url") + 1].startswith("https://download.pytorch.org/")
    assert "torch==2.14.1+cpu" in pip


def test_no_index_flag_gives_pip_only_find_links(
    tmp_path: Path, pip_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    assert build(tmp_path, "--no-index", "--find-links", str(wheels)) == ToolchainError.exit_code
    pip = pip_install(pip_calls)
    assert pip[pip.index("--no-index") :][:3] == ["--no-index", "--find-links", str(wheels)]
    assert "--index-url" not in pip and "--extra-index-url" not in pip
    err = capsys.readouterr().err
    assert f"log: {tmp_path / 'wh' / 'logs' / f'{CPU}.log'}" in err  # the failure names the log


def test_no_index_from_the_environment(
    tmp_path: Path, pip_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWHEEL_NO_INDEX", "1")
    monkeypatch.setenv("KERNELWHEEL_FIND_LINKS", "/srv/wheels")
    assert build(tmp_path) == ToolchainError.exit_code
    pip = pip_install(pip_calls)
    assert "--no-index" in pip and pip[pip.index("--find-links") + 1] == "/srv/wheels"
    assert "--extra-index-url" not in pip


def test_no_index_from_pyproject(tmp_path: Path, pip_calls: list[list[str]]) -> None:
    project = tmp_path / "img2gray"
    shutil.copytree(IMG2GRAY, project, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (project / "pyproject.toml").write_text(
        '[tool.kernelwheel]\nno-index = true\nfind-links = ["wheels"]\n'
    )
    assert build(tmp_path, project=project) == ToolchainError.exit_code
    pip = pip_install(pip_calls)
    assert "--no-index" in pip and pip[pip.index("--find-links") + 1] == str(project / "wheels")
    assert "--extra-index-url" not in pip
