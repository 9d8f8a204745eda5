"""The compile plan: request + toolchain facts -> the CompileSpec, without running a compiler.
Each test reads the spec the worker would get: sources, macros, flags per compiler and per
source, capabilities, jobs and threads, and the notes for the user."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from support.requests import build_request
from support.variants import TORCH213_CPU, TORCH214_CU130

from kernelwheel.abi.remedies import remedy_flags
from kernelwheel.builder.compile_plan import CompilePlan, Toolchain, plan_compile
from kernelwheel.builder.request import BuildRequest
from kernelwheel.compile.compile_spec import SourceFlags
from kernelwheel.errors import ProjectError, ToolchainError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.variant import Variant
from kernelwheel.toolchain.envs import CudaToolkit

CU130 = Variant.parse(TORCH214_CU130)
CPU = Variant.parse(TORCH213_CPU)
DEFAULTS = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX")
NVCC13 = ("7.5", "8.0", "8.6", "8.7", "8.8", "8.9", "9.0", "10.0", "11.0", "10.3", "12.0", "12.1")
CUDA = Toolchain(CudaToolkit(Path("/cuda"), "13.0"), NVCC13, cpus=16)

BUILD_TOML = """\
[general]
name = "probe"
backends = ["cpu", "cuda"]

[torch]
src = ["torch-ext/binding.cpp"]

[kernel.gemm]
backend = "cuda"
depends = ["torch"]
src = ["gemm/gemm.cu", "gemm/launch.cpp"]
{gemm}

[kernel.norm]
backend = "cuda"
depends = ["torch"]
src = ["norm/norm.cu"]
{norm}

