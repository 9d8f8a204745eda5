"""The tvm-ffi compile as a plan of commands (builder.compile_plan), with the torch builds' rules,
and the compile worker running such a plan for real with the host's C++ compiler."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest
from support.kinds import write_tvm_ffi_project
from support.requests import build_request

from kernelwheel.abi.remedies import NO_REMEDIES
from kernelwheel.builder.compile_plan import (
    CompilePlan,
    Toolchain,
    TvmFfiLibrary,
    plan_tvm_ffi_compile,
)
from kernelwheel.builder.request import BuildRequest
from kernelwheel.builder.steps import WORKER
from kernelwheel.compile.compile_spec import CommandSpec, CommandUnit
from kernelwheel.compile.memory import MemoryLimit
from kernelwheel.compile.unit_costs import PEAK_LOG, unit_peaks, unit_seconds
from kernelwheel.errors import ToolchainError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.variant import Arch, Variant
from kernelwheel.toolchain.envs import CudaToolkit

HOST = Arch.host().value
CPU = Variant.parse(f"tvm-ffi01-cpu-{HOST}-linux")
CUDA = Variant.parse(f"tvm-ffi01-cu130-{HOST}-linux")
LIBRARY = TvmFfiLibrary((Path("/env/tvm_ffi/include"),), Path("/env/tvm_ffi/lib"), ("../x/lib",))
NVCC13 = ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")


def _plan(
    tmp_path: Path, variant: Variant, tools: Toolchain, **settings: object
) -> tuple[BuildRequest, Path, CompilePlan[CommandSpec]]:
    root = write_tvm_ffi_project(tmp_path / "p")
    req = build_request(root, variant, **settings)
    stage = tmp_path / "stage"
    return (
        req,
        stage,
        plan_tvm_ffi_compile(
            req, "_add_one_0123456789", LIBRARY, stage, tools, NO_REMEDIES, (Path("/deps/inc"),)
        ),
    )


def test_a_cpu_variant_compiles_the_binding_and_its_backends_kernels(tmp_path: Path) -> None:
    req, stage, plan = _plan(tmp_path, CPU, Toolchain(cpus=4), jobs=4)
    spec = plan.spec
    assert [Path(u.source).name for u in spec.units] == ["binding.cpp", "add_one_cpu.cpp"]
    for unit in spec.units:
        argv = unit.argv
        # neither names the namespace's macro: the define reaches none (see below)
        assert argv[0] == "c++" and not any("TVM_FFI_EXTENSION_NAME" in a for a in argv)
        assert "-DCPU_KERNEL" in argv and "-DCUDA_KERNEL" not in argv
        # the torch builds' prefix maps, the cache folder's included
        assert f"-ffile-prefix-map={req.outputs.cache_dir}=/kernelwheel/cache" in argv
        assert f"-ffile-prefix-map={stage}=/kernelwheel/build" in argv
        assert "-I/env/tvm_ffi/include" in argv and "-I/deps/inc" in argv
        assert argv[-2:] == ("-o", unit.object) and "-MMD" in argv
    assert spec.link[:4] == ("c++", "-shared", "-o", str(stage / "lib" / "_add_one_0123456789.so"))
    assert "-ltvm_ffi" in spec.link and "-lcudart" not in spec.link
    assert spec.jobs == 4 and spec.capabilities == () and plan.keep_dir is None


def test_through_the_projects_link_only_the_units_naming_the_namespace_get_it(
    tmp_path: Path,
) -> None:
    """Another checkout's compile hits the compiler cache for the kernels: their commands name
    the project through the work folder's link (under the cache's base folder) and not the
    build's namespace, which a binding gets where it or a project header names the macro."""
    root = write_tvm_ffi_project(tmp_path / "p")
    (root / "tvm-ffi-ext" / "name.h").write_text(
        "// TVM_FFI_EXTENSION_NAME in a comment does not count\n"
        "#define KX_STR(x) #x\n#define KX_NAME KX_STR(TVM_FFI_EXTENSION_NAME)\n"
    )
    binding = root / "tvm-ffi-ext" / "binding.cpp"
    binding.write_text('#include "name.h"\n' + binding.read_text())
    (root / "csrc" / "add_one_cpu.cpp").write_text(
        "// TVM_FFI_EXTENSION_NAME\n" + (root / "csrc" / "add_one_cpu.cpp").read_text()
    )
    req = build_request(root, CPU)
    stage = tmp_path / "stage"
    link = stage / "project"  # as the compile step links it
    stage.mkdir()
    link.symlink_to(root, target_is_directory=True)
    plan = plan_tvm_ffi_compile(
        req, "_add_one_dev1", LIBRARY, stage, Toolchain(), NO_REMEDIES, root=link
    )
    define = "-DTVM_FFI_EXTENSION_NAME=_add_one_dev1"
    by_name = {Path(u.source).name: u for u in plan.spec.units}
    assert define in by_name["binding.cpp"].argv
    assert not any("TVM_FFI_EXTENSION_NAME" in a for a in by_name["add_one_cpu.cpp"].argv)
    for unit in plan.spec.units:
        maps = [a for a in unit.argv if a.startswith("-ffile-prefix-map=")]
        named = [a for a in unit.argv if a not in maps]
        assert unit.source.startswith(f"{link}/") and f"{root}/" not in " ".join(named)
        # the link's own map, tried before the work folder's: the objects' bytes as before
        assert maps.index(f"-ffile-prefix-map={link}=/kernelwheel/src") > maps.index(
            f"-ffile-prefix-map={stage}=/kernelwheel/build"
        )
        assert "-ffile-prefix-map=../project=/kernelwheel/src" in maps


