"""A BuildRequest for the project at ``root``, as request_for would make one, for the tests of
the compile plan and the pipeline's steps (no environment: ``env_spec`` None)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kernelwheel.builder.request import BuildRequest
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Variant


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
        default_capabilities=recipe.cuda.capabilities if recipe.cuda else (),
        jobs=16,
    )
    return replace(req, **settings)  # type: ignore[arg-type]
