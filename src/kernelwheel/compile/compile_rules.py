"""How kernel-builder compiles one variant, as pure rules (docs/compile.md gives each and says
why it holds): one backend per variant and its macros, nvcc's flags, ``-fno-gnu-unique``,
``cuda-minver``, and the split of the CPUs between nvcc threads and compile jobs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from ..model.project import KernelProject, KernelSection

Macro = tuple[str, str | None]  # (name, value); None: -DNAME without a value

_BACKEND_MACROS: dict[str, tuple[Macro, ...]] = {
    "cuda": (("CUDA_KERNEL", None), ("USE_CUDA", "1")),
    "rocm": (("ROCM_KERNEL", None), ("USE_ROCM", "1")),
    "xpu": (("XPU_KERNEL", None), ("USE_XPU", None)),
    "metal": (("METAL_KERNEL", None),),
    "cpu": (("CPU_KERNEL", None),),
}

# torch's cpp_extension passes these to nvcc; kernel-builder leaves them out (CUDA >= 11.8), so
# kernels may use the half/bfloat16 operators and conversions.
TORCH_NVCC_MACROS_UNDONE = (
    "__CUDA_NO_HALF_OPERATORS__",
    "__CUDA_NO_HALF_CONVERSIONS__",
    "__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "__CUDA_NO_HALF2_OPERATORS__",
)
NO_GNU_UNIQUE = "-fno-gnu-unique"
_TEMPLATE_STUB = "-static-global-template-stub="  # an nvcc flag from CUDA 12.8 on
# kernelwheel's own backend macros, from before it followed kernel-builder's one backend per
# variant; kernel-builder never defines them. Only a preprocessor line tests one (a comment that
# names one is no use of it).
_LEGACY_MACRO = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b.*?\b(KERNELWHEEL_WITH_[A-Z]+)\b")

# The memory bound's estimate per compiler thread: the largest compiler process of a relu-sized
# build (cicc over a .cu that includes torch, 16-core GPU machine) measured 2446 MiB
# (docs/build-corpus.md).
DEFAULT_MIB_PER_THREAD = 2560
# CPUs per variant when variants build side by side. A relu-sized variant (one .cu that
# includes torch, 10 capabilities) keeps about 4 of 16 CPUs busy alone, bound by nvcc's serial
# chain (preprocessing, the host front end, one capability, the host compile); on the 16-core
# GPU machine 4 such builds at once kept 67 % of the CPUs busy, 8 at once 85 %, 16 at once (one
# CPU each) 91 % but with no more variants per hour than 8 and twice the memory
# (docs/build-corpus.md).
CPUS_PER_VARIANT = 2
# Variants at once on a machine of 2-3 CPUs: two torch versions of a relu-sized build on 2 CPUs
# took 237.9 s side by side, 277.8 s one after the other (docs/build-corpus.md).
SMALL_MACHINE_VARIANTS = 2


def kernel_backends(backend: str, with_cpu_kernels: bool = False) -> tuple[str, ...]:
    """The kernel backends a variant of ``backend`` compiles."""
    if with_cpu_kernels and backend != "cpu":
        return (backend, "cpu")
    return (backend,)


def backend_macros(backend: str, with_cpu_kernels: bool = False) -> tuple[Macro, ...]:
    """The macros every source of a ``backend`` variant sees."""
    macros = _BACKEND_MACROS[backend]
    if not with_cpu_kernels:
        return macros
    own = [("KERNELWHEEL_WITH_CPU", "1")]
    if backend != "cpu":
        own.append((f"KERNELWHEEL_WITH_{backend.upper()}", "1"))
    return (*macros, *own)


def legacy_macro_warnings(
    project: KernelProject, kernels: Sequence[KernelSection], with_cpu_kernels: bool
) -> tuple[str, ...]:
    """A warning for each source line testing a ``KERNELWHEEL_WITH_*`` macro with
    ``with-cpu-kernels`` off: undefined, it silently leaves out the code it guards."""
    if with_cpu_kernels or project.torch is None:
        return ()
    files = dict.fromkeys([*project.torch.src, *(p for k in kernels for p in k.src)])
    warnings: list[str] = []
    for rel in files:
        try:
            text = (project.root / rel).read_text(errors="replace")
        except OSError:  # a missing source is the compile's error, with its own message
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if found := _LEGACY_MACRO.match(line):
                warnings.append(
                    f"warning: {rel}:{number} tests {found[1]}: kernel-builder never "
                    "defines it, kernelwheel only with with-cpu-kernels (off), so the code it "
                    "guards is left out; switch on CPU_KERNEL / CUDA_KERNEL (docs/compile.md)"
                )
    return tuple(warnings)


def kernels_to_compile(
    project: KernelProject, backends: Sequence[str], cuda_version: str | None
) -> tuple[tuple[KernelSection, ...], tuple[str, ...]]:
    """The kernels of ``backends`` to compile, and a note for each left out by ``cuda-minver``
    or by a backend ``general.backends`` lacks (a kernel added without its backend: no variant
    would ever compile it, and no build said so)."""
    chosen: list[KernelSection] = []
    listed = ", ".join(project.backends)
    notes = [
        f'warning: kernel.{k.id} has backend = "{k.backend}", which general.backends '
        f'({listed}) does not list: no variant compiles it; add "{k.backend}" to '
        f"general.backends in {project.build_toml.name}, or remove [kernel.{k.id}]"
        for k in project.kernels
        if k.backend not in project.backends
    ]
    toolkit = Version(cuda_version) if cuda_version is not None else None
    for kernel in project.kernels_for(backends):
        minver = kernel.cuda_minver if kernel.backend == "cuda" else None
        if minver is not None and toolkit is not None and toolkit < minver:
            notes.append(
                f"kernel.{kernel.id} left out: its cuda-minver {kernel.cuda_minver} is above "
                f"CUDA {cuda_version}"
            )
        else:
            chosen.append(kernel)
    return tuple(chosen), tuple(notes)


def nvcc_torch_flags(cuda_version: str) -> tuple[str, ...]:
    """nvcc flags that turn torch's nvcc macros into kernel-builder's: ours come after torch's,
    so ``-U`` undoes its ``-D``."""
    # kernel-builder compiles through find_package(Torch), whose Caffe2 cuda.cmake adds
    # --expt-extended-lambda; sources using ATen's gpu_kernel with GPU_LAMBDA need it (rotary).
    flags = tuple(f"-U{name}" for name in TORCH_NVCC_MACROS_UNDONE) + ("--expt-extended-lambda",)
    if Version(cuda_version) >= Version("11.8"):
        flags += ("-DENABLE_FP8",)
    return flags


def nvcc_source_name(source: str | Path, root: Path) -> str:
    """The flag naming a ``.cu`` to nvcc's front end as ``/kernelwheel/src/<path>``: nvcc hashes
    the file's real path into its internal symbols, so two checkouts gave two shared objects
    and the cache could swap them. -Xcudafe splits its value at commas: none may stay."""
    path = Path(source)
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    return f"-Xcudafe=--orig_src_path_name=/kernelwheel/src/{rel.replace(',', '_')}"


def kernel_cuda_flags(flags: Sequence[str], cuda_version: str) -> tuple[str, ...]:
    """A kernel's ``cuda-flags``, without what nvcc < 12.8 lacks (as kernel-builder does)."""
    if Version(cuda_version) >= Version("12.8"):
        return tuple(flags)
    return tuple(f for f in flags if not f.startswith(_TEMPLATE_STUB))


