"""Every build kind through the one entry (builder.entry.build_and_export) with a runner that
starts nothing: the test asserts the commands each kind gives it, and that none bypasses it
(the real runner is stopped meanwhile, so a command started any other way would fail the
build). The torch and tvm-ffi builds then go on with their real codegen, compile plan, wheel
writer and ABI check, on a shared object the test compiled itself."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.kinds import write_noarch_project, write_tvm_ffi_project
from support.requests import run_budget
from support.runners import Reply, ScriptedRunner, is_torch_probe, torch_probe_reply
from support.sofiles import build_extension
from support.tinykernel import write_tiny_kernel

from kernelwheel._util import resume_running, stop_running
from kernelwheel.abi.repair import retag_wheel
from kernelwheel.builder.entry import build_and_export
from kernelwheel.builder.request import BuildKind, BuildRequest
from kernelwheel.builder.service import plan_requests
from kernelwheel.compile.memory import Budget, MemoryLimit
from kernelwheel.log import SilentReporter
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Arch, Variant
from kernelwheel.plan.options import resolve_options

HOST = Arch.host().value
TORCH = f"torch214-cxx11-cpu-{HOST}-linux"
TVM_FFI = f"tvm-ffi01-cpu-{HOST}-linux"
NOARCH = ("torch-cpu", "torch-cuda")
LIBSTDCXX = "/usr/lib/gcc/x86_64-linux-gnu/12/libstdc++.so"


class FakeHost:
    """Answers the commands of a build as the machine would: the compilers' queries, the
    interpreter probes, the compile worker (writes the shared object and its result), the load
    check and auditwheel (writes the repaired wheel, retagged)."""

    def __init__(self, tmp: Path, so: bytes) -> None:
        self.tmp, self.so = tmp, so
        self.purelib = tmp / "purelib"

    def __call__(self, cmd: list[str], cwd: Path | None) -> Reply:
        if any(a.startswith("-print-file-name=libstdc++") for a in cmd):
            return Reply(stdout=LIBSTDCXX + "\n")
        if "-print-file-name" in " ".join(cmd):
            return Reply(stdout=cmd[-1].split("=", 1)[1] + "\n")  # not found: no libc tables
        if "-fsyntax-only" in cmd:
            return Reply()  # the compiler takes the flag
        if cmd[1:3] == ["-m", "auditwheel"]:
            dest, raw = Path(cmd[cmd.index("-w") + 1]), Path(cmd[-1])
            retag_wheel(raw, cmd[cmd.index("--plat") + 1], dest)
            return Reply(stdout="repaired\n")
        if cmd[1].endswith("_compile_worker.py"):
            return self._compile(Path(cmd[2]), Path(cmd[3]))
        if cmd[1].endswith("_load_check.py"):  # the load check: the ops it found
            return Reply(stdout=json.dumps({"ops": [f"{cmd[4]}::add_one(Tensor x) -> Tensor"]}))
        if is_torch_probe(cmd):
            return torch_probe_reply(cmd[0], self.purelib)
        if cmd[1] == "-c" and "tvm_ffi" in cmd[2]:
            return Reply(stdout=json.dumps(self._tvm_ffi_report(cmd[0])) + "\n")
        return Reply(code=127, stderr=f"the fake host does not know {cmd}")

    def _compile(self, spec_path: Path, result_path: Path) -> Reply:
        spec = json.loads(spec_path.read_text())
        so = Path(spec["build_temp"]) / "ext.so"
        so.parent.mkdir(parents=True, exist_ok=True)
        so.write_bytes(self.so)
        result = {"shared_object": str(so), "py_limited_api": "0x03090000"}
        result_path.write_text(json.dumps(result))
        return Reply(stdout="compiled\n")

    def _tvm_ffi_report(self, python: str) -> dict[str, object]:
        include = self.purelib / "tvm_ffi" / "include"
        include.mkdir(parents=True, exist_ok=True)
        return {
            "python": python,
            "purelib": str(self.purelib),
            "version": "0.1.9",
            "include_dirs": [str(include)],
            "lib_dir": str(self.purelib / "tvm_ffi" / "lib"),
        }


@pytest.fixture
def stopped() -> Iterator[None]:
    """The real runner refuses every command meanwhile: one that bypasses the scripted runner
    gets exit -9 (or an error) and the build fails."""
    stop_running()
    try:
        yield
    finally:
        resume_running()


def _requests(
    root: Path, tmp: Path, names: tuple[str, ...], budget: Budget | None = None
) -> tuple[BuildRequest, ...]:
    python = tmp / "env" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    cli = {
        "python": str(python),
        "output_dir": str(tmp / "wheelhouse"),
        "cache_dir": str(tmp / "cache"),
        "no_ccache": True,
    }
    options = resolve_options(None, env={}, cli=cli)
    recipes = load_recipes()
    selected = [recipes.recipe_for(Variant.parse(name)) for name in names]
    return plan_requests(
        load_project(root),
        selected,
        "1.0.0",
        options,
        recipes,
        share=(budget or run_budget(options)).per_variant(),
        environ={"CXX": "c++"},
    )


def _what(cmd: list[str]) -> str:
    """A command, shortened to what tells it apart."""
    if cmd[1:3] == ["-m", "auditwheel"]:
        return "auditwheel repair"
    if len(cmd) > 1 and cmd[1].endswith("_compile_worker.py"):
        return "python compile-worker"
    if len(cmd) > 1 and cmd[1].endswith("_load_check.py"):
        return f"python load-check {cmd[2]}"
    if is_torch_probe(cmd):
        return "python probe-torch"
    if len(cmd) > 2 and cmd[1] == "-c":
        return "python probe-tvm-ffi"
    return " ".join(Path(cmd[0]).name if i == 0 else a for i, a in enumerate(cmd[:2]))


def _build(req: BuildRequest, tmp: Path) -> tuple[Path, list[str], ScriptedRunner]:
    host = FakeHost(tmp, build_extension(tmp / "so", "_fake_ext"))
    runner = ScriptedRunner(host)
    stop_running()
    try:
        built = build_and_export(req, SilentReporter(), runner)
    finally:
        resume_running()
    return built.path, [_what(c) for c in runner.commands], runner


def compiled_commands(probe: str, kind: str) -> list[str]:
    """The commands of a compiled kind's build, in order, with its interpreter ``probe``."""
    return [
        "c++ -print-file-name=libstdc++.so",  # the static-libstdc++ refusal
        probe,
        "c++ -print-file-name=libc.so.6",  # the remedies' header: the target's libc and libm
        "c++ -print-file-name=libm.so.6",
        "c++ -print-file-name=libstdc++.so",  # the compile plan's facts
        "c++ -fno-gnu-unique",
        "python compile-worker",
        f"python load-check {kind}",  # the extension imported by the environment's python
        "auditwheel repair",
    ]


