"""``kernelwheel build``'s service: every request made first (what cannot be provided stops the
run before any compile), then the variants built, several at once where the CPUs allow; a
failed variant does not stop the others, an interrupt stops them all."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from .._util import RUNNER, Runner, resume_running, sha256_file, stop_running
from ..compile.compile_rules import DEFAULT_MIB_PER_THREAD, variants_at_once
from ..compile.memory import Budget, Share
from ..compile.memory import available as available_memory
from ..errors import KernelwheelError, ProjectError
from ..log import Reporter
from ..model.capability import CudaCapability
from ..model.deps import DependencyTable, load_deps
from ..model.project import BUILD_TOML, KernelProject
from ..model.recipes import Recipes, VariantRecipe
from ..plan.options import Options, resolve_jobs
from ..plan.planning import Planned, wheel_version
from ..plan.toolchains import require_toolchains
from ..plan.versioning import GitState, read_git_state
from ..toolchain.cross import CrossPlan, plan_for
from ..toolchain.deps import plan_headers
from ..toolchain.envs import env_spec_for
from ..wheels import license_warning
from ._load_check import syntax_errors
from .dev import build_dev
from .dev_layout import DevBuild
from .entry import build_and_export
from .load_check import refuse_syntax
from .preflight import require_buildable, system_toolkit
from .registrations import check_registrations
from .request import (
    BuildKind,
    BuildRequest,
    CompileSettings,
    CudaSetup,
    Environment,
    Outputs,
    VariantBudget,
)
from .wheelmeta import check_card


@dataclass(frozen=True)
class Outcome:
    """One variant of the run (a pure-Python project's: all), built or failed."""

    variant: str
    seconds: float
    log: Path | None
    wheel: Path | None = None
    sha256: str | None = None
    compliant: bool = True
    error: KernelwheelError | None = None
    warnings: tuple[str, ...] = ()  # the compile's, one line per unit that warned

    @property
    def status(self) -> str:
        return "built" if self.wheel is not None else "failed"


@dataclass(frozen=True)
class BuildResult:
    project: str
    version: str
    outcomes: tuple[Outcome, ...]

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.error is not None)

    @property
    def exit_code(self) -> int:
        """0, or the highest exit code of the failed variants."""
        return max((o.error.exit_code for o in self.failed if o.error is not None), default=0)


class BuildProgress(Reporter, Protocol):
    """A :class:`~kernelwheel.log.Reporter` that also hears when each variant starts and ends."""

    def variant_started(self, name: str, *, side_by_side: bool = False) -> None:
        """``name`` began; ``side_by_side``: other variants may run at the same time."""

    def variant_finished(self, outcome: Outcome) -> None: ...


def build_project(
    planned: Planned,
    recipes: Sequence[VariantRecipe],
    progress: BuildProgress,
    *,
    gpu_capabilities: tuple[CudaCapability, ...] = (),
    runner: Runner = RUNNER,
) -> BuildResult:
    """Build ``recipes``, the selected variants of ``planned``."""
    requests, version, at_once = _requests(planned, recipes, progress, gpu_capabilities, runner)
    if at_once == 1 or len(requests) == 1:
        outcomes = tuple(_variant(req, progress, runner) for req in requests)
    else:
        outcomes = _side_by_side(requests, at_once, progress, runner)
    return BuildResult(planned.project.name, version, outcomes)


def dev_project(
    planned: Planned,
    recipes: Sequence[VariantRecipe],
    progress: Reporter,
    *,
    gpu_capabilities: tuple[CudaCapability, ...] = (),
    check_in_tests: bool = False,
    hold: ExitStack | None = None,
    runner: Runner = RUNNER,
) -> DevBuild:
    """``kernelwheel dev``: ``recipes``' variant (a pure-Python project's: all it serves),
    planned as a build is, built by builder.dev.build_dev (``hold``: its lock left on it)."""
    (request,), _, _ = _requests(
        planned, recipes, progress, gpu_capabilities, runner, release=False
    )
    return build_dev(request, progress, runner, check_in_tests=check_in_tests, hold=hold)


