"""From a build request and the probed :class:`Toolchain` to the spec the worker runs: a torch
build's :class:`CompileSpec`, a tvm-ffi build's :class:`CommandSpec` (no torch to write them, the
commands spelled out). Pure, so each rule of docs/compile.md is testable alone."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from ..abi.remedies import RemedySet
from ..compile import capabilities as caps
from ..compile import memory
from ..compile.compile_rules import (
    NO_GNU_UNIQUE,
    SOURCE_SUFFIXES,
    Macro,
    Parallelism,
    backend_macros,
    include_file_notes,
    kernel_backends,
    kernel_cuda_flags,
    kernels_to_compile,
    legacy_macro_warnings,
    nvcc_parallelism,
    nvcc_source_name,
    nvcc_torch_flags,
    shared_source_notes,
)
from ..compile.compile_spec import CommandSpec, CommandUnit, CompileSpec, SourceFlags
from ..compile.torch_free import sources_naming, torch_free_sources
from ..compile.unit_costs import PEAK_LOG, longest_first, relative
from ..errors import ProjectError, ToolchainError
from ..model.capability import CudaCapability, joined
from ..model.project import KernelProject, KernelSection
from ..model.variant import CxxAbi
from ..toolchain.envs import CudaToolkit, refuse_unsupported
from .request import BuildRequest

REQUESTED_LIMITED_API = "0x03090000"  # CPython 3.9: the oldest stable ABI we target


@dataclass(frozen=True)
class Toolchain:
    """What the environment step found out about the compilers, as plain facts."""

    cuda: CudaToolkit | None = None
    nvcc_supports: tuple[str, ...] | None = None  # nvcc --list-gpu-arch; None: unknown
    shared_libstdcxx: bool = True  # the C++ compiler links libstdc++ as a shared library
    no_gnu_unique: bool = True  # the C++ compiler accepts -fno-gnu-unique
    cpus: int = 1  # the CPUs this build may use
    memory: memory.MemoryLimit | None = None  # available to the compilers; None: unknown


Spec = TypeVar("Spec", CompileSpec, CommandSpec)


@dataclass(frozen=True)
class CompilePlan(Generic[Spec]):
    """A torch build's spec, or a tvm-ffi build's commands, as the worker runs it."""

    spec: Spec
    notes: tuple[str, ...] = ()  # for the log and the user: kernels or capabilities left out
    keep_dir: Path | None = None  # nvcc's --keep-dir, to create before compiling
    # for the log alone: the jobs and nvcc threads and what bound them, unless memory (a note)
    log_lines: tuple[str, ...] = ()


def fatbin_compression_flags(mode: str, cuda_version: str) -> tuple[list[str], str | None]:
    """nvcc flags for a fatbin compression mode, and a note when the toolkit cannot honour it.
    ``--compress-mode`` exists from CUDA 12.8; older nvcc only knows ``-no-compress``."""
    if mode == "default":
        return [], None
    major, minor = (int(x) for x in cuda_version.split(".")[:2])
    if (major, minor) >= (12, 8):
        return [f"--compress-mode={mode}"], None
    if mode == "none":
        return ["-no-compress"], None
    note = f"fatbin compression {mode!r} needs nvcc >= 12.8; CUDA {cuda_version} keeps its default"
    return [], note


def nvcc_keep_flags(sources: Sequence[str], stage: Path) -> list[str]:
    """Reproducible CUDA objects: nvcc's temporary names (``tmpxft_<pid>_…``) reach the object's
    local symbols and module id; with ``--keep`` they are named after the source instead
    (``-frandom-seed`` does not reach them). Sources sharing a base name would share those
    files in parallel: then nothing is kept (not byte-reproducible)."""
    stems = [Path(s).name.rsplit(".", 1)[0] for s in sources if s.endswith(".cu")]
    if len(set(stems)) != len(stems):
        return []
    return ["--keep", f"--keep-dir={stage / 'nvcc-keep'}"]


def _sources(paths: Sequence[Path], root: Path) -> list[str]:
    return [str(root / p) for p in paths if p.suffix in SOURCE_SUFFIXES]


def _check_object_names(sources: Sequence[str], project: KernelProject) -> None:
    """setuptools names objects after the source path minus its suffix: a.cpp and a.cu clash."""
    seen: dict[str, str] = {}
    for src in sources:
        stem = str(Path(src).with_suffix(""))
        if stem in seen:
            raise ProjectError(
                f"sources {Path(seen[stem]).relative_to(project.root)} and "
                f"{Path(src).relative_to(project.root)} would compile to the same object file",
                file=project.build_toml,
                hint="rename one of them (e.g. add a _cpu or _cuda suffix)",
            )
        seen[stem] = src


# The macro that carries the build id: only the units that name it get it (_with_namespace).
NAMESPACE_MACRO = "TORCH_EXTENSION_NAME"
TVM_FFI_NAMESPACE_MACRO = "TVM_FFI_EXTENSION_NAME"  # a tvm-ffi build's


def _defines(req: BuildRequest, backend: str) -> tuple[Macro, ...]:
    defines: list[Macro] = [("Py_LIMITED_API", REQUESTED_LIMITED_API)]
    if req.variant.cxxabi is not None:
        cxx11 = req.variant.cxxabi is CxxAbi.CXX11
        defines.append(("_GLIBCXX_USE_CXX11_ABI", "1" if cxx11 else "0"))
    if req.variant.stable_abi:
        # torch's headers then offer only the stable API of that release (torch/csrc/stable,
        # torch/headeronly) and refuse to compile any other torch header.
        assert req.variant.torch is not None
        defines.append(("TORCH_TARGET_VERSION", req.variant.torch.target_version))
    return (*defines, *backend_macros(backend, req.cuda.with_cpu_kernels))


def prefix_maps(
    stage: Path, root: Path, remedies: RemedySet, cache: Path, cwd: Path | None = None
) -> list[str]:
    """Build paths mapped out of debug info, so the same sources give the same bytes anywhere.
    The cache folder first: gcc tries the last map first, so the work folder inside it keeps
    its own name. With ``cwd`` each folder is also mapped relative to it (ccache's base_dir
    passes such paths), shortest first; the torch worker does so itself, with its own maps."""
    pairs = [
        (cache, "/kernelwheel/cache"),
        (stage, "/kernelwheel/build"),
        (root, "/kernelwheel/src"),
        (remedies.data_dir, "/kernelwheel/data"),
    ]
    maps = {str(old): new for old, new in pairs}
    if cwd is not None:
        for old, new in list(maps.items()):
            maps.setdefault(os.path.relpath(os.path.normpath(old), cwd), new)
        maps = dict(sorted(maps.items(), key=lambda item: len(item[0])))
    return [f"-ffile-prefix-map={old}={new}" for old, new in maps.items()]


def _capability_source(req: BuildRequest, kernels: Sequence[KernelSection]) -> tuple[str, str]:
    """(where the list came from, the key to edit) for messages about it."""
    if req.cuda.capabilities:
        return "the cuda-capabilities option", "--cuda-capabilities (or its layers)"
    if any(k.cuda_capabilities for k in kernels):
        return str(req.project.build_toml), "cuda-capabilities"
    return f"recipe of {req.variant.name}", "the recipe's capabilities"


def per_kernel_capabilities(
    req: BuildRequest, kernels: Sequence[KernelSection], toolkit: CudaToolkit
) -> tuple[caps.KernelCapabilities, ...]:
    """Each CUDA kernel's capabilities; none built by this toolkit is an error (kernel-builder)."""
    if req.cuda.capabilities:
        return tuple(caps.KernelCapabilities(k.id, req.cuda.capabilities) for k in kernels)
    out: list[caps.KernelCapabilities] = []
    for kernel in kernels:
        wanted = kernel.cuda_capabilities
        chosen = caps.for_kernel(kernel.id, wanted, req.cuda.default_capabilities)
        if not chosen.capabilities and req.cuda.for_gpus_here:
            raise ProjectError(
                f"none of {joined(wanted)} runs on this machine's GPUs "
                f"({joined(req.cuda.default_capabilities)}), which a default build compiles for",
                file=req.project.build_toml,
                key=f"kernel.{kernel.id}.cuda-capabilities",
                hint="pass --cuda-capabilities all to build the kernel's whole list anyway",
            )
        if not chosen.capabilities:
            targets = caps.targets_of(req.cuda.default_capabilities)
            raise ProjectError(
                f"none of {joined(wanted)} is built by CUDA {toolkit.version}, whose targets "
                f"are {joined(targets)}",
                file=req.project.build_toml,
                key=f"kernel.{kernel.id}.cuda-capabilities",
                hint="list a capability of this toolkit, or leave this CUDA version out "
                "(general.cuda maxver, or --skip)",
            )
        out.append(chosen)
    return tuple(out)