[kernel.host]
backend = "cpu"
depends = ["torch"]
src = ["host/host.cpp"]
{host}
"""


def project_with(root: Path, gemm: str = "", norm: str = "", host: str = "") -> Path:
    for rel in ("gemm/gemm.cu", "gemm/launch.cpp", "norm/norm.cu", "host/host.cpp"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// x\n")
    (root / "torch-ext" / "probe").mkdir(parents=True)
    (root / "torch-ext" / "binding.cpp").write_text("// x\n")
    (root / "torch-ext" / "probe" / "__init__.py").write_text("")
    text = BUILD_TOML.format(gemm=gemm, norm=norm, host=host)
    (root / "build.toml").write_text(textwrap.dedent(text))
    return root


def request(root: Path, variant: Variant = CU130, **settings: object) -> BuildRequest:
    return build_request(root, variant, **settings)


def plan(req: BuildRequest, tools: Toolchain = CUDA) -> CompilePlan:
    return plan_compile(
        req, "_probe_0123456789", req.outputs.work_dir / "stage", tools, remedy_flags()
    )


NAME_FLAG = "-Xcudafe=--orig_src_path_name="


def own_flags(entries: tuple[SourceFlags, ...]) -> tuple[SourceFlags, ...]:
    """``entries`` without the flag naming each .cu to nvcc (its own test below), and without
    the entries left empty."""
    out = []
    for e in entries:
        e = e._replace(flags=tuple(f for f in e.flags if not f.startswith(NAME_FLAG)))
        if e.flags or e.gencode:
            out.append(e)
    return tuple(out)


def names(sources: tuple[str, ...], root: Path) -> list[str]:
    return [Path(s).relative_to(root).as_posix() for s in sources if Path(s).is_relative_to(root)]


def test_a_cuda_variant_compiles_the_cuda_kernels_with_kernel_builders_macros(
    tmp_path: Path,
) -> None:
    spec = plan(request(project_with(tmp_path))).spec
    assert names(spec.sources, tmp_path) == [
        "torch-ext/binding.cpp",
        "gemm/gemm.cu",
        "gemm/launch.cpp",
        "norm/norm.cu",
    ]
    macros = dict(spec.define_macros)
    assert macros["CUDA_KERNEL"] is None and macros["USE_CUDA"] == "1"
    assert "TORCH_EXTENSION_NAME" not in macros  # only the units that name it: see below
    assert macros["_GLIBCXX_USE_CXX11_ABI"] == "1" and macros["Py_LIMITED_API"] == "0x03090000"
    assert not {"CPU_KERNEL", "KERNELWHEEL_WITH_CPU", "KERNELWHEEL_WITH_CUDA"} & set(macros)
    assert "-fno-gnu-unique" in spec.cxx_flags
    assert {"-Xcompiler=-fno-gnu-unique", "-DENABLE_FP8", "-U__CUDA_NO_HALF_OPERATORS__"} <= set(
        spec.nvcc_flags
    )
    assert spec.cuda and spec.capabilities == parse_all(DEFAULTS)
    assert own_flags(spec.source_flags) == ()
    assert "-gencode=arch=compute_121,code=compute_121" in spec.nvcc_flags


def test_a_cpu_variant_compiles_the_cpu_kernels(tmp_path: Path) -> None:
    spec = plan(request(project_with(tmp_path), CPU), Toolchain(cpus=4)).spec
    assert names(spec.sources, tmp_path) == ["torch-ext/binding.cpp", "host/host.cpp"]
    assert dict(spec.define_macros)["CPU_KERNEL"] is None and "CUDA_KERNEL" not in dict(
        spec.define_macros
    )
    assert not spec.cuda and spec.nvcc_flags == () and spec.capabilities == ()
    assert spec.jobs == 4  # --jobs 16, but four CPUs


def test_with_cpu_kernels_is_kernelwheels_former_behaviour(tmp_path: Path) -> None:
    spec = plan(request(project_with(tmp_path), with_cpu_kernels=True)).spec
    assert "host/host.cpp" in names(spec.sources, tmp_path)
    macros = dict(spec.define_macros)
    assert macros["KERNELWHEEL_WITH_CPU"] == macros["KERNELWHEEL_WITH_CUDA"] == "1"
    assert "CUDA_KERNEL" in macros and "CPU_KERNEL" not in macros


def test_kernelwheels_former_macros_warn_with_file_and_line(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    (root / "torch-ext" / "binding.cpp").write_text(
        "// x, not KERNELWHEEL_WITH_CPU\n#if defined(KERNELWHEEL_WITH_CUDA)\n"
        "TORCH_LIBRARY_IMPL(x, CUDA, m) {}\n#endif\n"
    )
    (root / "host" / "host.cpp").write_text("  #  ifdef KERNELWHEEL_WITH_CPU\n#endif\n")
    notes = plan(request(root)).notes
    (warning,) = [n for n in notes if n.startswith("warning:")]  # host.cpp: not compiled here
    assert "torch-ext/binding.cpp:2 tests KERNELWHEEL_WITH_CUDA" in warning
    assert "CPU_KERNEL / CUDA_KERNEL" in warning
    cpu_notes = plan(request(root, CPU), Toolchain(cpus=4)).notes
    assert [n.split(" tests")[0] for n in cpu_notes if n.startswith("warning:")] == [
        "warning: torch-ext/binding.cpp:2",
        "warning: host/host.cpp:1",
    ]
    # With with-cpu-kernels the macros are defined: nothing to warn about.
    assert not [n for n in plan(request(root, with_cpu_kernels=True)).notes if "warning" in n]


def test_no_gnu_unique_only_where_the_compiler_has_it(tmp_path: Path) -> None:
    spec = plan(request(project_with(tmp_path)), replace(CUDA, no_gnu_unique=False)).spec
    assert not any("gnu-unique" in f for f in (*spec.cxx_flags, *spec.nvcc_flags))


def test_kernels_keep_their_own_flags_and_capabilities(tmp_path: Path) -> None:
    root = project_with(
        tmp_path,
        gemm='cuda-capabilities = ["9.0a", "10.0f"]\ncxx-flags = ["-DGEMM_HOST"]\n'
        'cuda-flags = ["--use_fast_math"]',
        norm='cuda-capabilities = ["8.0", "9.0"]',
    )
    spec = plan(request(root)).spec
    assert spec.capabilities == parse_all(["8.0", "9.0", "9.0a", "10.0f"])
    by_source = {
        Path(e.source).relative_to(root).as_posix(): e for e in own_flags(spec.source_flags)
    }
    assert by_source["gemm/gemm.cu"] == SourceFlags(
        str(root / "gemm/gemm.cu"),
        ("--use_fast_math",),
        (
            "-gencode=arch=compute_90a,code=sm_90a",
            "-gencode=arch=compute_100f,code=sm_100f",
        ),
    )
    assert by_source["gemm/launch.cpp"].flags == ("-DGEMM_HOST",)
    assert by_source["norm/norm.cu"].flags == ()
    assert by_source["norm/norm.cu"].gencode == (
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
    )
    assert "torch-ext/binding.cpp" not in by_source  # a kernel's flags stay with its sources
    assert "-DGEMM_HOST" not in spec.cxx_flags and "--use_fast_math" not in spec.nvcc_flags
    # the widest kernel compiles for two capabilities: two threads per nvcc, 16 / 2 jobs
    # two .cu files of 2 threads each; the other 12 CPUs are C++ jobs
    assert "--threads=2" in spec.nvcc_flags and spec.jobs == 14


def test_capabilities_this_cuda_does_not_build_are_reported(tmp_path: Path) -> None:
    root = project_with(tmp_path, norm='cuda-capabilities = ["8.0", "10.1"]')
    result = plan(request(root))
    assert result.notes == (
        "kernel.norm: cuda-capabilities 10.1 not built: this CUDA compiles for 7.5, 8.0, 8.6, "
        "8.7, 8.9, 9.0, 10.0, 11.0, 12.0, 12.1",
    )
    assert "10.1" not in result.spec.capabilities


def test_a_kernel_left_with_no_capability_is_refused(tmp_path: Path) -> None:
    root = project_with(tmp_path, norm='cuda-capabilities = ["10.1"]')
    with pytest.raises(ProjectError) as info:
        plan(request(root))
    assert "kernel.norm.cuda-capabilities" in str(info.value)
    assert "none of 10.1 is built by CUDA 13.0" in str(info.value)


def test_a_capability_nvcc_cannot_build_is_an_error(tmp_path: Path) -> None:
    root = project_with(tmp_path, norm='cuda-capabilities = ["7.0", "8.0"]')  # 7.0 serves 7.5
    with pytest.raises(ToolchainError, match="cannot compile for '7.0'"):
        plan(request(root))


def test_the_option_replaces_every_list_without_intersecting(tmp_path: Path) -> None:
    root = project_with(tmp_path, gemm='cuda-capabilities = ["9.0a"]')
    spec = plan(request(root, capabilities=parse_all(["12.0"]))).spec
    assert spec.capabilities == parse_all(["12.0"]) and own_flags(spec.source_flags) == ()
    with pytest.raises(ToolchainError, match="the cuda-capabilities option"):
        plan(request(root, capabilities=parse_all(["7.0"])))


def test_a_default_build_targets_the_gpus_present(tmp_path: Path) -> None:
    # plan.defaults: the GPUs' capabilities replace the recipe's as the targets; a kernel's own
    # list is intersected with them (9.0a serves 9.0), and `all` (None here) keeps the recipe's.
    root = project_with(tmp_path, gemm='cuda-capabilities = ["8.0", "9.0a"]')
    here = request(root, default_capabilities=parse_all(["9.0"]), for_gpus_here=True)
    spec = plan(here).spec
    assert spec.capabilities == parse_all(["9.0", "9.0a"])
    assert spec.capabilities != plan(request(root)).spec.capabilities


def test_a_kernel_no_gpu_here_runs_names_the_option_that_builds_it(tmp_path: Path) -> None:
    root = project_with(tmp_path, norm='cuda-capabilities = ["8.0"]')
    with pytest.raises(ProjectError) as info:
        plan(request(root, default_capabilities=parse_all(["9.0"]), for_gpus_here=True))
    message = str(info.value)
    assert "none of 8.0 runs on this machine's GPUs (9.0)" in message
    assert "kernel.norm.cuda-capabilities" in message and "--cuda-capabilities all" in message


def test_nvcc_threads_setting_divides_the_jobs(tmp_path: Path) -> None:
    spec = plan(request(project_with(tmp_path), nvcc_threads=2)).spec
    # two .cu files of 2 threads each; the other 12 CPUs are C++ jobs
    assert "--threads=2" in spec.nvcc_flags and spec.jobs == 14


def test_a_kernel_above_the_toolkit_is_left_out(tmp_path: Path) -> None:
    root = project_with(tmp_path, norm='cuda-minver = "13.1"')
    result = plan(request(root))
    assert "norm/norm.cu" not in names(result.spec.sources, root)
    assert result.notes == ("kernel.norm left out: its cuda-minver 13.1 is above CUDA 13.0",)


def test_torch_cxx_flags_reach_the_binding_only(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    toml = root / "build.toml"
    text = toml.read_text().replace('name = "probe"', 'name = "probe"\nversion = 1\nedition = 5')
    text = text.replace(
        'src = ["torch-ext/binding.cpp"]', 'src = ["torch-ext/binding.cpp"]\ncxx-flags = ["-DB"]'
    )
    toml.write_text(text.replace("[general]", '[general]\nlicense = "MIT"'))
    spec = plan(request(root)).spec
    assert own_flags(spec.source_flags) == (
        SourceFlags(str(root / "torch-ext/binding.cpp"), ("-DB",)),
    )
    assert "-DB" not in spec.cxx_flags


def test_the_toolkit_headers_come_before_torchs_nvidia_packages(tmp_path: Path) -> None:
    """Both hold the CUDA runtime's headers; the toolkit's path is the same for every torch
    variant built with it (docs/build-corpus.md: objects shared across torch versions)."""
    env_headers = tmp_path / "env" / "nvidia" / "cu13" / "include"
    tools = Toolchain(CudaToolkit(Path("/cuda"), "13.0", (env_headers,)), NVCC13, cpus=16)
    dirs = plan(request(project_with(tmp_path)), tools).spec.include_dirs
    assert dirs.index("/cuda/include") < dirs.index(str(env_headers))


def test_sources_without_torch_headers_are_named_for_the_compiler_cache(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    (root / "norm" / "norm.cu").write_text('#include "norm.h"\n')
    (root / "norm" / "norm.h").write_text("#include <torch/all.h>\n")
    (root / "torch-ext" / "binding.cpp").write_text('#include "registration.h"\n')
    spec = plan(request(root)).spec
    assert names(spec.torch_free, root) == ["gemm/gemm.cu", "gemm/launch.cpp"]


SHARED_TOML = """\
[general]
name = "probe"
backends = ["cuda"]