def _requests(
    planned: Planned,
    recipes: Sequence[VariantRecipe],
    progress: Reporter,
    gpu_capabilities: tuple[CudaCapability, ...],
    runner: Runner,
    *,
    release: bool = True,
) -> tuple[tuple[BuildRequest, ...], str, int]:
    """Every request of a run, the wheel version and the variants at once, before any build;
    ``release``: a build's, whose wheels the version's warning is about (not dev's)."""
    project, options = planned.project, planned.options
    if project.noarch:  # its build refuses these by this Python's grammar: no warning first
        refuse_syntax(syntax_errors(str(project.package_dir)), project.root)
    for warning in check_registrations(project, allow=options.allow_fixed_op_namespaces):
        progress.info("", f"warning: {warning}")
    git = read_git_state(project.root, runner)
    resolved = wheel_version(planned, git)
    version = resolved.version
    # The machine's CPUs and memory, read once for the run and divided among its variants
    budget = Budget(resolve_jobs(options.jobs), resolve_jobs(None), available_memory())
    at_once = variants_at_once(
        options.variant_jobs,
        len(recipes),
        budget.jobs,
        memory_mib=budget.memory.mib if budget.memory else None,
        mib_per_thread=options.memory_per_thread or DEFAULT_MIB_PER_THREAD,
    )
    share = replace(budget, at_once=at_once).per_variant()
    if (noted := project.check_own_name()) is not None:
        progress.info("", f"warning: {noted}")
    if (odd := license_warning(project.license)) is not None:
        progress.info("", f"warning: {project.root / BUILD_TOML}: general.{odd}")
    # Every request first: nothing is made or compiled before all are, and refused at once.
    requests = plan_requests(
        project,
        recipes,
        version,
        options,
        planned.recipes,
        planned.deps,
        git=git,
        gpu_capabilities=gpu_capabilities,
        share=share,
        runner=runner,
    )
    progress.info(
        "",
        f"{project.name} {version} (version from {resolved.source}); {len(recipes)} variant(s)"
        + (f", {at_once} at a time" if at_once > 1 and len(requests) > 1 else ""),
    )
    if resolved.warning is not None and release:
        progress.info("", f"warning: {resolved.warning}")
    # What this machine lacks (a system toolkit, a torch index) stops every variant here too.
    compiled = [r for r in requests if r.kind is not BuildKind.NOARCH]
    require_buildable(compiled, planned, runner)
    return requests, version, at_once


def plan_requests(
    project: KernelProject,
    selected: Sequence[VariantRecipe],
    version: str,
    options: Options,
    recipes: Recipes,
    deps: DependencyTable | None = None,
    *,
    share: Share,
    git: GitState | None = None,
    gpu_capabilities: tuple[CudaCapability, ...] = (),
    environ: Mapping[str, str] | None = None,
    runner: Runner = RUNNER,
) -> tuple[BuildRequest, ...]:
    """One request per ``selected`` recipe (a pure-Python project: one for all), refused here,
    once for all: a backend kernelwheel does not compile, a dependency (``deps``, default: the
    recipes folder's) or cross compiler that cannot be provided, a CARD.md that does not render.
    ``gpu_capabilities`` replace a CUDA recipe's; ``environ`` (default: os's) gives ``CXX``."""
    require_toolchains(recipe.variant for recipe in selected)
    check_card(project, version=version, dirty=bool(git and git.dirty))
    kind = BuildKind.of(project)
    outputs = Outputs(
        options.output_dir,
        options.cache_dir / "work" / project.package,
        options.cache_dir,
        options.hub_layout,
        options.manylinux(),
        options.best_effort,
        options.local_version_style,
        options.preamble(),
    )
    if kind is BuildKind.NOARCH:
        if not selected:
            raise ProjectError(
                f"{project.name}: no variant is selected",
                file=project.build_toml,
                hint="select torch-<backend> variants of the [torch-noarch] project",
            )
        variants = tuple(recipe.variant for recipe in selected)
        return (BuildRequest(
            project, variants[0], version, selected[0], outputs, git=git, kind=kind, serves=variants
        ),)  # fmt: skip
    table = deps if deps is not None else load_deps(options.recipes)
    environ = os.environ if environ is None else environ
    shared = VariantBudget(
        share.jobs, share.cpus, share.memory, options.nvcc_threads, options.memory_per_thread
    )

    def request(recipe: VariantRecipe) -> BuildRequest:
        env, cross_plan = _environment(kind, recipe, options, recipes, runner)
        cxx = str(cross_plan.compiler.cxx) if cross_plan else (environ.get("CXX") or "c++")
        cuda = _cuda_setup(recipe, options, gpu_capabilities, runner)
        settings = CompileSettings(
            cxx,
            cross_plan,
            plan_headers(project, recipe.variant, table, options),
            options.no_ccache,
            options.keep_intermediates,
            options.ccache_remote,
            options.recipes,
            options.abi_remedies,
            options.load_check,
        )
        return BuildRequest(
            project, recipe.variant, version, recipe, outputs, env, shared, cuda, settings, git,
            kind, (recipe.variant,),
        )  # fmt: skip

    return tuple(request(recipe) for recipe in selected)


