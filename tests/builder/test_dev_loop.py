"""The author's loop, for real (g++ through torch's ninja, a venv holding torch): a build whose
op schema does not match its implementation fails at the load check, naming the op; an init'd
project sitting in a checkout with a hostile pytest configuration is built by `kernelwheel test`
from a subfolder, incrementally (an edit recompiles its unit alone), and its own tests run
against each fresh build."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT, build_env, cache_dir
from support.gitrepo import HubRepo
from support.hostile import MARK, hostile_checkout
from support.tinykernel import BINDING, write_tiny_kernel
from support.venvs import QuickVenv

from kernelwheel.builder.dev_layout import dev_folder
from kernelwheel.cli import main
from kernelwheel.compile.unit_costs import read_costs, store_path
from kernelwheel.errors import UsageError
from kernelwheel.hub.upload import read_layout
from kernelwheel.model.project import load_project

pytestmark = pytest.mark.integration


def test_a_schema_its_implementation_does_not_match_fails_the_build(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_tiny_kernel(tmp_path / "tiny-add")
    binding = project / "torch-ext" / "torch_binding.cpp"
    binding.write_text(BINDING.replace("add_one(Tensor x)", "add_one(Tensor x, Tensor y)"))
    out = tmp_path / "wheelhouse"
    # first a package file the build environment's Python cannot compile: named, no wheel
    init = project / "torch-ext" / "tiny_add" / "__init__.py"
    source = init.read_text()
    init.write_text(source + "\ndef broken(:\n")
    assert main(["build", str(project), "-o", str(out), "--variant", CPU_VARIANT]) == 6
    err = capfd.readouterr().err
    assert f"torch-ext/tiny_add/__init__.py:{source.count(chr(10)) + 2}: " in err, err
    assert not out.exists() or not list(out.glob("*.whl"))
    init.write_text(source)

    assert main(["build", str(project), "-o", str(out), "--variant", CPU_VARIANT]) == 6
    err = capfd.readouterr().err
    assert "the extension crashed (SIGABRT) when loaded: op add_one: its C++ implementation" in err
    assert re.search(r"schema +add_one\(Tensor x, Tensor y\) -> Tensor", err), err
    # the lines to edit: the op's ops.def and ops.impl, not torch's registration block
    lines = binding.read_text().splitlines()
    for needle in ('ops.def("add_one(', 'ops.impl("add_one"'):
        number = next(i for i, line in enumerate(lines, 1) if needle in line)
        assert f"(torch-ext/torch_binding.cpp:{number})" in err, (needle, err)
    assert not list(out.glob("*.whl"))  # no wheel of a build that cannot load
    # run again: the compile is reused, and the load check still refuses it (build and dev)
    assert main(["build", str(project), "-o", str(out), "--variant", CPU_VARIANT]) == 6
    assert "op add_one: its C++ implementation" in capfd.readouterr().err
    for _ in range(2):
        assert main(["dev", str(project), "--variant", CPU_VARIANT]) == 6
        assert "op add_one: its C++ implementation" in capfd.readouterr().err
    # test: the load check in pytest's process refuses it the same way, before any test runs
    (project / "tests").mkdir()
    (project / "tests" / "test_never.py").write_text("def test_never():\n    assert False\n")
    monkeypatch.setenv("VIRTUAL_ENV", str(_user_venv(tmp_path / "venv").root))
    assert main(["test", str(project), "--variant", CPU_VARIANT]) == 6
    out, err = capfd.readouterr()
    assert "the extension crashed (SIGABRT) when loaded: op add_one: its C++ implementation" in err
    assert "test_never" not in out + err  # pytest never collected


def test_init_then_test_from_a_subfolder_then_an_edit_recompiles_its_unit_alone(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A checkout around the project whose pytest configuration would break the project's tests;
    # the project test_init_build.py builds as a release (its kernel unit a ccache hit here).
    outer = hostile_checkout(tmp_path / "outer")
    assert main(["init", "tiny-op", "--directory", str(outer)]) == 0
    project = outer / "tiny-op"
    venv = _user_venv(tmp_path / "venv")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    # a test as kernels-community's are: it finds the build through LOCAL_KERNELS
    hub = dev_folder(cache_dir(), load_project(project)) / "hub"
    (project / "tests" / "test_local_kernels.py").write_text(
        f"import os\n\ndef test_it_names_the_dev_build():\n"
        f"    assert os.environ['LOCAL_KERNELS'] == 'local/tiny-op={hub}'\n"
    )
    # while the tests run, no other dev or test of the project may take the variant's lock
    # (it would swap the shared object, or the Hub layout LOCAL_KERNELS names, under them)
    lock = dev_folder(cache_dir(), load_project(project)) / f"{CPU_VARIANT}.lock"
    (project / "tests" / "test_held.py").write_text(
        f"import fcntl, pytest\n\ndef test_the_build_is_held():\n"
        f"    with open({str(lock)!r}) as fh, pytest.raises(BlockingIOError):\n"
        f"        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    )
    monkeypatch.chdir(project / "csrc")  # the project is found upward
    capfd.readouterr()

    assert main(["test"]) == 0
    out = "".join(capfd.readouterr())  # progress on stdout, pytest's output too
    assert f"variant {CPU_VARIANT}" in out
    assert re.search(r"load check.*add_one", out), out
    assert re.search(r"\d+ passed", out), out
    # kernelwheel's own files (its compat source, the headers it writes) warn nowhere
    ours = re.compile(r"kernelwheel_compat|kernelwheel_abi|registration\.h|/\.cache/")
    assert not [line for line in out.splitlines() if "warning" in line and ours.search(line)]
    # each unit's seconds, from ninja's log, kept for the next build's longest-first schedule
    timed = read_costs(store_path(cache_dir(), project))
    assert {"csrc/tiny_op_cpu.cpp", "torch-ext/torch_binding.cpp"} <= set(timed), timed
    pth = venv.purelib / "kernelwheel-dev-tiny_op.pth"
    assert pth.is_file()
    assert not (outer / MARK).exists()
    # the venv imports the dev build by itself now (no pip)
    ran = venv.run("-c", "import torch, tiny_op; print(tiny_op.add_one(torch.ones(3)).tolist())")
    assert ran.stdout.strip() == "[2.0, 2.0, 2.0]"
    # its Hub layout (LOCAL_KERNELS) is marked a dev build: upload refuses it
    with pytest.raises(UsageError, match="is a 'kernelwheel dev' build, not a release"):
        read_layout(hub)
    # ... and to-wheel makes no wheel of it (the layout committed as a Hub repo's clone)
    repo = HubRepo(tmp_path / "repo")
    for path in sorted((hub / "build").rglob("*")):
        if path.is_file():
            repo.write_file(path.relative_to(hub).as_posix(), path.read_bytes())
    repo.commit("a dev build")
    capfd.readouterr()
    wheels = tmp_path / "converted"
    assert main(["to-wheel", str(repo.root), "0.0.0", "--revision", "main", "-o", str(wheels)]) != 0
    assert "a 'kernelwheel dev' build, not a release" in "".join(capfd.readouterr())
    assert not list(wheels.glob("*.whl"))

    # one line of one kernel source, its time older than its object: that unit alone
    # recompiles, and the tests see it
    kernel = project / "csrc" / "tiny_op_cpu.cpp"
    kernel.write_text(kernel.read_text().replace("add_one(src[i]);", "add_one(src[i]) + 1.0f;"))
    os.utime(kernel, (1e9, 1e9))  # older than its object, as a checkout of an older revision
    assert main(["test", "--", "-x", "-q"]) == 1  # pytest's own exit code: a test failed
    assert "1 failed" in "".join(capfd.readouterr())
    log = dev_folder(cache_dir(), load_project(project)) / "logs" / f"{CPU_VARIANT}.log"
    assert _units_compiled(log.read_text()) == ["tiny_op_cpu.cpp"]
    # named before ninja started (the progress shows it), in the project's path
    assert "\nunits to compile: csrc/tiny_op_cpu.cpp\n" in log.read_text()

    # unchanged since the last run: nothing compiles, nothing is loaded again, and ninja is not
    # even started (the edit's incremental build, ninja and the link alone, kept no reuse
    # entry: every unchanged run after an edit ran ninja)
    assert main(["dev"]) == 0
    out = "".join(capfd.readouterr())
    assert "unchanged: compile skipped" in out, out
    assert "load check" not in out

    # no virtual environment, no --python (a fresh machine): the tests run in the build
    # environment with the pytest kernelwheel installs beside it (recipes/pytest.toml)
    monkeypatch.delenv("VIRTUAL_ENV")
    assert main(["test", "--variant", CPU_VARIANT, "--", "-x", "-q"]) == 1
    out = "".join(capfd.readouterr())
    assert "pytest for the build environment: kernelwheel's" in out and "1 failed" in out, out

    # a virtual environment holding torch but no pytest: the tests run in it, with that pytest
    # beside it (nothing installed into the venv)
    bare = QuickVenv(tmp_path / "bare", [build_env(CPU_VARIANT).purelib])
    monkeypatch.setenv("VIRTUAL_ENV", str(bare.root))
    assert main(["test", "--", "-x", "-q"]) == 1
    out = "".join(capfd.readouterr())
    assert f"pytest for {bare.python}: kernelwheel's" in out and "1 failed" in out, out
    assert not list(bare.purelib.glob("pytest*"))


def _user_venv(root: Path) -> QuickVenv:
    """The user's venv: the build environment's torch and this suite's pytest, layered."""
    import _pytest

    return QuickVenv(root, [build_env(CPU_VARIANT).purelib, Path(_pytest.__file__).parents[1]])