def _all_capabilities(
    req: BuildRequest, per_kernel: Sequence[caps.KernelCapabilities]
) -> tuple[CudaCapability, ...]:
    """Every capability compiled (the extension-wide -gencode list)."""
    chosen = caps.sort_capabilities(c for k in per_kernel for c in k.capabilities)
    found = chosen or req.cuda.capabilities or req.cuda.default_capabilities
    if not found:
        raise ToolchainError(
            f"no CUDA capabilities for {req.variant.name}",
            hint="set cuda-capabilities in build.toml or a default list in the recipe",
        )
    return tuple(found)


def parallelism(
    req: BuildRequest, tools: Toolchain, capabilities: int, cuda_files: int
) -> Parallelism:
    """The split of the variant's CPUs (CUDA: ``capabilities`` > 0), before the memory's cut."""
    threads = req.budget.nvcc_threads if capabilities else None
    jobs = req.budget.jobs
    return nvcc_parallelism(jobs, tools.cpus, threads, capabilities, cuda_files=cuda_files)


@dataclass(frozen=True)
class CudaTargets:
    """What every CUDA build kind decides alike, with the notes on what was left out."""

    per_kernel: tuple[caps.KernelCapabilities, ...]
    every: tuple[CudaCapability, ...]
    split: Parallelism
    compression: tuple[str, ...]
    notes: tuple[str, ...]


def fit_to_memory(
    req: BuildRequest,
    tools: Toolchain,
    split: Parallelism,
    sources: Sequence[str],
    targets: int,
    torch_free: Sequence[str],
    peaks: Mapping[str, float],
) -> memory.Fit:
    """``split`` cut to the memory by each unit's measured ``peaks``, else its estimate."""
    root = req.project.root.resolve()
    units = memory.units_of(
        [relative(s, root) for s in sources],
        targets=targets,
        torch_free=[relative(s, root) for s in torch_free],
        measured=peaks,
        per_thread=req.budget.memory_per_thread,
    )
    return memory.fit(split.jobs, split.nvcc_threads, units, tools.memory)


def cuda_targets(
    req: BuildRequest, kernels: Sequence[KernelSection], tools: Toolchain, cuda_files: int
) -> CudaTargets:
    toolkit = tools.cuda
    assert toolkit is not None
    per_kernel = per_kernel_capabilities(req, [k for k in kernels if k.backend == "cuda"], toolkit)
    every = _all_capabilities(req, per_kernel)
    if tools.nvcc_supports is not None:
        where, key = _capability_source(req, kernels)
        refuse_unsupported(every, tools.nvcc_supports, toolkit, where=where, hint_key=key)
    most = max((len(k.capabilities) for k in per_kernel), default=len(every))
    split = parallelism(req, tools, most, cuda_files)
    compression, note = fatbin_compression_flags(req.cuda.fatbin_compression, toolkit.version)
    targets = joined(caps.targets_of(req.cuda.default_capabilities))
    notes = [
        f"kernel.{k.kernel}: cuda-capabilities {joined(k.dropped)} not built: this CUDA "
        f"compiles for {targets}"
        for k in per_kernel
        if k.dropped
    ]
    notes += [note] if note else []
    return CudaTargets(per_kernel, every, split, tuple(compression), tuple(notes))


