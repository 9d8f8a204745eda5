"""What a build of one variant is asked to do (:class:`BuildRequest`) and what it gives
(:class:`BuiltWheel`); :func:`plan_requests` makes the requests from the plan and the resolved
options, the one place options become build settings."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from .._util import RUNNER, Runner
from ..compile.memory import Budget
from ..compile.memory import available as available_memory
from ..errors import ProjectError
from ..model.capability import CudaCapability
from ..model.deps import DependencyTable, load_deps
from ..model.project import Framework, KernelProject
from ..model.recipes import Recipes, VariantRecipe
from ..model.sources import PipSources
from ..model.variant import LocalVersionStyle, Variant
from ..plan.options import Options, resolve_jobs
from ..plan.toolchains import require_toolchains
from ..plan.versioning import GitState
from ..toolchain.cross import CrossPlan, plan_for
from ..toolchain.deps import HeaderPlan, plan_headers
from ..toolchain.envs import EnvInfo, EnvSpec, env_spec_for
from .preflight import system_toolkit
from .wheelmeta import check_card

__all__ = ["BuildKind", "BuildRequest", "BuiltWheel", "plan_requests"]


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
class BuildRequest:
    project: KernelProject
    variant: Variant
    version: str  # base version, without the local part
    out_dir: Path
    work_dir: Path
    cache_dir: Path
    env_spec: EnvSpec | None  # how to create the environment; None when python is given
    # The variant's recipe (a tvm-ffi build's pins; a noarch build's: its first variant's).
    recipe: VariantRecipe
    python: Path | None = None  # use this interpreter's torch instead of creating an environment
    cuda_home: Path | None = None
    default_capabilities: tuple[CudaCapability, ...] = ()
    cuda_system_paths: tuple[Path, ...] = ()  # where a "system" toolchain may live
    jobs: int = 2  # this variant's CPU budget (--jobs, split between the variants at once)
    cpus: int = 1  # this variant's share of the CPUs this process may use
    memory_mib: int | None = None  # its share of the memory available (None: unknown)
    memory_source: str = ""  # where that figure came from, for the log (compile/memory)
    # The C++ compiler that really compiles: $CXX (else c++), a cross build's cross compiler.
    # The facts the compile plan needs (a shared libstdc++, -fno-gnu-unique, the target libc)
    # are probed from it.
    cxx: str = "c++"
    manylinux: str | None = "manylinux_2_28"  # None: keep linux_<arch>, only check
    best_effort: bool = False  # keep a wheel that cannot comply (linux_<arch>) instead of failing
    cross: CrossPlan | None = None  # a build for another arch: planned with the request
    local_version_style: LocalVersionStyle = LocalVersionStyle.DOTTED
    fatbin_compression: str = "default"  # nvcc --compress-mode (CUDA >= 12.8)
    # the cuda-capabilities option: replaces build.toml's and the recipe's lists
    cuda_capabilities: tuple[CudaCapability, ...] | None = None
    # A default build's targets are the capabilities of the GPUs present (default_capabilities
    # holds them, not the recipe's list): messages say so and how to build them all.
    for_gpus_here: bool = False
    headers: HeaderPlan = HeaderPlan()  # where the compiled kernels' depends come from
    with_cpu_kernels: bool = False  # GPU variants also compile the cpu kernels (docs/compile.md)
    nvcc_threads: int | None = None  # None: one per capability of the widest kernel
    memory_per_thread: int | None = None  # MiB a compiler thread needs (None: the default)
    git: GitState | None = None  # the project's git state (the Hub export's provenance)
    no_ccache: bool = False  # compile everything: no ccache, no reuse of an unchanged build
    keep_intermediates: bool = False  # keep nvcc's --keep files after the compile
    ccache_remote: str | None = None  # ccache's remote storage URL(s), shared across machines
    recipes_dir: Path | None = None  # where ccache.toml may be (None: the bundled recipes)
    abi_remedies: bool = True  # the ABI remedies (abi/remedies, docs/portability.md)
    load_check: bool = True  # import the linked extension before the wheel (builder/load_check)
    sources: PipSources = PipSources()  # where pip looks (a tvm-ffi build's environment)
    # The options set above their defaults, each with its layer (Options.preamble): the top
    # of the variant's log.
    options_preamble: tuple[str, ...] = ()
    hub_layout: Path | None = None  # also write the built wheel as a Hub kernel tree there
    kind: BuildKind = BuildKind.TORCH  # which builder runs it (the one entry dispatches)
    # The variants one wheel serves: a noarch build's every selected variant (variant is the
    # first); a compiled build's is variant alone.
    serves: tuple[Variant, ...] = ()

    def log_header(self) -> str:
        """The first lines of the variant's log: what is built, and the options it was built
        with."""
        lines = [f"kernelwheel build of {self.project.name} for {self.variant.name}"]
        if self.options_preamble:
            lines += ["options (set above their defaults):"]
            lines += [f"  {line}" for line in self.options_preamble]
        return "".join(f"{line}\n" for line in lines)

    @property
    def log(self) -> Path:
        """The variant's full log (environment, compiler, repair), named in its errors."""
        return self.out_dir / "logs" / f"{self.variant.name}.log"