def variants_at_once(
    requested: int | None,
    variants: int,
    cpus: int,
    *,
    memory_mib: int | None = None,
    mib_per_thread: int = DEFAULT_MIB_PER_THREAD,
) -> int:
    """Variants compiling at once (``requested``, else auto): one per :data:`CPUS_PER_VARIANT`
    CPUs, at least :data:`SMALL_MACHINE_VARIANTS` (at most the CPUs), so one's serial stages
    leave no CPU idle, and at most what the memory holds at a variant's least, two threads."""
    wanted = requested
    if wanted is None:
        wanted = max(min(cpus, SMALL_MACHINE_VARIANTS), cpus // CPUS_PER_VARIANT)
        if memory_mib is not None:
            wanted = min(wanted, memory_mib // (2 * mib_per_thread))
    return max(1, min(wanted, variants))


@dataclass(frozen=True)
class Parallelism:
    """Compile jobs, and threads per nvcc: at their peak within the CPUs, plus one C++ job."""

    jobs: int
    nvcc_threads: int


def nvcc_parallelism(
    jobs: int, cpus: int, requested: int | None, capability_count: int, *, cuda_files: int = 1
) -> Parallelism:
    """The CPU budget (``jobs``, at most ``cpus``) split between jobs and nvcc threads: each
    ``.cu`` an equal share as threads, at most one per capability (nvcc's ``--threads`` splits
    by target, as kernel-builder), unless ``requested``; what is left (at least one job) for
    the C++ sources, so the binding compiles beside a kernel. The memory cuts it later."""
    budget = max(1, min(jobs, cpus))
    share = max(1, budget // max(1, cuda_files))
    threads = min(requested or min(share, max(1, capability_count)), budget)
    if cuda_files * threads <= budget:  # every .cu at once; the rest of the budget: C++ jobs,
        # at least one: nvcc's serial stages (preprocessing, the host compile) leave its
        # threads idle much of the time, so the binding beside it costs one thread at most
        jobs = cuda_files + max(min(1, budget - 1), budget - cuda_files * threads)
    else:
        jobs = budget // threads
    return Parallelism(jobs=max(1, jobs), nvcc_threads=threads)


SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu")  # what compiles; the rest are headers


def include_file_notes(project: KernelProject, kernels: Sequence[KernelSection]) -> tuple[str, ...]:
    """A warning for each ``include`` entry of the binding or of ``kernels`` that is a file: the
    compiler searches folders, so nothing is found through it (gcc's "not a directory", once
    per unit, names neither the key nor the fix)."""
    binding = project.torch.include if project.torch is not None else ()
    tables = [("torch", binding), *((f"kernel.{k.id}", k.include) for k in kernels)]
    return tuple(
        f"warning: {table}.include: {path.as_posix()!r} is a file, not a folder: the compiler "
        f"finds no header through it; name the folder that holds it, {path.parent.as_posix()!r}"
        for table, paths in tables
        for path in paths
        if (project.root / path).is_file()
    )


def shared_source_notes(kernels: Sequence[KernelSection]) -> tuple[str, ...]:
    """A warning for each source kernels with different flags list: it compiles once, with all
    of their flags (kernel-builder's rule), which neither author may expect. A header is
    compiled by no flags of its own: each unit including it has its kernel's."""
    listed: dict[Path, list[KernelSection]] = {}
    for kernel in kernels:
        for src in dict.fromkeys(s for s in kernel.src if s.suffix in SOURCE_SUFFIXES):
            listed.setdefault(src, []).append(kernel)
    notes = []
    for src, owners in listed.items():
        cuda = src.suffix == ".cu"
        flags = [k.cuda_flags if cuda else k.cxx_flags for k in owners]
        if len(owners) < 2 or len(set(flags)) < 2:
            continue
        key = "cuda-flags" if cuda else "cxx-flags"
        each = "; ".join(f"kernel.{k.id}: {list(f)}" for k, f in zip(owners, flags, strict=True))
        notes.append(
            f"warning: {src.as_posix()} is listed by kernels with different {key} ({each}): it "
            "compiles once, with all of them (kernel-builder's rule); give each kernel its own "
            "copy of the file if they must differ"
        )
    return tuple(notes)
