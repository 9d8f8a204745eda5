"""`kernelwheel init` for real: a new project builds as written with no selector, its wheel
installs with pip, and the test it came with passes against the installed package (no edit
anywhere)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT
from support.layered import LayeredVenv

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

MakeVenv = Callable[..., LayeredVenv]


def test_init_then_default_build_runs_the_op_without_a_gpu(
    tmp_path: Path, venv_for: MakeVenv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `kernelwheel init` + `kernelwheel build` with no selector, in an active virtual environment
    # holding torch 2.13 cpu, on this machine without a GPU: the default variant is that torch's
    # (plan.defaults), and the generated test runs the op on CPU tensors (nothing skipped).
    venv = venv_for(CPU_VARIANT)
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    assert main(["init", "tiny-op", "--directory", str(tmp_path)]) == 0  # cpu and cuda kernels
    project = tmp_path / "tiny-op"
    out = tmp_path / "wheelhouse"
    assert main(["build", str(project), "-o", str(out)]) == 0
    (wheel,) = out.glob("tiny_op-0.0.0+*.whl")
    assert "+torch2.13.cpu.cxx11-" in wheel.name
    venv.pip(str(wheel), "pytest>=8,<10")
    proc = venv.run(
        "-m",
        "pytest",
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        str(project / "tests"),
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout
