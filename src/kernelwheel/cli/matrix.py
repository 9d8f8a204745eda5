"""``kernelwheel matrix PATH``: the variants a kernel would build, and why the others are left out.

The selection flags (``--build``, ``--skip``, ``--only``, ``--arch``, ``--recipes``) and
:func:`plan_from_args` are shared with ``kernelwheel build`` so both see the same plan.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model.project import KernelProject, load_project
from ..model.recipes import Recipes, VariantRecipe, load_recipes
from ..model.variant import Arch
from ..plan.matrix import MatrixPlan, plan_matrix
from ..plan.options import Options, resolve_options
from .ui import ConsoleUI

RUNNERS = {Arch.X86_64: "ubuntu-24.04", Arch.AARCH64: "ubuntu-24.04-arm"}
DEFAULT_RUNNER = RUNNERS[Arch.X86_64]


def add_selection_arguments(parser: argparse.ArgumentParser, *, recipes: bool = True) -> None:
    """Add --build/--skip/--only/--arch and (unless ``recipes=False``) --recipes.

    All default to None, meaning "not given", so lower layers of the precedence show through.
    """
    group = parser.add_argument_group(
        "selection",
        "Precedence, lowest first: defaults < [tool.kernelwheel] in the kernel's pyproject.toml "
        "< KERNELWHEEL_BUILD/_SKIP/_ARCHS/_RECIPES < these flags.",
    )
    group.add_argument(
        "--build",
        action="append",
        metavar="GLOB",
        help="build only variants whose name matches; braces expand "
        "(e.g. 'torch2{13,14}-*'); repeatable (default: '*')",
    )
    group.add_argument(
        "--skip",
        action="append",
        metavar="GLOB",
        help="leave out variants whose name matches (e.g. '*-aarch64-*'); repeatable",
    )
    group.add_argument(
        "--only",
        metavar="NAME",
        help="exactly this variant (ignores build, skip and arch)",
    )
    group.add_argument(
        "--arch",
        action="append",
        dest="archs",
        metavar="ARCH",
        help="x86_64, aarch64, auto/native (this machine) or all (default); repeatable",
    )
    if recipes:
        group.add_argument(
            "--recipes", metavar="DIR", help="a recipes folder (default: the bundled recipes)"
        )


@dataclass(frozen=True)
class Planned:
    project: KernelProject
    options: Options
    recipes: Recipes
    full: MatrixPlan  # before build/skip/only
    plan: MatrixPlan  # after them


# Options a command may carry as attributes of its parsed arguments (None: flag not given).
_CLI_OPTIONS = ("build", "skip", "only", "archs", "recipes", "output_dir", "cache_dir", "jobs")


def plan_from_args(path: Path, args: argparse.Namespace) -> Planned:
    """Load the project, resolve options from every layer, plan and apply the selectors.

    Reads the attributes of ``args`` named like :class:`~kernelwheel.plan.options.Options` fields
    (``build``, ``skip``, ``only``, ``archs``, ``recipes``, ``output_dir``, ``cache_dir``,
    ``jobs``) where present; a None value means the flag was not given, so give those flags
    ``default=None``.
    """
    cli = {name: getattr(args, name, None) for name in _CLI_OPTIONS}
    project = load_project(path)
    options = resolve_options(project.root, cli=cli)
    recipes = load_recipes(options.recipes)
    full = plan_matrix(project, recipes, arches=options.arch_filter())
    return Planned(project, options, recipes, full, full.select(options.selector()))


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
            "In a GitHub Actions workflow, use the 'include' list as the matrix:\n"
            "  strategy:\n"
            "    matrix:\n"
            "      include: ${{ fromJSON(needs.plan.outputs.json).include }}\n"
            "(passing the whole object would make 'rejected' a matrix dimension)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", type=Path, help="the kernel project folder (holding build.toml)")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"include": [...], "rejected": [...]} for a GitHub Actions matrix',
    )
    add_selection_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    planned = plan_from_args(args.path, args)
    if args.json:
        ui.print(json.dumps(to_json(planned.plan), indent=2))
    else:
        ui.print(format_table(planned))
    return 0


def to_json(plan: MatrixPlan) -> dict[str, Any]:
    """The plan as ``{"include": [...], "rejected": [...], "notes": [...]}``."""
    include = []
    for recipe in plan.selected:
        entry = recipe.to_dict()
        entry["runner"] = runner(recipe)
        entry["kernels"] = list(plan.kernels_for(recipe.name))
        entry["env_digest"] = recipe.digest()  # e.g. an actions/cache key for the environment
        include.append(entry)
    return {
        "include": include,
        "rejected": [{"name": r.variant_name, "reason": r.reason} for r in plan.rejected],
        "notes": list(plan.notes),
    }


def runner(recipe: VariantRecipe) -> str:
    arch = recipe.variant.arch
    return RUNNERS.get(arch, DEFAULT_RUNNER) if arch is not None else DEFAULT_RUNNER


def toolchain(recipe: VariantRecipe) -> str:
    return recipe.cuda.describe() if recipe.cuda is not None else "-"


def format_table(planned: Planned) -> str:
    plan = planned.plan
    header = ("variant", "local version", "torch", "toolchain", "python", "arch")
    rows = [
        (
            r.name,
            r.local_version,
            r.torch_requirement or "-",
            toolchain(r),
            r.python_abi,
            r.variant.arch.value if r.variant.arch is not None else "any",
        )
        for r in plan.selected
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(
            cell.ljust(width) for cell, width in zip(row, widths, strict=True)
        ).rstrip()

    project = planned.project
    out = [f"{project.name}: {len(plan.selected)} variant(s) selected", "", line(header)]
    out.append("  ".join("-" * w for w in widths))
    out += [line(row) for row in rows]
    if plan.rejected:
        out += ["", f"left out ({len(plan.rejected)}):"]
        width = max(len(r.variant_name) for r in plan.rejected)
        out += [f"  {r.variant_name.ljust(width)}  {r.reason}" for r in plan.rejected]
    if plan.notes:
        out += ["", "notes:"]
        out += [f"  - {note}" for note in plan.notes]
    return "\n".join(out)