def test_a_torch_build_runs_every_command_through_the_given_runner(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "tiny")
    (req,) = _requests(root, tmp_path, (TORCH,))
    assert req.kind is BuildKind.TORCH
    wheel, commands, runner = _build(req, tmp_path)
    assert commands == compiled_commands("python probe-torch", "torch")
    worker = runner.commands[commands.index("python compile-worker")]
    assert worker[0] == str(req.env.python) and Path(worker[2]).name == "compile.json"
    spec = json.loads(Path(worker[2]).read_text())
    # the binding, the remedies' compat source (abi/remedies), the kernel
    names = [Path(s).name for s in spec["sources"]]
    assert names == ["torch_binding.cpp", "kernelwheel_compat.cpp", "add_one.cpp"]
    assert wheel.name.endswith(f"manylinux_2_28_{HOST}.whl")
    assert wheel.name.startswith("tiny_add-1.0.0+torch2.14.cpu.cxx11-cp39-abi3-")
    with zipfile.ZipFile(wheel) as zf:
        so = [n for n in zf.namelist() if n.endswith(".abi3.so")]
        assert len(so) == 1 and zf.read(so[0]) == build_extension(tmp_path / "so", "_fake_ext")


def test_a_tvm_ffi_build_runs_every_command_through_the_given_runner(tmp_path: Path) -> None:
    root = write_tvm_ffi_project(tmp_path / "add-one")
    (req,) = _requests(root, tmp_path, (TVM_FFI,))
    assert req.kind is BuildKind.TVM_FFI
    wheel, commands, runner = _build(req, tmp_path)
    assert commands == compiled_commands("python probe-tvm-ffi", "tvm-ffi")
    worker = runner.commands[commands.index("python compile-worker")]
    spec = json.loads(Path(worker[2]).read_text())
    assert spec["kind"] == "commands"  # the tvm-ffi plan: its compile and link commands
    units = [Path(unit["source"]).name for unit in spec["units"]]
    assert units == ["binding.cpp", "add_one_cpu.cpp", "kernelwheel_compat.cpp"]
    assert wheel.name.startswith("add_one-1.0.0+tvmffi0.1.cpu-py3-none-")
    assert wheel.name.endswith(f"manylinux_2_28_{HOST}.whl")


