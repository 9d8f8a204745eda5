"""The planning service: a kernel project plus resolved options -> the variants to build.
``kernelwheel matrix`` and ``kernelwheel build`` both call :func:`plan_project`, so both see the
same plan; neither the options nor the recipes are read again after it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util import RUNNER, Runner
from ..compat.builds import parse_variant
from ..model.deps import DependencyTable, load_deps
from ..model.project import KernelProject, load_project
from ..model.recipes import Recipes, VariantRecipe, load_recipes
from .defaults import DefaultBuild, Machine, default_build, probe_machine
from .matrix import MatrixPlan, plan_matrix
from .options import Options, resolve_options
from .selector import Selector
from .versioning import GitState, WheelVersion, read_git_state, resolve_version, version_inputs


@dataclass(frozen=True)
class Planned:
    project: KernelProject
    options: Options
    recipes: Recipes
    full: MatrixPlan  # before build/skip/only
    plan: MatrixPlan  # after them
    deps: DependencyTable  # what build.toml's depends names provide (recipes/deps.toml)


def plan_project(
    path: Path, cli: Mapping[str, Any], *, env: Mapping[str, str] | None = None
) -> Planned:
    """Load the project, resolve its options once (defaults < pyproject < ``env`` < ``cli``;
    ``cli``: option name -> flag value, None when not given), plan and apply the selectors."""
    project = load_project(path)
    options = resolve_options(project.root, env=env, cli=cli)
    arches, selector = options.arch_filter(), options.selector()
    recipes, deps = load_recipes(options.recipes), load_deps(options.recipes)
    full = plan_matrix(project, recipes, arches=arches, with_cpu_kernels=options.with_cpu_kernels)
    return Planned(project, options, recipes, full, full.select(selector), deps)


@dataclass(frozen=True)
class Selection:
    """The variants to build; ``default`` when nothing was selected: the one default variant,
    why, and the GPU capabilities it compiles for (plan.defaults)."""

    recipes: tuple[VariantRecipe, ...]
    default: DefaultBuild | None = None


def select(
    planned: Planned,
    variants: Sequence[str] = (),
    machine: Machine | None = None,
    runner: Runner = RUNNER,
) -> Selection:
    """The variants ``variants`` (``--variant`` globs over the whole matrix) select, else the
    selectors', else the default variant for ``machine`` (default: this one, via ``runner``)."""
    if variants:
        selector = Selector(build=tuple(_canonical(v) for v in variants), build_label="--variant")
        left_out = {r.variant_name: r.reason for r in planned.full.rejected}
        chosen = selector.select(planned.full.names, left_out=left_out)
        return Selection(tuple(r for r in planned.full.selected if r.name in chosen))
    if planned.options.selects_anything() or planned.project.noarch:
        # a selection, or a noarch project's variants, all built into one wheel
        return Selection(planned.plan.selected)
    if machine is None:
        machine = probe_machine(planned.project, planned.options, runner=runner)
    default = default_build(planned.project, planned.full, planned.options, machine)
    return Selection((default.recipe,), default)


def _canonical(pattern: str) -> str:
    """A plain variant name in its canonical spelling; a glob as it is."""
    variant = None if any(c in pattern for c in "*?[{") else parse_variant(pattern)
    return pattern if variant is None else variant.name


def wheel_version(planned: Planned, git: GitState | None) -> WheelVersion:
    """The wheel version before its local part, and where it came from (plan.versioning)."""
    return resolve_version(version_inputs(planned.project, planned.options, git))


def refuse_given_version(planned: Planned, runner: Runner = RUNNER) -> None:
    """For a dry run (``matrix``, ``--print-build-identifiers``): the error the build gives at
    once for a version that contradicts the project (a VERSION file's 1.0.0, a tag or the
    option against general.version = 0). A project naming no version at all is left alone:
    the build jobs may pass ``--version``."""
    inputs = version_inputs(
        planned.project, planned.options, read_git_state(planned.project.root, runner)
    )
    named = (inputs.api_version, inputs.legacy, inputs.option, inputs.version_text.strip())
    if any(fact not in (None, "") for fact in named):
        resolve_version(inputs)
