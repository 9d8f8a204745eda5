"""A tvm-ffi build's compile as the :class:`CommandSpec` the worker runs: pure, with
:mod:`.compile_plan`'s rules; with no torch to write them, the plan spells the commands out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..abi.remedies import RemedySet
from ..compile import capabilities as caps
from ..compile.compile_rules import (
    NO_GNU_UNIQUE,
    backend_macros,
    kernel_cuda_flags,
    kernels_to_compile,
    nvcc_source_name,
)
from ..compile.compile_spec import CommandSpec, CommandUnit
from ..compile.unit_costs import PEAK_LOG, longest_first
from ..errors import ProjectError
from ..model.capability import CudaCapability
from .compile_plan import (
    SOURCE_SUFFIXES,
    CompilePlan,
    Toolchain,
    cuda_targets,
    fit_to_memory,
    nvcc_keep_flags,
    parallelism,
    prefix_maps,
)
from .request import BuildRequest


@dataclass(frozen=True)
class TvmFfiLibrary:
    """apache-tvm-ffi's headers and library, and the CUDA runtime's rpaths from the package."""

    include_dirs: tuple[Path, ...]
    lib_dir: Path
    runtime_rpaths: tuple[str, ...] = ()


def plan_tvm_ffi_compile(
    req: BuildRequest,
    namespace: str,
    library: TvmFfiLibrary,
    stage: Path,
    tools: Toolchain,
    remedies: RemedySet,
    dependency_includes: Sequence[Path] = (),
    recorded: Mapping[str, float] | None = None,
    peaks: Mapping[str, float] | None = None,
) -> CompilePlan[CommandSpec]:
    """The commands compiling ``req``'s variant into ``<stage>/lib/<namespace>.so``, then the
    link. nvcc is named bare: the worker's PATH finds the toolkit's, or the compiler cache's
    link to it. Schedule and jobs from ``recorded`` and ``peaks`` as in a torch build."""
    project, variant, cxx = req.project, req.variant, req.compile.cxx
    assert project.tvm_ffi is not None and variant.backend is not None
    backend = variant.backend.kind.value
    toolkit = tools.cuda
    kernels, notes = kernels_to_compile(project, (backend,), toolkit.version if toolkit else None)
    root = project.root
    obj = stage / "obj"  # where the commands run (build_temp)
    maps = prefix_maps(stage, root, remedies, req.outputs.cache_dir, cwd=obj)
    macros = [("TVM_FFI_EXTENSION_NAME", namespace), *backend_macros(backend)]
    defines = [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in macros]
    listed = (*project.tvm_ffi.include, *(i for k in kernels for i in k.include))
    includes = [root / p for p in listed]
    searched = [
        str(p) for p in dict.fromkeys((*includes, *library.include_dirs, *dependency_includes))
    ]
    search = [f"-I{p}" for p in searched]
    unique = [NO_GNU_UNIQUE] if tools.no_gnu_unique else []
    host = ["-fPIC", "-fvisibility=hidden", *maps, *unique]
    cxx_cmd = [cxx, "-std=c++17", "-O3", *host, *remedies.cxx_flags, *defines, *search]
    # (source, flags of its own) in a stable order: the binding, then each kernel's sources.
    units = [(root / p, tuple(project.tvm_ffi.cxx_flags)) for p in project.tvm_ffi.src]
    units += [(root / p, tuple(k.cxx_flags)) for k in kernels for p in k.src if p.suffix != ".cu"]
    if tools.shared_libstdcxx:  # else the static libstdc++ defines what the remedies add
        units += [(path, ()) for path in remedies.sources]
    units = [(path, flags) for path, flags in units if path.suffix in SOURCE_SUFFIXES]
    cuda_code = next((path for path, _ in units if path.suffix == ".cu"), None)
    if cuda_code is not None and toolkit is None:  # a .cu binding source needs a CUDA build
        shown = cuda_code.relative_to(root) if cuda_code.is_relative_to(root) else cuda_code
        raise ProjectError(
            f"{shown} is CUDA code, but {req.variant.name} is not a CUDA build",
            file=req.project.build_toml,
            key="tvm-ffi.src",
            hint='list .cu files only in kernels with backend = "cuda"',
        )
    link_libs = [f"-L{library.lib_dir}", "-ltvm_ffi"]
    cuda_units: list[tuple[Path, tuple[str, ...]]] = []
    capabilities: tuple[CudaCapability, ...] = ()
    split = parallelism(req, tools, 0, 0)  # C++ jobs only, unless CUDA
    if toolkit is not None:
        cuda_files = sum(1 for k in kernels for p in k.src if p.suffix == ".cu")
        targets = cuda_targets(req, kernels, tools, cuda_files)
        capabilities, split = targets.every, targets.split
        notes += targets.notes
        cuda_kernels = [k for k in kernels if k.backend == "cuda"]
        for kernel, chosen in zip(cuda_kernels, targets.per_kernel, strict=True):
            flags = (
                *caps.gencode_flags(chosen.capabilities),
                *kernel_cuda_flags(kernel.cuda_flags, toolkit.version),
            )
            cuda_units += [(root / p, flags) for p in kernel.src if p.suffix == ".cu"]
    cu_sources = [str(path) for path, _ in cuda_units]
    sources = [*(str(path) for path, _ in units), *cu_sources]
    # no torch here: every unit is torch-free
    budget = fit_to_memory(req, tools, split, sources, len(capabilities), sources, peaks or {})
    keep = nvcc_keep_flags(cu_sources, stage) if toolkit else []
    nvcc: list[str] = []
    if toolkit is not None:
        nvcc = [
            "nvcc",
            "-std=c++17",
            "-O3",
            f"--threads={budget.nvcc_threads}",
            *(f"-Xcompiler={flag}" for flag in host),
            *remedies.nvcc_flags,
            *targets.compression,
            *keep,
            *defines,
            *search,
            *(f"-I{p}" for p in toolkit.extra_includes),
        ]
        link_libs += [f"-L{toolkit.home / d}" for d in ("lib", "lib64")] + ["-lcudart"]
        link_libs += [f"-Wl,-rpath,$ORIGIN/{rel}" for rel in library.runtime_rpaths]
    commands: list[CommandUnit] = []
    for index, (source, flags) in enumerate([*units, *cuda_units]):  # ``sources``' order
        out = obj / f"{index:03d}-{source.stem}.o"
        if source.suffix == ".cu":  # a kernel's, or a binding's (with the binding's flags)
            name = nvcc_source_name(source, root)
            # its depfile, as torch's ninja asks nvcc for one: what a dev build judges the
            # unit by, and an unchanged build's inputs (builder.reuse)
            deps = ["--generate-dependencies-with-compile", "--dependency-output", f"{out}.d"]
            argv = [*nvcc, name, *flags, *deps, "-c", str(source), "-o", str(out)]
        else:  # -MMD: the compiler cache's depend mode reads the dependencies from it
            argv = [*cxx_cmd, *flags, "-MMD", "-MF", f"{out}.d", "-c", str(source), "-o", str(out)]
        commands.append(CommandUnit(str(source), str(out), tuple(argv)))
    shared_object = stage / "lib" / f"{namespace}.so"
    link = (cxx, "-shared", "-o", str(shared_object), *(u.object for u in commands), *link_libs)
    # the link keeps the units' order: only the start order follows the costs
    schedule = longest_first(
        sources,  # the commands' sources, in their order
        recorded or {},
        root=root,
        capabilities=len(capabilities),
        first=[str(root / p) for p in project.tvm_ffi.src],
        last=[str(p) for p in remedies.sources],
    )
    spec = CommandSpec(
        units=tuple(commands),
        link=link,
        shared_object=str(shared_object),
        build_temp=str(obj),
        jobs=budget.jobs,
        cuda_home=str(toolkit.home) if toolkit else None,
        capabilities=capabilities,
        include_dirs=tuple(searched),
        schedule=tuple(schedule) if schedule != sources else (),
        peak_log=str(obj / PEAK_LOG),
    )
    # the memory line: a note where the memory cut the CPUs' split, else for the log alone
    notes = (*notes, budget.line) if budget.by_memory else notes
    log_lines = () if budget.by_memory else (budget.line,)
    return CompilePlan(spec, notes, stage / "nvcc-keep" if keep else None, log_lines)
