"""What a build of one variant is asked (:class:`BuildRequest`, of frozen parts) and gives
(:class:`BuiltWheel`): values only; :func:`.service.plan_requests` makes them from options."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from ..model.capability import CudaCapability
from ..model.project import Framework, KernelProject
from ..model.recipes import VariantRecipe
from ..model.sources import PipSources
from ..model.variant import LocalVersionStyle, Variant

if TYPE_CHECKING:  # the types only: their modules probe
    from ..compile.memory import MemoryLimit
    from ..plan.versioning import GitState
    from ..toolchain.cross import CrossPlan
    from ..toolchain.deps import HeaderPlan
    from ..toolchain.envs import EnvSpec


class BuildKind(str, Enum):
    """How a project is built: decided once, from build.toml, when the request is made."""

    TORCH = "torch"  # a torch extension, per torch or on the stable ABI (builder.pipeline)
    TVM_FFI = "tvm-ffi"  # a tvm-ffi library, no torch (builder.tvm_ffi)
    NOARCH = "noarch"  # pure Python: one wheel for all of its variants (builder.noarch)

    @classmethod
    def of(cls, project: KernelProject) -> BuildKind:
        if project.noarch:
            return cls.NOARCH
        return cls.TVM_FFI if project.framework is Framework.TVM_FFI else cls.TORCH


@dataclass(frozen=True)
class VariantBudget:
    """The variant's share of the run's CPUs and memory, and the compiler threads' settings."""

    jobs: int = 2  # its CPU budget (--jobs, split between the variants at once)
    cpus: int = 1  # its share of the CPUs this process may use
    memory: MemoryLimit | None = None  # its share of the memory available (None: unknown)
    nvcc_threads: int | None = None  # None: one per capability of the widest kernel
    memory_per_thread: int | None = None  # MiB a compiler thread needs (None: the estimates)


@dataclass(frozen=True)
class CudaSetup:
    """Where the CUDA toolkit is and which capabilities a CUDA variant compiles for."""

    home: Path | None = None  # --cuda-home, else a "system" toolchain's (builder.preflight)
    default_capabilities: tuple[CudaCapability, ...] = ()
    # default_capabilities are the GPUs' (a default build): messages say how to build them all
    for_gpus_here: bool = False
    system_paths: tuple[Path, ...] = ()  # where a "system" toolchain may live
    # the cuda-capabilities option: replaces build.toml's and the recipe's lists
    capabilities: tuple[CudaCapability, ...] | None = None
    fatbin_compression: str = "default"  # nvcc --compress-mode (CUDA >= 12.8)
    with_cpu_kernels: bool = False  # GPU variants also compile the cpu kernels (docs/compile.md)


@dataclass(frozen=True)
class Outputs:
    """Where the build writes, and what its wheel and log say."""

    out_dir: Path
    work_dir: Path
    cache_dir: Path
    hub_layout: Path | None = None  # also write the built wheel as a Hub kernel tree there
    manylinux: str | None = "manylinux_2_28"  # None: keep linux_<arch>, only check
    best_effort: bool = False  # keep a wheel that cannot comply (linux_<arch>) instead of failing
    local_version_style: LocalVersionStyle = LocalVersionStyle.DOTTED
    # The options set above their defaults, with their layers: the top of the variant's log.
    options_preamble: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompileSettings:
    """How the variant compiles: its compiler, depends' headers, cache and checks."""

    # The C++ compiler that really compiles ($CXX, else c++; a cross build's own): probed.
    cxx: str = "c++"
    cross: CrossPlan | None = None  # a build for another arch: planned with the request
    headers: HeaderPlan | None = None  # where the compiled kernels' depends come from
    no_ccache: bool = False  # compile everything: no ccache, no reuse of an unchanged build
    keep_intermediates: bool = False  # keep nvcc's --keep files after the compile
    ccache_remote: str | None = None  # ccache's remote storage URL(s), shared across machines
    recipes_dir: Path | None = None  # where ccache.toml may be (None: the bundled recipes)
    abi_remedies: bool = True  # the ABI remedies (abi/remedies, docs/portability.md)
    load_check: bool = True  # import the linked extension before the wheel (builder/load_check)


@dataclass(frozen=True)
class Environment:
    """The interpreter the variant builds with: one given, or how to make one."""

    spec: EnvSpec | None = None  # how to create the environment; None when python is given
    python: Path | None = None  # use this interpreter's torch instead of creating an environment
    sources: PipSources = PipSources()  # where pip looks (a tvm-ffi build's environment)


@dataclass(frozen=True)
class BuildRequest:
    project: KernelProject
    variant: Variant
    version: str  # base version, without the local part
    # The variant's recipe (a tvm-ffi build's pins; a noarch build's: its first variant's).
    recipe: VariantRecipe
    outputs: Outputs
    env: Environment = Environment()
    budget: VariantBudget = VariantBudget()
    cuda: CudaSetup = CudaSetup()
    compile: CompileSettings = CompileSettings()
    git: GitState | None = None  # the project's git state (the Hub export's provenance)
    kind: BuildKind = BuildKind.TORCH  # which builder runs it (the one entry dispatches)
    # The variants one wheel serves: a noarch build's every one (variant first), else variant.
    serves: tuple[Variant, ...] = ()

    def log_header(self) -> str:
        """The first lines of the variant's log: what is built, with which options."""
        lines = [f"kernelwheel build of {self.project.name} for {self.variant.name}"]
        if self.outputs.options_preamble:
            lines += ["options (set above their defaults):"]
            lines += [f"  {line}" for line in self.outputs.options_preamble]
        return "".join(f"{line}\n" for line in lines)

    @property
    def log(self) -> Path:
        """The variant's full log (environment, compiler, repair), named in its errors."""
        return self.outputs.out_dir / "logs" / f"{self.variant.name}.log"


@dataclass(frozen=True)
class BuiltWheel:
    variant: Variant
    path: Path
    namespace: str
    log: Path
    compliant: bool = True  # passed the ABI check for its tag
    capabilities: tuple[CudaCapability, ...] = ()  # CUDA capabilities compiled for
    warnings: tuple[str, ...] = ()  # one line per unit that warned (compile.diagnostics)
