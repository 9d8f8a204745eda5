"""`kernelwheel init` for real: a new cpu project builds as written, its wheel installs with
pip, and the test it came with passes against the installed package (no edit anywhere)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT
from support.layered import LayeredVenv

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

MakeVenv = Callable[..., LayeredVenv]


def test_init_cpu_project_builds_installs_and_passes_its_test(
    tmp_path: Path, venv_for: MakeVenv
) -> None:
    assert main(["init", "tiny-op", "--backends", "cpu", "--directory", str(tmp_path)]) == 0
    project = tmp_path / "tiny-op"
    out = tmp_path / "wheelhouse"
    assert main(["build", str(project), "-o", str(out), "--variant", CPU_VARIANT]) == 0
    (wheel,) = out.glob("tiny_op-0.0.0+*.whl")
    venv = venv_for(CPU_VARIANT)
    venv.pip(str(wheel), "pytest>=8,<10")
    proc = venv.run(
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(project / "tests"),
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 passed" in proc.stdout, proc.stdout