def _environment(
    kind: BuildKind, recipe: VariantRecipe, options: Options, recipes: Recipes, runner: Runner
) -> tuple[Environment, CrossPlan | None]:
    """The variant's interpreter (given, or its recipe) and, for another arch, its cross plan."""
    spec = None
    if not options.python and recipe.torch_requirement is not None:
        spec = env_spec_for(recipe, options.pip_sources)
    cross_plan = None
    if kind is not BuildKind.TVM_FFI:  # tvm-ffi variants build on their own arch
        cross_plan = plan_for(
            recipe.variant, spec, recipes, need_host_env=not options.python, runner=runner
        )
    if cross_plan is not None and cross_plan.host_env is not None:
        spec = cross_plan.host_env
    return Environment(spec, options.python, options.pip_sources), cross_plan


def _cuda_setup(
    recipe: VariantRecipe,
    options: Options,
    gpu_capabilities: tuple[CudaCapability, ...],
    runner: Runner,
) -> CudaSetup:
    """The variant's toolkit (a "system" one: exactly its CUDA X.Y) and capabilities."""
    cuda, home = recipe.cuda, options.cuda_home
    if home is None and cuda is not None and cuda.source == "system":
        home = system_toolkit(cuda, runner=runner)[0]
    return CudaSetup(
        home,
        (gpu_capabilities or cuda.capabilities) if cuda else (),
        bool(cuda and gpu_capabilities),
        tuple(Path(p) for p in cuda.system_paths) if cuda else (),
        options.cuda_capabilities,
        options.fatbin_compression,
        options.with_cpu_kernels,
    )


def _side_by_side(
    requests: Sequence[BuildRequest], at_once: int, progress: BuildProgress, runner: Runner
) -> tuple[Outcome, ...]:
    """The variants built ``at_once`` at a time in threads (the compilers do the work); an
    interrupt drops those not started and kills the running ones' commands."""
    stopping = threading.Event()  # set by an interrupt
    try:
        with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="variant") as pool:
            futures = [pool.submit(_variant, req, progress, runner, stopping) for req in requests]
            try:
                return tuple(future.result() for future in futures)
            except BaseException:
                stopping.set()
                for future in futures:
                    future.cancel()
                stop_running()  # and no variant starts another command
                raise
    finally:
        resume_running()  # the pool has waited for every variant: commands may run again


def _variant(
    req: BuildRequest,
    progress: BuildProgress,
    runner: Runner,
    stopping: threading.Event | None = None,
) -> Outcome:
    # A noarch wheel is named by every variant it serves.
    name = ",".join(v.name for v in req.serves) or req.variant.name
    progress.variant_started(name, side_by_side=stopping is not None)
    started, wall = time.monotonic(), time.time()
    try:
        built = build_and_export(req, progress, runner)
    except KernelwheelError as exc:
        log: Path | None = req.log
        if not (req.log.exists() and req.log.stat().st_mtime >= wall - 1):
            log = None  # failed before the build wrote its log
        outcome = Outcome(name, time.monotonic() - started, log, error=exc)
    else:
        outcome = Outcome(
            name,
            time.monotonic() - started,
            built.log if built.log.exists() else None,  # a noarch build writes none
            built.path,
            sha256_file(built.path),
            built.compliant,
            warnings=built.warnings,
        )
    # a variant the interrupt stopped goes unreported; one that made its wheel all the same is
    # reported: its wheel is in the output folder
    if stopping is None or not stopping.is_set() or outcome.wheel is not None:
        progress.variant_finished(outcome)
    return outcome
