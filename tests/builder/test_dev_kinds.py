"""`kernelwheel test` of the kinds that are no torch extension, for real: a pure-Python project's
tests against its linked files (an edit is what the next run tests, with no copy to refresh),
and a tvm-ffi project compiled, load-checked and tested, the unchanged run compiling nothing
and an edit of one kernel source compiling that unit alone."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import _pytest
import pytest
from support.builds import CPU_VARIANT, build_env, cache_dir
from support.kinds import write_noarch_project, write_tvm_ffi_project
from support.venvs import QuickVenv

from kernelwheel._util import Runner
from kernelwheel.builder.dev_layout import dev_folder
from kernelwheel.builder.tvm_ffi import provision_tvm_ffi
from kernelwheel.cli import main
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.sources import PipSources
from kernelwheel.model.variant import Arch, Variant

pytestmark = pytest.mark.integration

PYTEST_SITE = Path(_pytest.__file__).parents[1]
TVM_CPU = f"tvm-ffi01-cpu-{Arch.host().value}-linux"

NOARCH_TEST = """\
import torch
import scale_noarch


def test_scale():
    assert scale_noarch.scale(torch.ones(2)).tolist() == [2.5, 2.5]
"""

TVM_FFI_TEST = """\
import torch
import add_one


def test_add_one():
    x = torch.arange(3, dtype=torch.float32)
    assert add_one.add_one(x, torch.empty_like(x)).tolist() == [1.0, 2.0, 3.0]
"""


def test_a_noarch_projects_tests_run_against_its_files_as_they_are_now(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_noarch_project(tmp_path / "scale-noarch")
    (root / "tests").mkdir()
    (root / "tests" / "test_scale.py").write_text(NOARCH_TEST)
    venv = QuickVenv(tmp_path / "venv", [build_env(CPU_VARIANT).purelib, PYTEST_SITE])
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    assert main(["test", str(root)]) == 0
    out = "".join(capfd.readouterr())
    assert "1 passed" in out and "importable by" in out, out
    # the venv imports the dev build by itself (the .pth), torch's Python op registered
    ran = venv.run("-c", "import torch, scale_noarch; print(scale_noarch.scale(torch.ones(1)))")
    assert "2.5" in ran.stdout
    # an edit of the package's data file and of its Python: the next run tests them
    (root / "torch-ext" / "scale_noarch" / "factor.json").write_text('{"factor": 3.0}\n')
    assert main(["test", str(root), "--", "-q"]) == 1
    assert "1 failed" in "".join(capfd.readouterr())
    init = root / "torch-ext" / "scale_noarch" / "__init__.py"
    init.write_text(init.read_text().replace("return x * FACTOR", "return x * FACTOR / 1.2"))
    assert main(["test", str(root), "--", "-q"]) == 0
    assert "1 passed" in "".join(capfd.readouterr())


def test_a_tvm_ffi_project_is_compiled_once_then_by_the_unit_edited(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_tvm_ffi_project(tmp_path / "add-one")
    (root / "tests").mkdir()
    (root / "tests" / "test_add_one.py").write_text(TVM_FFI_TEST)
    recipe = load_recipes().recipe_for(Variant.parse(TVM_CPU))
    log = tmp_path / "provision.log"
    tvm = provision_tvm_ffi(recipe, PipSources(), cache_dir(), log, Runner())
    # the user's venv: apache-tvm-ffi, and torch for the test's tensors
    layers = [tvm.purelib, build_env(CPU_VARIANT).purelib, PYTEST_SITE]
    venv = QuickVenv(tmp_path / "venv", layers)
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    monkeypatch.setenv("KERNELWHEEL_NO_CCACHE", "1")  # each unit compiled, or not, by dev alone
    dev_log = dev_folder(cache_dir(), load_project(root)) / "logs" / f"{TVM_CPU}.log"
    assert main(["test", str(root), "--variant", TVM_CPU]) == 0
    out = "".join(capfd.readouterr())
    assert re.search(r"load check.*add_one_cpu", out) and "1 passed" in out, out
    assert "importable by" in out
    assert {"add_one_cpu.cpp", "binding.cpp"} <= set(_units_compiled(dev_log))
    assert main(["dev", str(root), "--variant", TVM_CPU]) == 0
    assert "unchanged: no unit to compile" in "".join(capfd.readouterr())
    assert _units_compiled(dev_log) == []
    # a syntax error in the package's Python alone: the object, unchanged, is not loaded again,
    # and dev said ✓ (exit 0) where build refuses it
    init = root / "tvm-ffi-ext" / "add_one" / "__init__.py"
    good = init.read_text()
    init.write_text(good + "def broken(:\n")
    assert main(["dev", str(root), "--variant", TVM_CPU]) == 6
    err = capfd.readouterr().err
    assert "do not compile with the build environment's Python" in err, err
    assert f"tvm-ffi-ext/add_one/__init__.py:{good.count(chr(10)) + 1}: invalid syntax" in err
    init.write_text(good)
    kernel = root / "csrc" / "add_one_cpu.cpp"
    kernel.write_text(kernel.read_text().replace("src[i] + 1.0f", "src[i] + 2.0f"))
    assert main(["test", str(root), "--variant", TVM_CPU, "--", "-q"]) == 1
    assert "1 failed" in "".join(capfd.readouterr())
    assert _units_compiled(dev_log) == ["add_one_cpu.cpp"]
    # the venv imports the dev build by itself (the .pth): the edited kernel
    call = "import torch, add_one; x = torch.zeros(2); print(add_one.add_one(x, x + 9).tolist())"
    assert venv.run("-c", call).stdout.strip() == "[2.0, 2.0]"


NAMING_BINDING = """
#define KX_STR2(x) #x
#define KX_STR(x) KX_STR2(x)
const char* kx_namespace() { return KX_STR(TVM_FFI_EXTENSION_NAME); }
"""


def test_a_tvm_ffi_projects_copy_takes_its_kernels_from_the_compiler_cache(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second checkout's first dev hits the compiler cache for every unit but the binding that
    names the namespace (the dev namespace is per checkout); it missed them all, its commands
    naming the project by its own path and the namespace in every unit."""
    first = write_tvm_ffi_project(tmp_path / "a" / "add-one")
    binding = first / "tvm-ffi-ext" / "binding.cpp"
    binding.write_text(binding.read_text() + NAMING_BINDING)
    recipe = load_recipes().recipe_for(Variant.parse(TVM_CPU))
    tvm = provision_tvm_ffi(recipe, PipSources(), cache_dir(), tmp_path / "env.log", Runner())
    monkeypatch.setenv("VIRTUAL_ENV", str(QuickVenv(tmp_path / "venv", [tvm.purelib]).root))
    monkeypatch.delenv("KERNELWHEEL_NO_CCACHE", raising=False)
    dev = ["dev", "--variant", TVM_CPU, "--no-load-check"]
    assert main([*dev, str(first)]) == 0
    capfd.readouterr()
    copy = shutil.copytree(first, tmp_path / "b" / "add-one")
    assert main([*dev, str(copy)]) == 0
    out = "".join(capfd.readouterr())
    found = re.search(r"ccache (\d+)/(\d+) hit", out)
    assert found is not None, out
    hits, units = int(found[1]), int(found[2])
    assert units >= 2 and hits == units - 1, out  # the binding alone compiled again


def _units_compiled(log: Path) -> list[str]:
    """The sources the dev build's commands compiled (its ``[i/n] ... -c SRC`` lines)."""
    return [Path(s).name for s in re.findall(r"^\[\d+/\d+\] .* -c (\S+)", log.read_text(), re.M)]
