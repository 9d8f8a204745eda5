"""``kernelwheel matrix PATH``: the variants a kernel would build (the plan ``kernelwheel build``
uses), and why the others are left out."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..model.recipes import VariantRecipe
from ..model.variant import LocalVersionStyle
from ..plan.matrix import MatrixPlan, Rejection
from ..plan.planning import Planned, plan_project, refuse_given_version
from ..plan.toolchains import missing_toolchain, runner_for
from ._args import (
    SELECTION,
    add_option_arguments,
    add_project_argument,
    option_values,
    project_path,
    refuse_conflicting_selectors,
)
from .ui import ConsoleUI, table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "matrix",
        help="list the variants a kernel would build, and why others are left out",
        description=(
            "Plan the variants of a kernel project from the recipes (torch releases, CUDA "
            "toolchains), honouring build.toml's torch/CUDA bounds and backends and the "
            "build/skip/only/arch selection. Each variant left out is listed with its reason."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel matrix kernels/img2gray\n"
            "  kernelwheel matrix kernels/img2gray --build 'torch2{13,14}-*' --skip '*-aarch64-*'\n"
            "  kernelwheel matrix kernels/img2gray --json\n\n"
            "The torch column is the requirement the build environment installs: torch===X.Y.Z "
            "is\nPyPI's own build of the release (arbitrary equality: no +cu/+cpu local label), "
            "torch==X.Y.Z+cu128\na build from PyTorch's index for that flavour.\n\n"
            "--json's 'include' lists the variants kernelwheel builds (CPU, CUDA) with their "
            "hosted\nrunner; 'elsewhere' the planned ones it does not compile (ROCm, XPU, "
            "Metal...), each\nwith the self-hosted runner label its toolchain needs and the "
            "reason.\n\n"
            "In a GitHub Actions workflow, use the 'include' list as the matrix:\n"
            "  strategy:\n"
            "    matrix:\n"
            "      include: ${{ fromJSON(needs.plan.outputs.json).include }}\n"
            "(passing the whole object would make 'rejected' a matrix dimension)."
        ),
    )
    add_project_argument(p)
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"include": [...], "elsewhere": [...], "rejected": [...], "notes": [...]} '
        "for a GitHub Actions matrix",
    )
    add_option_arguments(p, *SELECTION, defaults={"build": "'*', the whole matrix"})


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    refuse_conflicting_selectors(args)
    planned = _without_refused_depends(plan_project(project_path(args), option_values(args)))
    # a version the build refuses fails every job the matrix fans out: refused now
    refuse_given_version(planned, args.runner)
    if args.json:
        ui.print_json(to_json(planned.plan, planned.options.local_version_style))
    else:
        ui.print(format_table(planned))
    return 0


def _without_refused_depends(planned: Planned) -> Planned:
    """The plan less the variants whose ``depends`` the build would refuse (rejected with its
    reason), so a release matrix fans out no job that fails at once."""
    from ..toolchain.deps import depends_refusals

    if planned.project.noarch:
        return planned
    plan = planned.plan
    refused = depends_refusals(
        planned.project, [r.variant for r in plan.selected], planned.deps, planned.options
    )
    if not refused:
        return planned
    kept = tuple(r for r in plan.selected if r.name not in refused)
    rejected = (
        *plan.rejected,
        *(Rejection(name, str(exc).splitlines()[0]) for name, exc in refused.items()),
    )
    return dataclasses.replace(
        planned, plan=dataclasses.replace(plan, selected=kept, rejected=rejected)
    )


def to_json(plan: MatrixPlan, style: LocalVersionStyle) -> dict[str, Any]:
    """``include``: the variants kernelwheel builds; ``elsewhere``: the others, and their runner."""
    include, elsewhere = [], []
    for recipe in plan.selected:
        entry = recipe.to_dict()
        entry["local_version"] = wheel_label(recipe, style)
        entry["runner"] = runner_for(recipe.variant)
        entry["kernels"] = list(plan.kernels_for(recipe.name))
        entry["env_digest"] = recipe.digest()  # e.g. an actions/cache key for the environment
        reason = missing_toolchain(recipe.variant)
        if reason is None:
            include.append(entry)
        else:
            elsewhere.append({**entry, "reason": reason})
    return {
        "include": include,
        "elsewhere": elsewhere,
        "rejected": [{"name": r.variant_name, "reason": r.reason} for r in plan.rejected],
        "notes": list(plan.notes),
    }


def wheel_label(recipe: VariantRecipe, style: LocalVersionStyle) -> str | None:
    """The local version the variant's wheel carries; None for a noarch one."""
    return None if recipe.variant.noarch else recipe.variant.local_version_in(style)


def toolchain(recipe: VariantRecipe) -> str:
    if missing_toolchain(recipe.variant) is not None:
        return f"none here: {runner_for(recipe.variant)}"
    return recipe.cuda.describe() if recipe.cuda is not None else "-"


def format_table(planned: Planned) -> str:
    plan = planned.plan
    header = ("variant", "local version", "torch", "toolchain", "python", "arch")
    rows = [
        (
            r.name,
            wheel_label(r, planned.options.local_version_style) or "-",
            r.torch_requirement or "-",
            toolchain(r),
            r.python_abi,
            r.variant.arch.value if r.variant.arch is not None else "any",
        )
        for r in plan.selected
    ]
    out = [f"{planned.project.name}: {len(plan.selected)} variant(s) selected", ""]
    out += table(header, rows, rule=True)
    if plan.rejected:
        out += ["", f"left out ({len(plan.rejected)}):"]
        width = max(len(r.variant_name) for r in plan.rejected)
        out += [f"  {r.variant_name.ljust(width)}  {r.reason}" for r in plan.rejected]
    if plan.notes:
        out += ["", "notes:"]
        out += [f"  - {note}" for note in plan.notes]
    if any(r.torch_requirement for r in plan.selected):
        out += ["", *TORCH_COLUMN_NOTE]
    return "\n".join(out)


# What the torch column means (the requirement the build environment installs torch with).
TORCH_COLUMN_NOTE = (
    "torch: the torch the build environment installs. torch===X.Y.Z (PEP 440 arbitrary equality)",
    "  is PyPI's own build of that release, whose version has no local label (===, unlike ==,",
    "  refuses +cu128 or +cpu builds); torch==X.Y.Z+cu128 / +cpu comes from PyTorch's index for",
    "  that flavour. Either way the wheel built requires only torch==X.Y.* at install time;",
    "  a stable-ABI wheel (torch-stable-abiXY-...) requires torch>=X.Y, its ABI version.",
)