@dataclass(frozen=True)
class BuiltWheel:
    variant: Variant
    path: Path
    build_id: str
    namespace: str
    log: Path
    env: EnvInfo | None  # None for a tvm-ffi build (its environment holds no torch)
    compliant: bool = True  # passed the ABI check for its tag
    capabilities: tuple[CudaCapability, ...] = ()  # CUDA capabilities compiled for
    warnings: tuple[str, ...] = ()  # one line per unit that warned (compile.diagnostics)


def plan_requests(
    project: KernelProject,
    selected: Sequence[VariantRecipe],
    version: str,
    options: Options,
    recipes: Recipes,
    deps: DependencyTable | None = None,
    *,
    git: GitState | None = None,
    gpu_capabilities: tuple[CudaCapability, ...] = (),
    budget: Budget | None = None,
    environ: Mapping[str, str] | None = None,
    runner: Runner = RUNNER,
) -> tuple[BuildRequest, ...]:
    """Every request of a run, made before anything is built: one per ``selected`` recipe, or
    for a pure-Python project one for all of them (one wheel serves every backend). The
    toolchain refusal is made here, once, for all of them: a variant kernelwheel does not
    compile (ROCm, XPU, Metal...) is a :class:`~kernelwheel.errors.ToolchainError` naming every
    such variant before any environment is made. ``deps`` (default: read from the recipes
    folder) says what build.toml's ``depends`` names provide; a dependency that cannot be
    provided is refused here too, and so is a variant for another arch without its cross
    compiler (:func:`.cross.plan_for`, which runs it through ``runner``).
    ``gpu_capabilities`` (a default build: plan.defaults) replace the recipe's capabilities as
    the targets of a CUDA variant. ``budget``: the run's CPUs, jobs and memory and the variants
    sharing them (the service reads it once; default: read here, one variant at a time);
    ``environ`` (default: this process's) gives ``CXX``. The kernel card is rendered once here
    too (a CARD.md that does not render is refused before any compile)."""
    require_toolchains(recipe.variant for recipe in selected)
    check_card(project, version=version, dirty=bool(git and git.dirty))
    kind = BuildKind.of(project)
    if kind is BuildKind.NOARCH:
        return (_noarch_request(project, selected, version, options, git),)
    table = deps if deps is not None else load_deps(options.recipes)
    environ = os.environ if environ is None else environ
    if budget is None:
        budget = Budget(resolve_jobs(options.jobs), resolve_jobs(None), available_memory())
    return tuple(
        _request(
            project,
            kind,
            recipe,
            version,
            options,
            recipes,
            table,
            git=git,
            gpu_capabilities=gpu_capabilities,
            budget=budget,
            environ=environ,
            runner=runner,
        )
        for recipe in selected
    )


