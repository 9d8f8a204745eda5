"""A BuildRequest for the project at ``root``, as plan_requests would make one, for the tests of
the compile plan and the pipeline's steps (no environment: ``env_spec`` None); the request of
one recipe through plan_requests, and the recipes a plan selects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelwheel.builder.request import BuildRequest, plan_requests
from kernelwheel.model.project import KernelProject, load_project
from kernelwheel.model.recipes import Recipes, VariantRecipe, load_recipes
from kernelwheel.model.variant import Variant
from kernelwheel.plan.defaults import Machine
from kernelwheel.plan.options import Options
from kernelwheel.plan.planning import Planned, select


def build_request(root: Path, variant: Variant, **settings: object) -> BuildRequest:
    """``variant``'s request for ``root`` (16 jobs, the recipe's capabilities), with
    ``settings`` replacing fields."""
    recipe = load_recipes().recipe_for(variant)
    req = BuildRequest(
        project=load_project(root),
        variant=variant,
        version="0.1.0",
        out_dir=root / "out",
        work_dir=root / "work",
        cache_dir=root / "cache",
        env_spec=None,
        recipe=recipe,
        default_capabilities=recipe.cuda.capabilities if recipe.cuda else (),
        jobs=16,
    )
    return replace(req, **settings)  # type: ignore[arg-type]


def request_for(
    project: KernelProject,
    recipe: VariantRecipe,
    version: str,
    options: Options,
    recipes: Recipes,
    **settings: Any,
) -> BuildRequest:
    """The request to build ``recipe``'s variant of ``project``: plan_requests of one."""
    (request,) = plan_requests(project, [recipe], version, options, recipes, **settings)
    return request


def selected_recipes(
    planned: Planned, variants: Sequence[str] = (), machine: Machine | None = None
) -> list[VariantRecipe]:
    """:func:`~kernelwheel.plan.planning.select`'s recipes."""
    return list(select(planned, variants, machine).recipes)
