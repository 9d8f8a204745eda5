"""The pytest `kernelwheel test` brings where the tests run in the build environment: pinned and
hashed in recipes/pytest.toml, installed once into kernelwheel's cache (never into the shared
environment), found by the tests through PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelwheel._util import Runner
from kernelwheel.errors import ToolchainError
from kernelwheel.model.recipes import RecipeError, load_pytest_requirements
from kernelwheel.model.sources import PipSources
from kernelwheel.toolchain.pytest_tool import provision_pytest


def test_the_bundled_pins_are_exact_and_hashed() -> None:
    lines = load_pytest_requirements()
    names = [line.split("==")[0] for line in lines]
    assert names[0] == "pytest" and len(set(names)) == len(names)
    for line in lines:
        assert "--hash=sha256:" in line, line


@pytest.mark.parametrize(
    "line", ["pytest", "pytest>=9 --hash=sha256:" + "0" * 64, "pytest==9.2.0", ""]
)
def test_an_unpinned_or_unhashed_line_is_refused_naming_the_file(tmp_path: Path, line: str) -> None:
    (tmp_path / "pytest.toml").write_text(f'schema = 1\n[pytest]\nrequirements = ["{line}"]\n')
    with pytest.raises(RecipeError) as info:
        load_pytest_requirements(tmp_path)
    assert "pytest.toml" in str(info.value) and "requirements" in str(info.value)


class _Counting(Runner):
    def __init__(self) -> None:
        self.calls = 0

    def checked(
        self, cmd: Sequence[str | Path], log: Path | None, what: str, hint: str | None = None
    ) -> None:
        self.calls += 1
        super().checked(cmd, log, what, hint)


def _imports_pytest(python: Path, path: Path | None) -> str | None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    proc = subprocess.run(
        [python, "-c", "import pytest; print(pytest.__version__)"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.mark.slow
def test_installed_once_beside_the_environment_never_into_it(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", tmp_path / "env"], check=True)
    python = tmp_path / "env" / "bin" / "python"
    assert _imports_pytest(python, None) is None
    runner = _Counting()
    lines = load_pytest_requirements()
    root = provision_pytest(python, tmp_path / "cache", lines, PipSources(), runner)
    assert root.parent == tmp_path / "cache" / "tools" and runner.calls == 1
    pinned = lines[0].split("==")[1].split()[0]
    assert _imports_pytest(python, root) == pinned
    assert _imports_pytest(python, None) is None  # the environment itself is unchanged
    assert provision_pytest(python, tmp_path / "cache", lines, PipSources(), runner) == root
    assert runner.calls == 1  # made once


@pytest.mark.slow
def test_a_venv_without_pip_gets_it_through_kernelwheels_pip(tmp_path: Path) -> None:
    # uv venv makes environments without pip: the tools are installed by kernelwheel's pip,
    # run for that interpreter (its markers, its version).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "env"], check=True)
    python = tmp_path / "env" / "bin" / "python"
    assert subprocess.run([python, "-c", "import pip"], capture_output=True).returncode != 0
    lines = load_pytest_requirements()
    root = provision_pytest(python, tmp_path / "cache", lines, PipSources())
    assert _imports_pytest(python, root) == lines[0].split("==")[1].split()[0]
    assert _imports_pytest(python, None) is None


@pytest.mark.slow
def test_a_wrong_hash_fails_and_leaves_nothing(tmp_path: Path) -> None:
    lines = list(load_pytest_requirements())
    lines[0] = lines[0].split("--hash=")[0] + "--hash=sha256:" + "0" * 64
    with pytest.raises(ToolchainError, match="install pytest for the tests"):
        provision_pytest(Path(sys.executable), tmp_path / "cache", lines, PipSources())
    assert [p.name for p in (tmp_path / "cache" / "tools").iterdir()] == [
        p.name for p in (tmp_path / "cache" / "tools").glob("*.lock*")
    ]