def _noarch_request(
    project: KernelProject,
    selected: Sequence[VariantRecipe],
    version: str,
    options: Options,
    git: GitState | None,
) -> BuildRequest:
    """The one request of a pure-Python project: nothing to provision or compile."""
    if not selected:
        raise ProjectError(
            f"{project.name}: no variant is selected",
            file=project.build_toml,
            hint="select torch-<backend> variants of the [torch-noarch] project",
        )
    variants = tuple(recipe.variant for recipe in selected)
    return BuildRequest(
        project=project,
        variant=variants[0],
        version=version,
        out_dir=options.output_dir,
        work_dir=options.cache_dir / "work" / project.package,
        cache_dir=options.cache_dir,
        env_spec=None,
        recipe=selected[0],
        git=git,
        options_preamble=options.preamble(),
        hub_layout=options.hub_layout,
        kind=BuildKind.NOARCH,
        serves=variants,
    )


def _request(
    project: KernelProject,
    kind: BuildKind,
    recipe: VariantRecipe,
    version: str,
    options: Options,
    recipes: Recipes,
    table: DependencyTable,
    *,
    git: GitState | None,
    gpu_capabilities: tuple[CudaCapability, ...],
    budget: Budget,
    environ: Mapping[str, str],
    runner: Runner,
) -> BuildRequest:
    cuda = recipe.cuda
    env_spec = (
        None
        if options.python or recipe.torch_requirement is None
        else env_spec_for(recipe, options.pip_sources)
    )
    # A variant for another arch: the cross compiler is found and the host-arch environment
    # (the same torch release for this machine) chosen now, before anything is built.
    cross_plan = None
    if kind is not BuildKind.TVM_FFI:  # tvm-ffi variants build on their own arch
        cross_plan = plan_for(
            recipe.variant, env_spec, recipes, need_host_env=not options.python, runner=runner
        )
    if cross_plan is not None and cross_plan.host_env is not None:
        env_spec = cross_plan.host_env
    cxx = str(cross_plan.compiler.cxx) if cross_plan else (environ.get("CXX") or "c++")
    jobs, cpus, share = budget.per_variant()
    return BuildRequest(
        project=project,
        variant=recipe.variant,
        version=version,
        out_dir=options.output_dir,
        work_dir=options.cache_dir / "work" / project.package,
        cache_dir=options.cache_dir,
        env_spec=env_spec,
        recipe=recipe,
        python=options.python,
        # a "system" toolchain: the toolkit of exactly its CUDA X.Y (builder.preflight)
        cuda_home=options.cuda_home
        or (system_toolkit(cuda, runner=runner)[0] if cuda and cuda.source == "system" else None),
        default_capabilities=(gpu_capabilities or cuda.capabilities) if cuda else (),
        for_gpus_here=bool(cuda and gpu_capabilities),
        cuda_system_paths=tuple(Path(p) for p in cuda.system_paths) if cuda else (),
        jobs=jobs,
        cpus=cpus,
        memory_mib=share.mib if share else None,
        memory_source=share.source if share else "",
        cxx=cxx,
        manylinux=options.manylinux(),
        best_effort=options.best_effort,
        cross=cross_plan,
        local_version_style=options.local_version_style,
        fatbin_compression=options.fatbin_compression,
        cuda_capabilities=options.cuda_capabilities,
        headers=plan_headers(project, recipe.variant, table, options),
        with_cpu_kernels=options.with_cpu_kernels,
        nvcc_threads=options.nvcc_threads,
        memory_per_thread=options.memory_per_thread,
        git=git,
        no_ccache=options.no_ccache,
        keep_intermediates=options.keep_intermediates,
        ccache_remote=options.ccache_remote,
        recipes_dir=options.recipes,
        abi_remedies=options.abi_remedies,
        load_check=options.load_check,
        sources=options.pip_sources,
        options_preamble=options.preamble(),
        hub_layout=options.hub_layout,
        kind=kind,
        serves=(recipe.variant,),
    )