def _source_flags(
    project: KernelProject,
    kernels: Sequence[KernelSection],
    per_kernel: Sequence[caps.KernelCapabilities],
    every: tuple[CudaCapability, ...],
    cuda_version: str | None,
) -> tuple[SourceFlags, ...]:
    """Per-source flags where a section's differ from the extension's. A source several
    kernels list compiles once, as kernel-builder's CMake appends each kernel's properties:
    with every listing kernel's flags in build.toml's order and their capabilities' union."""
    assert project.torch is not None
    by_kernel = {k.kernel: k.capabilities for k in per_kernel}
    out = [
        SourceFlags(source, tuple(project.torch.cxx_flags))
        for source in _sources(project.torch.src, project.root)
        if project.torch.cxx_flags and not source.endswith(".cu")
    ]
    flags: dict[str, list[str]] = {}
    capabilities: dict[str, list[CudaCapability]] = {}
    for kernel in kernels:
        own = by_kernel.get(kernel.id, every)
        cuda_flags = kernel_cuda_flags(kernel.cuda_flags, cuda_version) if cuda_version else ()
        for source in _sources(kernel.src, project.root):
            cuda_source = source.endswith(".cu")
            flags.setdefault(source, []).extend(cuda_flags if cuda_source else kernel.cxx_flags)
            if cuda_source:
                capabilities.setdefault(source, []).extend(own)
    if cuda_version is not None:  # every .cu named to nvcc by its place in the project
        cuda_sources = [*_sources(project.torch.src, project.root), *flags]
        for source in dict.fromkeys(s for s in cuda_sources if s.endswith(".cu")):
            flags.setdefault(source, []).insert(0, nvcc_source_name(source, project.root))
    for source, listed in flags.items():
        union = caps.sort_capabilities(capabilities.get(source, ()))
        gencode = tuple(caps.gencode_flags(union)) if union and tuple(union) != every else ()
        if listed or gencode:
            out.append(SourceFlags(source, tuple(listed), gencode))
    return tuple(out)


def _with_namespace(
    source_flags: tuple[SourceFlags, ...], users: Sequence[str], namespace: str
) -> tuple[SourceFlags, ...]:
    """The build id's define for the macro's ``users`` only: the id hashes every source, so on
    every command line one edit would recompile (and miss the cache for) every unit."""
    define = f"-D{NAMESPACE_MACRO}={namespace}"
    given = {entry.source: entry for entry in source_flags}
    out = [
        entry._replace(flags=(define, *entry.flags)) if entry.source in users else entry
        for entry in source_flags
    ]
    out += [SourceFlags(source, (define,)) for source in users if source not in given]
    return tuple(out)


def _refuse_cuda_sources(project: KernelProject, kernels: Sequence[KernelSection]) -> None:
    """A ``.cu`` listed where a variant without CUDA compiles it (a CPU kernel's ``src``, the
    binding's), refused before torch's compile gives up with "CUDA was not found"."""
    assert project.torch is not None
    listed = [("torch.src", project.torch.src), *((f"kernel.{k.id}.src", k.src) for k in kernels)]
    for key, sources in listed:
        for source in sources:
            if Path(source).suffix == ".cu":
                raise ProjectError(
                    f"{Path(source).as_posix()} is a CUDA source, and a variant without CUDA "
                    "(CPU) compiles C++ only",
                    file=project.build_toml,
                    key=key,
                    hint='list it in the src of a kernel with backend = "cuda" (its variants '
                    "compile it with nvcc)",
                )


