"""A BuildRequest for the project at ``root``, as plan_requests would make one, for the tests of
the compile plan and the pipeline's steps (no environment: ``env.spec`` None); the request of
one recipe through plan_requests with the run's budget read as the service reads it, and the
recipes a plan selects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from kernelwheel.builder.request import (
    BuildRequest,
    CompileSettings,
    CudaSetup,
    Environment,
    Outputs,
    VariantBudget,
)
from kernelwheel.builder.service import plan_requests
from kernelwheel.compile.memory import Budget, available
from kernelwheel.model.project import KernelProject, load_project
from kernelwheel.model.recipes import Recipes, VariantRecipe, load_recipes
from kernelwheel.model.variant import Variant
from kernelwheel.plan.defaults import Machine
from kernelwheel.plan.options import Options, resolve_jobs
from kernelwheel.plan.planning import Planned, select

# The request's parts, by the name of its field that holds each (no two share a field's name).
_PARTS = {
    "budget": VariantBudget,
    "cuda": CudaSetup,
    "outputs": Outputs,
    "compile": CompileSettings,
    "env": Environment,
}


def build_request(root: Path, variant: Variant, **settings: object) -> BuildRequest:
    """``variant``'s request for ``root`` (16 jobs, the recipe's capabilities), with
    ``settings`` replacing fields of the request or of its parts (``jobs=4``,
    ``no_ccache=True``: each name is one part's field)."""
    recipe = load_recipes().recipe_for(variant)
    req = BuildRequest(
        project=load_project(root),
        variant=variant,
        version="0.1.0",
        recipe=recipe,
        outputs=Outputs(root / "out", root / "work", root / "cache"),
        budget=VariantBudget(jobs=16),
        cuda=CudaSetup(default_capabilities=recipe.cuda.capabilities if recipe.cuda else ()),
    )
    parts: dict[str, dict[str, object]] = {}
    for name, value in settings.items():
        owner = [p for p, kind in _PARTS.items() if name in {f.name for f in fields(kind)}]
        parts.setdefault(owner[0] if owner else "", {})[name] = value
    own = parts.pop("", {})
    for part, values in parts.items():
        own[part] = replace(getattr(req, part), **values)
    return replace(req, **own)  # type: ignore[arg-type]


def request_for(
    project: KernelProject,
    recipe: VariantRecipe,
    version: str,
    options: Options,
    recipes: Recipes,
    **settings: Any,
) -> BuildRequest:
    """The request to build ``recipe``'s variant of ``project``: plan_requests of one, with
    this machine's budget unless ``settings`` give one."""
    settings.setdefault("share", run_budget(options).per_variant())
    (request,) = plan_requests(project, [recipe], version, options, recipes, **settings)
    return request


def run_budget(options: Options) -> Budget:
    """The run's CPUs and memory as builder.service reads them, one variant at a time."""
    return Budget(resolve_jobs(options.jobs), resolve_jobs(None), available())


def selected_recipes(
    planned: Planned, variants: Sequence[str] = (), machine: Machine | None = None
) -> list[VariantRecipe]:
    """:func:`~kernelwheel.plan.planning.select`'s recipes."""
    return list(select(planned, variants, machine).recipes)
