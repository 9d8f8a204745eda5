"""A build environment whose creation fails (pip finds nothing, an interrupt mid-install) leaves
nothing in the cache: the venv, about 26 MB with its pip, is removed (issue 38 family 10). The
venv and pip are real processes; pip runs offline (--no-index) and finds nothing."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelwheel._util import RUNNER, Runner
from kernelwheel.errors import ToolchainError
from kernelwheel.model.sources import PipSources
from kernelwheel.toolchain.envs import PipStep, make_env

OFFLINE = PipSources(no_index=True)
MISSING = PipStep(("kernelwheel-no-such-package-38",), "install the missing package")


def test_a_failed_pip_step_leaves_no_environment(tmp_path: Path) -> None:
    root, log = tmp_path / "envs" / "py-x", tmp_path / "env.log"
    with pytest.raises(ToolchainError, match="install the missing package"):
        make_env(root, Path(sys.executable), OFFLINE, [MISSING], log, RUNNER)
    assert "kernelwheel-no-such-package-38" in log.read_text()  # pip really ran in the venv
    assert not root.exists() and list(root.parent.iterdir()) == []


class _InterruptedInVenv(Runner):
    """Ctrl-C while ``python -m venv`` is writing: the folder is half made (no process runs)."""

    def checked(
        self, cmd: Sequence[str | Path], log: Path | None, what: str, hint: str | None = None
    ) -> None:
        root = Path(cmd[-1])
        (root / "lib").mkdir(parents=True)
        (root / "lib" / "half.py").write_text("x = 1\n")
        raise KeyboardInterrupt


def test_an_interrupt_mid_creation_leaves_no_environment(tmp_path: Path) -> None:
    root = tmp_path / "envs" / "py-x"
    with pytest.raises(KeyboardInterrupt):
        make_env(root, Path(sys.executable), OFFLINE, [MISSING], None, _InterruptedInVenv())
    assert not root.exists()


def test_a_failed_ccache_install_leaves_no_tool_folder(tmp_path: Path) -> None:
    from kernelwheel.model.recipes import load_ccache_recipe
    from kernelwheel.toolchain.compiler_cache import select_ccache

    recipe = load_ccache_recipe()
    no_host = str(tmp_path / "no-bin")  # no ccache on this PATH: PyPI's is installed
    with pytest.raises(ToolchainError, match="the compiler cache"):
        select_ccache(recipe, tmp_path, no_host, None, OFFLINE, tmp_path / "ccache.log", RUNNER)
    assert [p.name for p in (tmp_path / "tools").iterdir() if not p.name.endswith(".lock")] == []
