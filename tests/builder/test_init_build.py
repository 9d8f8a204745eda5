"""`kernelwheel init` for real: a new project builds as written with no selector, its wheel
installs with pip, and the test it came with passes against the installed package (no edit
anywhere)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT
from support.hostile import MARK, hostile_checkout
from support.layered import LayeredVenv

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

MakeVenv = Callable[..., LayeredVenv]


def test_init_then_default_build_runs_the_op_without_a_gpu(
    tmp_path: Path, venv_for: MakeVenv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `kernelwheel init` + `kernelwheel build` with no selector, in an active virtual environment
    # holding torch 2.13 cpu, on this machine without a GPU: the default variant is that torch's
    # (plan.defaults), and the generated test runs the op on CPU tensors (nothing skipped),
    # though the project lies inside a checkout whose pytest configuration would refuse it.
    venv = venv_for(CPU_VARIANT)
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    outer = hostile_checkout(tmp_path / "outer")
    assert main(["init", "tiny-op", "--directory", str(outer)]) == 0  # cpu and cuda kernels
    project = outer / "tiny-op"
    out = tmp_path / "wheelhouse"
    assert main(["build", str(project), "-o", str(out)]) == 0
    (wheel,) = out.glob("tiny_op-0.0.0+*.whl")
    assert "+torch2.13.cpu.cxx11-" in wheel.name
    venv.pip(str(wheel), "pytest>=8,<10")
    # from inside the project, and pointed at it from the outer checkout
    for cwd, tests in ((project, "tests"), (outer, str(project / "tests"))):
        proc = venv.run(
            "-m", "pytest", "-rs", "-p", "no:cacheprovider", tests, cwd=cwd, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "8 passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout
        assert f"rootdir: {project}" in proc.stdout, proc.stdout
    assert not (outer / MARK).exists()