[torch]
src = ["torch-ext/binding.cpp"]

[kernel.new]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["10.0f"]
cuda-flags = ["-DNEW_FLAG"]
cuda-minver = "{minver}"
src = ["api/api.cu", "new/new.cu"]

[kernel.old]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["9.0a"]
cuda-flags = ["-DOLD_ONLY"]
src = ["api/api.cu", "old/old.cu"]
"""


def _shared_source_project(root: Path, minver: str) -> None:
    """api/api.cu listed by an sm90 kernel and by one for CUDA >= ``minver`` (SHARED_TOML)."""
    for rel in ("api/api.cu", "new/new.cu", "old/old.cu", "torch-ext/binding.cpp"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// x\n")
    (root / "torch-ext" / "probe").mkdir()
    (root / "torch-ext" / "probe" / "__init__.py").write_text("")
    (root / "build.toml").write_text(SHARED_TOML.format(minver=minver))


@pytest.mark.parametrize(("minver", "kernels"), [("12.9", 2), ("13.1", 1)])
def test_a_source_two_kernels_list_compiles_once_with_both_kernels_flags(
    tmp_path: Path, minver: str, kernels: int
) -> None:
    """As kernel-builder's CMake does (flash-mla lists its API in an sm90 and an sm100 kernel):
    one object, every listing kernel's cuda-flags in build.toml's order, the union of their
    capabilities; a kernel this CUDA skips (cuda-minver) adds nothing."""
    _shared_source_project(tmp_path, minver)
    spec = plan(request(tmp_path)).spec
    sources = names(spec.sources, tmp_path)
    assert sources.count("api/api.cu") == 1
    assert ("new/new.cu" in sources) == (kernels == 2)
    by_source = {
        Path(e.source).relative_to(tmp_path).as_posix(): e for e in own_flags(spec.source_flags)
    }
    api = by_source["api/api.cu"]
    if kernels == 2:
        assert api.flags == ("-DNEW_FLAG", "-DOLD_ONLY")
        assert spec.capabilities == parse_all(["9.0a", "10.0f"])  # the union: all
        assert api.gencode == ()
        assert by_source["old/old.cu"].gencode == ("-gencode=arch=compute_90a,code=sm_90a",)
    else:
        assert api.flags == ("-DOLD_ONLY",) and spec.capabilities == parse_all(["9.0a"])


@pytest.mark.parametrize(("minver", "kernels"), [("12.9", 2), ("13.1", 1)])
def test_a_shared_source_with_conflicting_flags_is_announced(
    tmp_path: Path, minver: str, kernels: int
) -> None:
    """Issue 30: the union of flags is kernel-builder's rule, but the author is told (a
    warning among the plan's notes, which the build reports); not when one kernel compiles."""
    _shared_source_project(tmp_path, minver)
    warnings = [n for n in plan(request(tmp_path)).notes if n.startswith("warning: api/api.cu")]
    if kernels == 2:
        (warning,) = warnings
        assert "cuda-flags" in warning and "'-DNEW_FLAG'" in warning and "'-DOLD_ONLY'" in warning
    else:
        assert warnings == []