def _units_compiled(log: str) -> list[str]:
    """The sources ninja compiled, in a dev build's log (its ``[i/n] c++ ... -c SRC`` lines)."""
    return [Path(src).name for src in re.findall(r"^\[\d+/\d+\] .* -c (\S+)", log, re.M)]


# kernels.get_kernel's import of a local kernel (kernels 0.19): the variant folder's package
# imported under metadata.json's id, a module of that name already in sys.modules reused (and
# refused without its metadata); written here, not imported: the suite does not install kernels
AS_KERNELS_LOADS_IT = """
import importlib.util, json, os, sys
from pathlib import Path

import torch
import tiny_op


def test_the_package_and_its_hub_layout_in_one_process():
    hub = Path(os.environ["LOCAL_KERNELS"].split("=", 1)[1])
    [variant] = (hub / "build").iterdir()
    kernel_id = json.loads((variant / "metadata.json").read_text())["id"]
    assert kernel_id not in sys.modules
    spec = importlib.util.spec_from_file_location(kernel_id, variant / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[kernel_id] = module
    spec.loader.exec_module(module)
    assert module.add_one(torch.ones(2)).tolist() == [2.0, 2.0]
    assert tiny_op.add_one(torch.ones(2)).tolist() == [2.0, 2.0]
"""


def test_a_fresh_build_is_tested_through_its_hub_layout_and_its_package_at_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh build's load check runs in the tests' process: it leaves no module named as the
    # kernel's id (kernels' get_kernel would refuse it), and the Hub layout's shared object is
    # the package's own file (two copies in one process register the ops twice: torch aborts).
    assert main(["init", "tiny-op", "--directory", str(tmp_path)]) == 0
    project = tmp_path / "tiny-op"
    (project / "tests" / "test_as_kernels.py").write_text(AS_KERNELS_LOADS_IT)
    venv = _user_venv(tmp_path / "venv")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    capfd.readouterr()
    assert main(["test", str(project)]) == 0, "".join(capfd.readouterr())
    out = "".join(capfd.readouterr())
    assert "load check: in the tests' process" in out, out
    assert re.search(r"\d+ passed", out), out