def test_a_cuda_variant_gets_capabilities_keep_names_and_the_thread_split(tmp_path: Path) -> None:
    toolkit = CudaToolkit(Path("/store/cu13-abc"), "13.0")
    tools = Toolchain(toolkit, NVCC13, cpus=8)
    _, stage, plan = _plan(tmp_path, CUDA, tools, jobs=8, capabilities=parse_all(["8.0", "9.0"]))
    (cu,) = [u for u in plan.spec.units if u.source.endswith(".cu")]
    assert cu.argv[0] == "nvcc" and "-DCUDA_KERNEL" in cu.argv
    # named to nvcc by its place in the project, not its real path (nvcc hashes it into symbols)
    assert "-Xcudafe=--orig_src_path_name=/kernelwheel/src/csrc/add_one_cuda.cu" in cu.argv
    assert "-gencode=arch=compute_90,code=sm_90" in cu.argv
    assert "--keep" in cu.argv and f"--keep-dir={stage / 'nvcc-keep'}" in cu.argv
    assert "--threads=2" in cu.argv  # one per capability, the rest of the CPUs: C++ jobs
    # its depfile, as for every C++ unit: an unchanged build's inputs are known (reuse), and a
    # dev build compiles it again only when they change (it was compiled on every dev run)
    deps = ("--generate-dependencies-with-compile", "--dependency-output", f"{cu.object}.d")
    assert any(cu.argv[i : i + 3] == deps for i in range(len(cu.argv))), cu.argv
    assert plan.spec.jobs == 7 and plan.keep_dir == stage / "nvcc-keep"
    assert plan.spec.capabilities == parse_all(["8.0", "9.0"])
    assert "-lcudart" in plan.spec.link and "-Wl,-rpath,$ORIGIN/../x/lib" in plan.spec.link
    assert plan.spec.cuda_home == "/store/cu13-abc"


def test_a_capability_nvcc_lacks_is_refused_before_any_compile(tmp_path: Path) -> None:
    tools = Toolchain(CudaToolkit(Path("/cuda"), "13.0"), NVCC13, cpus=2)
    with pytest.raises(ToolchainError, match="cannot compile for '5.0'"):
        _plan(tmp_path, CUDA, tools, capabilities=parse_all(["5.0"]))


# --- the worker runs a commands spec with the standard library alone -------------------------

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")


def _commands(tmp_path: Path, sources: dict[str, str], jobs: int) -> CommandSpec:
    obj = tmp_path / "obj"
    obj.mkdir()
    units = []
    for name, text in sources.items():
        src = tmp_path / name
        src.write_text(text)
        out = obj / f"{src.stem}.o"
        units.append(
            CommandUnit(
                str(src),
                str(out),
                ("c++", "-fPIC", "-MMD", "-MF", f"{out}.d", "-c", str(src), "-o", str(out)),
            )
        )
    so = tmp_path / "lib" / "libsum.so"
    link = ("c++", "-shared", "-o", str(so), *(u.object for u in units))
    return CommandSpec(tuple(units), link, str(so), str(obj), jobs)


