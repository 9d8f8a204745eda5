"""The planning service: a kernel project plus resolved options -> the variants to build.

``kernelwheel matrix`` and ``kernelwheel build`` both call :func:`plan_project`, so both see the
same plan; neither the options nor the recipes are read again after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError, VariantError
from ..model.deps import DependencyTable, load_deps
from ..model.project import Framework, KernelProject, load_project
from ..model.recipes import Recipes, VariantRecipe, load_recipes
from ..model.variant import Arch, BackendKind, TorchVersion, Variant
from .matrix import MatrixPlan, plan_matrix
from .options import Options, resolve_options
from .selector import Selector
from .toolchains import require_a_backend_built_here
from .versioning import GitState, WheelVersion, resolve_version, version_inputs

__all__ = ["Planned", "default_variant", "plan_project", "selected_recipes", "wheel_version"]


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
    """Load the project, resolve its options once (defaults < pyproject < ``env`` < ``cli``,
    option name -> flag value, None for a flag not given), plan and apply the selectors."""
    project = load_project(path)
    options = resolve_options(project.root, env=env, cli=cli)
    recipes = load_recipes(options.recipes)
    full = plan_matrix(
        project, recipes, arches=options.arch_filter(), with_cpu_kernels=options.with_cpu_kernels
    )
    deps = load_deps(options.recipes)
    return Planned(project, options, recipes, full, full.select(options.selector()), deps)


def default_variant(recipes: Recipes, project: KernelProject) -> Variant:
    """The newest torch in the recipes, its CUDA flavour (or cpu), for this machine's arch; for
    a backend in ``torch.stable-abi``, that flavour's stable-ABI variant; for a tvm-ffi project
    the tvm-ffi variant of that flavour.

    A project none of whose backends kernelwheel compiles (a Metal- or ROCm-only kernel) has no
    default: :class:`~kernelwheel.errors.ToolchainError`, naming the runners they need."""
    kinds = [BackendKind(b) for b in project.backends]
    require_a_backend_built_here(project.name, kinds)
    arch = Arch.host()
    wanted = BackendKind.CUDA if BackendKind.CUDA in kinds else BackendKind.CPU
    tvm_ffi = project.framework is Framework.TVM_FFI
    for variant in reversed(recipes.tvm_ffi_variants() if tvm_ffi else recipes.variants()):
        if variant.arch is arch and variant.backend is not None and variant.backend.kind is wanted:
            abi = project.stable_abi_for(wanted.value)
            if abi is None:
                return variant
            target = TorchVersion(abi.major, abi.minor)
            return variant.with_(torch=target, cxxabi=None, stable_abi=True)
    raise UsageError("the recipes have no variant for this machine", hint="pass --variant NAME")


def selected_recipes(planned: Planned, variants: Sequence[str] = ()) -> list[VariantRecipe]:
    """The variants ``variants`` selects (``--variant``: globs with brace expansion over the
    kernel's whole matrix, as in to-wheel and download), else the selectors, else (nothing
    selected in any layer) the default variant for this machine."""
    if variants:
        selector = Selector(build=tuple(_canonical(v) for v in variants), build_label="--variant")
        left_out = {r.variant_name: r.reason for r in planned.full.rejected}
        chosen = selector.select(planned.full.names, left_out=left_out)
        return [recipe for recipe in planned.full.selected if recipe.name in chosen]
    if not planned.options.selects_anything():
        if planned.project.noarch:  # its noarch variants, all built into one wheel
            return list(planned.plan.selected)
        return [planned.recipes.recipe_for(default_variant(planned.recipes, planned.project))]
    return list(planned.plan.selected)


def _canonical(pattern: str) -> str:
    """A plain variant name in its canonical spelling (other spellings of Hub names parse);
    a glob as it is."""
    if any(c in pattern for c in "*?[{"):
        return pattern
    try:
        return Variant.parse(pattern).name
    except VariantError:
        return pattern


def wheel_version(planned: Planned, git: GitState | None) -> WheelVersion:
    """The wheel version before its local part, and where it came from (plan.versioning:
    the option, VERSION, a git tag v<major>.x.y on HEAD, <major>.0.0)."""
    return resolve_version(version_inputs(planned.project, planned.options, git))