def test_a_noarch_build_goes_through_the_same_entry_and_runs_nothing(tmp_path: Path) -> None:
    root = write_noarch_project(tmp_path / "scale")
    (req,) = _requests(root, tmp_path, NOARCH)  # one request: one wheel serves both
    assert req.kind is BuildKind.NOARCH
    assert [v.name for v in req.serves] == list(NOARCH)
    wheel, commands, _ = _build(req, tmp_path)
    assert commands == []
    assert wheel.name == "scale_noarch-1.0.0-py3-none-any.whl"


def test_a_command_that_bypasses_the_runner_fails_the_build(tmp_path: Path, stopped: None) -> None:
    """The check above can fail: the same torch build with the real runner (stopped) fails at
    its first command."""
    from kernelwheel._util import RUNNER
    from kernelwheel.errors import KernelwheelError

    root = write_tiny_kernel(tmp_path / "tiny")
    (req,) = _requests(root, tmp_path, (TORCH,))
    with pytest.raises(KernelwheelError):
        build_and_export(req, SilentReporter(), RUNNER)


def test_the_budget_is_passed_in_and_shared_by_the_variants_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # plan_requests probes nothing: the run's budget (read once by the service, see
    # test_side_by_side) comes in, and each variant gets its share of the jobs, the CPUs and
    # the memory.
    from kernelwheel.builder import service

    monkeypatch.setattr(service, "available_memory", lambda: pytest.fail("memory probed"))
    root = write_tiny_kernel(tmp_path / "tiny")
    names = ("torch213-cxx11-cpu-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux")
    budget = Budget(jobs=9, cpus=4, memory=MemoryLimit(8192, "MemAvailable"), at_once=2)
    share = (4, 2, MemoryLimit(4096, "1/2 of MemAvailable"))
    assert budget.per_variant() == share
    requests = _requests(root, tmp_path, names, budget)
    assert [(r.budget.jobs, r.budget.cpus, r.budget.memory) for r in requests] == [share] * 2
    assert Budget(jobs=1, cpus=1, memory=None, at_once=3).per_variant() == (1, 1, None)


def test_the_request_and_its_parts_are_values_that_import_nothing_that_probes() -> None:
    # A fresh interpreter: the request module pulls in the value types of model/ alone, not the
    # toolchain, compile or plan modules that run compilers or read the machine.
    code = (
        "import sys, kernelwheel.builder.request\n"
        "print(' '.join(m for m in sys.modules if m.startswith('kernelwheel.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "kernelwheel.builder.request" in loaded
    allowed = ("kernelwheel.model", "kernelwheel.errors", "kernelwheel._toml")
    assert {m for m in loaded if not m.startswith(allowed)} == {
        "kernelwheel.builder",
        "kernelwheel.builder.request",
    }