def test_a_cpp_source_two_cpu_kernels_list_with_other_cxx_flags_is_announced(
    tmp_path: Path,
) -> None:
    root = project_with(
        tmp_path,
        host='cxx-flags = ["-DHOST=1"]\n\n[kernel.host2]\nbackend = "cpu"\ndepends = ["torch"]\n'
        'src = ["host/host.cpp"]\ncxx-flags = ["-DHOST=2"]',
    )
    notes = plan(request(root, CPU), Toolchain(cpus=4)).notes
    (warning,) = [n for n in notes if "host/host.cpp" in n]
    assert "cxx-flags" in warning and "kernel.host" in warning and "kernel.host2" in warning
    same = tmp_path / "same"
    same.mkdir()
    root = project_with(
        same,
        host='cxx-flags = ["-DX"]\n\n[kernel.host2]\nbackend = "cpu"\ndepends = ["torch"]\n'
        'src = ["host/host.cpp"]\ncxx-flags = ["-DX"]',
    )
    notes = plan(request(root, CPU), Toolchain(cpus=4)).notes
    assert not [n for n in notes if "host/host.cpp" in n]  # the same flags: nothing to say


def test_the_build_id_reaches_only_the_units_that_name_it(tmp_path: Path) -> None:
    """The binding (and a kernel source that names the macro itself, or through a project
    header) get -DTORCH_EXTENSION_NAME; the other units' command lines hold no build id, so an
    edit that changes the id leaves them as they were (and hits the compiler cache)."""
    root = project_with(tmp_path, gemm='cxx-flags = ["-DGEMM"]')
    (root / "torch-ext" / "binding.cpp").write_text(
        '#include "registration.h"\nTORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {}\n'
        "REGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n"
    )
    (root / "gemm" / "name.h").write_text("static const char* kName = TORCH_EXTENSION_NAME_STR;\n")
    (root / "gemm" / "ns.h").write_text("#define KW_NS TORCH_EXTENSION_NAME\n")
    (root / "gemm" / "launch.cpp").write_text('#include "ns.h"\n#include "name.h"\n')
    commented = '// TORCH_EXTENSION_NAME\n/* TORCH_EXTENSION_NAME */\n#include "../gemm/name.h"\n'
    (root / "norm" / "norm.cu").write_text(commented)
    spec = plan(request(root)).spec
    define = "-DTORCH_EXTENSION_NAME=_probe_0123456789"
    with_id = {
        Path(e.source).relative_to(root).as_posix(): e.flags
        for e in own_flags(spec.source_flags)
        if define in e.flags
    }
    assert with_id == {
        "torch-ext/binding.cpp": (define,),
        "gemm/launch.cpp": (define, "-DGEMM"),  # its kernel's own flags kept
    }
    assert "TORCH_EXTENSION_NAME" not in dict(spec.define_macros)
    everywhere = (*spec.cxx_flags, *spec.nvcc_flags, *(f"{k}={v}" for k, v in spec.define_macros))
    assert not any("_probe_0123456789" in flag for flag in everywhere)


