"""`kernelwheel init` for real: a new project builds as written with no selector, its wheel
installs with pip, and the test it came with passes against the installed package (no edit
anywhere)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import _pytest
import pytest
from support.builds import CPU_VARIANT, build_env, cache_dir
from support.hostile import MARK, hostile_checkout
from support.layered import LayeredVenv
from support.venvs import QuickVenv

from kernelwheel._util import Runner
from kernelwheel.builder.stale import CLOCK_MARGIN_NS
from kernelwheel.builder.tvm_ffi import provision_tvm_ffi
from kernelwheel.cli import main
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.sources import PipSources
from kernelwheel.model.variant import Arch, Variant

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
        assert "9 passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout
        assert f"rootdir: {project}" in proc.stdout, proc.stdout
    assert not (outer / MARK).exists()


# The two kinds that are no torch extension, with no selector on this machine without a GPU: each
# project as written, `test` (its own tests pass), `dev` again (compiles nothing), `build` (the
# CPU variant), the wheel `check`ed clean and installed, and its tests passing against it.
PYTEST_SITE = Path(_pytest.__file__).parents[1]
TVM_CPU = f"tvm-ffi01-cpu-{Arch.host().value}-linux"


def test_init_noarch_tests_builds_and_checks_as_written(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = QuickVenv(tmp_path / "venv", [build_env(CPU_VARIANT).purelib, PYTEST_SITE])
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    assert main(["init", "plus-py", "--kind", "noarch", "--directory", str(tmp_path)]) == 0
    root = tmp_path / "plus-py"
    # cpu tests run, cuda ones skip saying why (no GPU here)
    _passes(["test", str(root)], capfd, "8 passed, 6 skipped")
    assert main(["dev", str(root)]) == 0
    capfd.readouterr()
    _build_check_install(root, venv, "plus_py-0.0.0-py3-none-any.whl", capfd, "8 passed")


def test_init_tvm_ffi_tests_builds_and_checks_as_written(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = load_recipes().recipe_for(Variant.parse(TVM_CPU))
    tvm = provision_tvm_ffi(recipe, PipSources(), cache_dir(), tmp_path / "tvm.log", Runner())
    # the author's venv: apache-tvm-ffi, and torch for the tests' tensors
    layers = [tvm.purelib, build_env(CPU_VARIANT).purelib, PYTEST_SITE]
    venv = QuickVenv(tmp_path / "venv", layers)
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    assert main(["init", "plus-ffi", "--kind", "tvm-ffi", "--directory", str(tmp_path)]) == 0
    root = tmp_path / "plus-ffi"
    # a source changed within this margin before a compile began counts as edited during it
    # (its bytes compiled are not known) and is compiled again: an author's edits come earlier
    time.sleep(2 * CLOCK_MARGIN_NS / 1e9)
    # a CPU build: its kernel tested, the CUDA one it lacks not asked for
    _passes(["test", str(root)], capfd, "7 passed in")
    assert main(["dev", str(root)]) == 0
    dev = "".join(capfd.readouterr())
    assert re.search(r"compile \(.*\)  unchanged: ", dev), dev  # nothing compiled
    wheel = "plus_ffi-0.0.0+tvmffi0.1.cpu-py3-none-manylinux_2_28_*.whl"
    _build_check_install(root, venv, wheel, capfd, "7 passed")


def _passes(argv: list[str], capfd: pytest.CaptureFixture[str], summary: str) -> None:
    code = main(argv)
    out = "".join(capfd.readouterr())
    assert code == 0 and summary in out, out
    # -rs, from the project's pytest.ini: each skip's reason
    assert ("skipped" in summary) == ("SKIPPED" in out and "needs a CUDA device" in out), out


def _build_check_install(
    root: Path, venv: QuickVenv, pattern: str, capfd: pytest.CaptureFixture[str], passed: str
) -> None:
    out = root.parent / "wheelhouse"
    assert main(["build", str(root), "-o", str(out)]) == 0
    (wheel,) = out.glob(pattern)
    assert main(["check", str(wheel)]) == 0, "".join(capfd.readouterr())
    capfd.readouterr()
    # the tests against the installed wheel, the dev build's link gone from the venv
    for pth in venv.purelib.glob("*.pth"):
        if pth.name != "_hub_test_layers.pth":
            pth.unlink()
    venv.pip_install("--no-deps", str(wheel))
    proc = venv.run("-m", "pytest", "-p", "no:cacheprovider", "tests", cwd=root, check=False)
    assert proc.returncode == 0 and passed in proc.stdout, proc.stdout + proc.stderr
    where = f"import {root.name.replace('-', '_')} as m; print(m.__file__)"
    assert venv.run("-c", where).stdout.startswith(str(venv.purelib))