def _all_sources(
    project: KernelProject, kernels: Sequence[KernelSection], tools: Toolchain, remedies: RemedySet
) -> list[str]:
    assert project.torch is not None
    if tools.cuda is None:
        _refuse_cuda_sources(project, kernels)
    sources = _sources(project.torch.src, project.root)
    if tools.shared_libstdcxx:
        # else: a compiler without a shared libstdc++ links a static copy, which already defines
        # the helpers the compat source provides (the two would clash at link time).
        sources += [str(p) for p in remedies.sources]
    for kernel in kernels:
        sources += _sources(kernel.src, project.root)
    sources = list(dict.fromkeys(sources))  # a source several kernels list compiles once
    _check_object_names(sources, project)
    return sources


def plan_compile(
    req: BuildRequest,
    namespace: str,
    stage: Path,
    tools: Toolchain,
    remedies: RemedySet,
    dependency_includes: Sequence[Path] = (),
    recorded: Mapping[str, float] | None = None,
    peaks: Mapping[str, float] | None = None,
) -> CompilePlan[CompileSpec]:
    """The compile of ``req``'s variant as kernel-builder would do it (docs/compile.md)."""
    project = req.project
    assert project.torch is not None
    backend = req.variant.backend.kind.value if req.variant.backend is not None else "cpu"
    cuda_version = tools.cuda.version if tools.cuda else None
    wanted = kernel_backends(backend, req.cuda.with_cpu_kernels)
    kernels, notes = kernels_to_compile(project, wanted, cuda_version)
    notes += legacy_macro_warnings(project, kernels, req.cuda.with_cpu_kernels)
    sources = _all_sources(project, kernels, tools, remedies)
    include_dirs = [str(stage / "include")]
    include_dirs += [str(project.root / p) for p in project.torch.include]
    include_dirs += [str(project.root / p) for k in kernels for p in k.include]
    maps = prefix_maps(stage, project.root, remedies, req.outputs.cache_dir)
    unique = [NO_GNU_UNIQUE] if tools.no_gnu_unique else []
    if tools.cuda is not None:
        # The toolkit's headers before torch's nvidia packages' copies: their path is the same
        # for every torch variant, so the compiler cache shares their objects.
        include_dirs += [str(tools.cuda.home / "include")]
        include_dirs += [str(p) for p in tools.cuda.extra_includes]
    include_dirs += [str(p) for p in dependency_includes]
    torch_free = torch_free_sources(sources, include_dirs, project.root)
    cuda: CudaTargets | None = None
    if tools.cuda is not None:
        cuda = cuda_targets(req, kernels, tools, sum(1 for s in sources if s.endswith(".cu")))
    split = cuda.split if cuda else parallelism(req, tools, 0, 0)
    every = cuda.every if cuda else ()
    budget = fit_to_memory(req, tools, split, sources, len(every), torch_free, peaks or {})
    nvcc_flags: tuple[str, ...] = ()
    if tools.cuda is not None and cuda is not None:
        host = [*(f"-Xcompiler={flag}" for flag in unique), *remedies.nvcc_flags]
        host += [f"-Xcompiler={flag}" for flag in maps]
        nvcc_flags = ("-O3", f"--threads={budget.nvcc_threads}")
        nvcc_flags += (*nvcc_torch_flags(tools.cuda.version), *host)
        nvcc_flags += (*caps.gencode_flags(cuda.every), *cuda.compression)
    keep = nvcc_keep_flags(sources, stage) if cuda else []
    # Longest first (compile/unit_costs): the remedies' compat source, the cheapest unit, last;
    # the binding (torch's headers) first until a build has timed it.
    schedule = longest_first(
        sources,
        recorded or {},
        root=project.root,
        capabilities=len(every),
        first=_sources(project.torch.src, project.root),
        last=[str(p) for p in remedies.sources],
    )
    spec = CompileSpec(
        name=namespace,
        sources=tuple(sources),
        schedule=tuple(schedule) if schedule != sources else (),
        include_dirs=tuple(dict.fromkeys(include_dirs)),
        define_macros=_defines(req, backend),
        cxx_flags=("-O3", "-fvisibility=hidden", *unique, *maps, *remedies.cxx_flags),
        nvcc_flags=(*nvcc_flags, *keep),
        cuda=cuda is not None,
        cuda_home=str(tools.cuda.home) if tools.cuda else None,
        build_temp=str(stage / "obj"),
        build_lib=str(stage / "lib"),
        jobs=budget.jobs,
        requested_limited_api=REQUESTED_LIMITED_API,
        capabilities=every,
        source_flags=_with_namespace(
            _source_flags(project, kernels, cuda.per_kernel if cuda else (), every, cuda_version),
            sources_naming(NAMESPACE_MACRO, sources, include_dirs, project.root),
            namespace,
        ),
        torch_free=torch_free,
        peak_log=str(stage / "obj" / PEAK_LOG),
    )
    all_notes = (*notes, *include_file_notes(project, kernels), *shared_source_notes(kernels))
    all_notes += cuda.notes if cuda else ()
    all_notes += (budget.line,) if budget.by_memory else ()
    log_lines = () if budget.by_memory else (budget.line,)
    return CompilePlan(spec, all_notes, stage / "nvcc-keep" if keep else None, log_lines)


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
    *,
    root: Path | None = None,
) -> CompilePlan[CommandSpec]:
    """The commands compiling ``req``'s variant into ``<stage>/lib/<namespace>.so``, then the
    link. nvcc is named bare: the worker's PATH finds the toolkit's, or the compiler cache's
    link to it. Schedule and jobs from ``recorded`` and ``peaks`` as in a torch build.
    ``root``: the project as the commands name it (its link in ``stage``, so that another
    checkout's compile hits the compiler cache), else its own folder. The namespace is
    defined only for the units that name its macro, as a torch build's (:func:`_with_namespace`)."""
    project, variant, cxx = req.project, req.variant, req.compile.cxx
    assert project.tvm_ffi is not None and variant.backend is not None
    backend = variant.backend.kind.value
    toolkit = tools.cuda
    kernels, notes = kernels_to_compile(project, (backend,), toolkit.version if toolkit else None)
    root = root or project.root
    obj = stage / "obj"  # where the commands run (build_temp)
    maps = prefix_maps(stage, root, remedies, req.outputs.cache_dir, cwd=obj)
    macros = backend_macros(backend)
    defines = [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in macros]
    listed = (*project.tvm_ffi.include, *(i for k in kernels for i in k.include))
    includes = (*(root / p for p in listed), *library.include_dirs, *dependency_includes)
    searched = [str(p) for p in dict.fromkeys(includes)]
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
    users = sources_naming(TVM_FFI_NAMESPACE_MACRO, sources, searched, root)
    nvcc: list[str] = []
    if toolkit is not None:
        nvcc = ["nvcc", "-std=c++17", "-O3", f"--threads={budget.nvcc_threads}"]
        nvcc += [f"-Xcompiler={flag}" for flag in host]
        nvcc += [*remedies.nvcc_flags, *targets.compression, *keep, *defines, *search]
        nvcc += [f"-I{p}" for p in toolkit.extra_includes]
        link_libs += [f"-L{toolkit.home / d}" for d in ("lib", "lib64")] + ["-lcudart"]
        link_libs += [f"-Wl,-rpath,$ORIGIN/{rel}" for rel in library.runtime_rpaths]
    commands: list[CommandUnit] = []
    for index, (source, own) in enumerate([*units, *cuda_units]):  # ``sources``' order
        out = obj / f"{index:03d}-{source.stem}.o"
        named = str(source) in users
        flags = (f"-D{TVM_FFI_NAMESPACE_MACRO}={namespace}", *own) if named else own
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