def test_sources_named_through_the_work_folders_links_link_in_the_same_order_anywhere(
    tmp_path: Path,
) -> None:
    """torch links the objects in the order of their paths, which mirror the sources': named
    through the work folder's links, a project and kernelwheel's data folder give the same
    order (and bytes) wherever they lie on the machine."""
    stage = "/cache/work/k/v"
    orders = []
    cpu_tools = Toolchain(cpus=2)
    base = plan(request(project_with(tmp_path / "p"), Variant.parse(TORCH213_CPU)), cpu_tools)
    for project, data in (("/a/proj", "/z/site/kernelwheel/data"), ("/z/proj", "/a/kw/data")):
        spec = replace(
            base.spec,
            sources=(f"{project}/torch-ext/b.cpp", f"{data}/kernelwheel_compat.cpp"),
            source_flags=(SourceFlags(f"{project}/torch-ext/b.cpp", ("-DX",)),),
            torch_free=(f"{data}/kernelwheel_compat.cpp",),
        )
        views = ((project, f"{stage}/project"), (data, f"{stage}/kernelwheel-data"))
        viewed = spec.through_views(views)
        assert viewed.sources == (
            f"{stage}/project/torch-ext/b.cpp",
            f"{stage}/kernelwheel-data/kernelwheel_compat.cpp",
        )
        assert viewed.source_flags[0].source == f"{stage}/project/torch-ext/b.cpp"
        assert viewed.torch_free == (f"{stage}/kernelwheel-data/kernelwheel_compat.cpp",)
        assert viewed.path_views == views and viewed.include_dirs == spec.include_dirs
        orders.append(sorted(viewed.sources))
    assert orders[0] == orders[1]