def _run_worker(spec: CommandSpec, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    spec_path = tmp_path / "compile.json"
    spec_path.write_text(spec.to_json())
    # the worker runs under any Python of a build environment: here the test's own
    return subprocess.run(
        [sys.executable, str(WORKER), str(spec_path), str(tmp_path / "result.json")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@needs_cxx
def test_the_worker_compiles_the_units_in_parallel_then_links(tmp_path: Path) -> None:
    sources = {f"f{i}.cpp": f'extern "C" int f{i}() {{ return {i}; }}\n' for i in range(4)}
    spec = _commands(tmp_path, sources, jobs=3)
    proc = _run_worker(spec, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    starts = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert sorted(s.split(" ")[0] for s in starts) == [f"[{i}/4]" for i in range(1, 5)]
    # every file the units came from, read from their depfiles (builder.reuse keys on them)
    inputs = sorted(str(tmp_path / name) for name in sources)
    assert json.loads((tmp_path / "result.json").read_text()) == {
        "shared_object": spec.shared_object,
        "inputs": inputs,
    }
    # a unit that writes no depfile (nvcc's): the inputs are unknown, not the others' alone
    first = spec.units[0]
    bare = first._replace(
        argv=tuple(a for a in first.argv if a not in ("-MMD", "-MF", f"{first.object}.d"))
    )
    assert _run_worker(replace(spec, units=(bare, *spec.units[1:])), tmp_path).returncode == 0
    assert json.loads((tmp_path / "result.json").read_text())["inputs"] is None
    nm = subprocess.run(["nm", "-D", spec.shared_object], capture_output=True, text=True)
    assert {f"f{i}" for i in range(4)} <= {line.split()[-1] for line in nm.stdout.splitlines()}


@needs_cxx
def test_a_failing_unit_fails_the_compile_without_a_result_or_link(tmp_path: Path) -> None:
    sources = {"good.cpp": "int good() { return 1; }\n", "bad.cpp": "int bad() { return }\n"}
    spec = _commands(tmp_path, sources, jobs=1)
    proc = _run_worker(spec, tmp_path)
    assert proc.returncode == 1
    # ninja's form, each unit's output after its lines (compile.diagnostics reads them so)
    failed = f"FAILED: [code=1] {spec.units[1].object}\n{shlex.join(spec.units[1].argv)}\n"
    assert failed in proc.stdout
    assert f"{spec.units[1].source}:1:20: error:" in proc.stdout.split(failed, 1)[1]
    assert not (tmp_path / "result.json").exists() and not Path(spec.shared_object).exists()


def test_units_start_longest_first_and_fit_the_memory_by_their_peaks(tmp_path: Path) -> None:
    """As a torch build's plan: earlier builds' seconds order the start (the link keeps the
    units' order, so the same objects link the same way) and their measured peaks fit the jobs
    and nvcc threads to the memory, with the line that says what bound them."""
    toolkit = CudaToolkit(Path("/cuda"), "13.0")
    limit = MemoryLimit(3 * 1024, "cgroup v2 /ci: memory.max - usage")
    tools = Toolchain(toolkit, NVCC13, cpus=8, memory=limit)
    root = write_tvm_ffi_project(tmp_path / "p")
    req = build_request(root, CUDA, jobs=8, capabilities=parse_all(["8.0", "9.0"]))
    stage = tmp_path / "stage"

    def plan(**given: Mapping[str, float]) -> CompilePlan[CommandSpec]:
        return plan_tvm_ffi_compile(
            req, "_add_one_0", LIBRARY, stage, tools, NO_REMEDIES, (), **given
        )

    # nothing recorded: the binding leads (the units' own order); the .cu's estimate at 2
    # threads (2 x 2560 MiB) exceeds the 3 GiB: one job, one nvcc thread
    first = plan()
    names = [Path(u.source).name for u in first.spec.units]
    assert names == ["binding.cpp", "add_one_cuda.cu"] and first.spec.schedule == ()
    assert first.spec.peak_log == str(stage / "obj" / PEAK_LOG)
    assert (first.spec.jobs, "--threads=1" in first.spec.units[1].argv) == (1, True)
    assert first.notes[-1].startswith("jobs 1, nvcc threads 1: limited by memory: 3072 MiB")
    seconds = {"csrc/add_one_cuda.cu": 30.0, "tvm-ffi-ext/binding.cpp": 2.0}
    peaks = {"csrc/add_one_cuda.cu": 600.0, "tvm-ffi-ext/binding.cpp": 300.0}
    second = plan(recorded=seconds, peaks=peaks)
    assert [Path(s).name for s in second.spec.schedule] == ["add_one_cuda.cu", "binding.cpp"]
    assert [u.object for u in second.spec.units] == [u.object for u in first.spec.units]
    assert second.spec.link == first.spec.link
    # measured: 2 x 600 MiB for the .cu at its 2 threads, 300 MiB the binding: all at once
    assert (second.spec.jobs, "--threads=2" in second.spec.units[1].argv) == (7, True)
    assert second.log_lines[0].startswith("jobs 7, nvcc threads 2: the CPU budget")


@needs_cxx
def test_the_worker_starts_the_schedule_first_and_records_seconds_and_peaks(
    tmp_path: Path,
) -> None:
    sources = {f"f{i}.cpp": f'extern "C" int f{i}() {{ return {i}; }}\n' for i in range(3)}
    spec = _commands(tmp_path, sources, jobs=1)
    later_first = (spec.units[2].source, spec.units[0].source, spec.units[1].source)
    peak_log = tmp_path / "obj" / PEAK_LOG
    spec = replace(spec, schedule=later_first, peak_log=str(peak_log))
    proc = _run_worker(spec, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    started = [line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("[")]
    assert started == [spec.units[i].object for i in (2, 0, 1)]
    source_of = {u.object: u.source for u in spec.units}
    temp = Path(spec.build_temp)
    assert set(unit_seconds(temp, source_of)) == set(spec.sources)
    peaks = unit_peaks(temp, 0.0, source_of)
    assert set(peaks) == set(spec.sources) and all(mib > 1 for mib in peaks.values())