def test_each_cu_is_named_to_nvcc_by_its_place_in_the_project(tmp_path: Path) -> None:
    """nvcc hashes a .cu file's real path into its internal symbols; the plan names every .cu
    as /kernelwheel/src/<path in the project> instead, once, whatever lists it, and no C++
    source. (That two checkouts then compile to the same bytes: test_build_img2gray's
    test_rebuild_is_byte_identical, with nvcc.)"""
    root = project_with(tmp_path)
    spec = plan(request(root)).spec
    named = {
        Path(e.source).relative_to(root).as_posix(): [f for f in e.flags if f.startswith(NAME_FLAG)]
        for e in spec.source_flags
    }
    assert named["gemm/gemm.cu"] == [f"{NAME_FLAG}/kernelwheel/src/gemm/gemm.cu"]
    assert named["norm/norm.cu"] == [f"{NAME_FLAG}/kernelwheel/src/norm/norm.cu"]
    assert all(not flags for src, flags in named.items() if not src.endswith(".cu"))
    cpu = plan(
        request(project_with(tmp_path / "cpu"), Variant.parse("torch213-cxx11-cpu-x86_64-linux")),
        Toolchain(cpus=2),
    )
    assert not any(f.startswith(NAME_FLAG) for e in cpu.spec.source_flags for f in e.flags)


def test_a_cuda_source_a_cpu_variant_would_compile_is_refused_naming_its_list(
    tmp_path: Path,
) -> None:
    # a .cu listed in the CPU kernel: torch's compile raised "CUDA was not found on the
    # system" with its traceback, naming neither the file nor build.toml
    root = project_with(tmp_path)
    toml = (root / "build.toml").read_text()
    (root / "build.toml").write_text(
        toml.replace('"host/host.cpp"]', '"host/host.cpp", "norm/norm.cu"]')
    )
    with pytest.raises(ProjectError) as refused:
        plan(request(root, CPU), Toolchain(cpus=4))
    assert refused.value.key == "kernel.host.src"
    assert "norm/norm.cu is a CUDA source" in refused.value.message
    assert 'backend = "cuda"' in (refused.value.hint or "")
    plan(request(root, CU130))  # a CUDA variant compiles it
