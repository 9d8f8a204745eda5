"""``kernelwheel build PATH``: build wheels for the selected variants of a kernel project."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .._util import sha256_file
from ..builder.pipeline import build_and_export
from ..builder.request import BuiltWheel, request_for
from ..errors import KernelwheelError, ProjectError
from ..plan.planning import plan_project, resolve_version, selected_recipes
from ._args import add_build_arguments, add_selection_arguments, option_values
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "build",
        help="compile a kernel project into wheels, one per variant",
        description=(
            "Compile a kernel project (build.toml, csrc/, torch-ext/) into abi3 wheels. Each "
            "variant is built in its own environment holding that variant's torch and CUDA "
            "toolchain (created once and cached). Without a selector, the default variant for "
            "this machine is built: the newest torch in the recipes with its CUDA flavour."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel build kernels/img2gray\n"
            "  kernelwheel build kernels/img2gray --variant torch213-cxx11-cpu-x86_64-linux\n"
            "  kernelwheel build kernels/img2gray --print-build-identifiers\n"
            "  kernelwheel build kernels/img2gray --python /usr/bin/python3 "
            "--variant torch211-cxx11-cu130-x86_64-linux   # use an existing torch"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", type=Path, help="the kernel project folder (holding build.toml)")
    p.add_argument(
        "--version",
        help="the wheel version before the local part; default: build.toml general.version, "
        "then a VERSION file beside build.toml",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="build exactly this variant (Hub name, e.g. torch214-cxx11-cu130-x86_64-linux); "
        "repeatable",
    )
    p.add_argument(
        "--print-build-identifiers",
        action="store_true",
        help="print the names of the variants that would be built, and exit",
    )
    add_build_arguments(p)
    add_selection_arguments(p)
    p.set_defaults(func=run)


def _describe(wheel: BuiltWheel) -> tuple[str, str, str]:
    size = wheel.path.stat().st_size
    return wheel.path.name, f"{size / 1024:.0f} KiB", sha256_file(wheel.path)


def summary_table(built: list[BuiltWheel]) -> str:
    if not built:
        return "no wheels built"
    rows = [_describe(w) for w in built]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'wheel':<{width}}  {'size':>9}  sha256"]
    lines += [f"{name:<{width}}  {size:>9}  {digest}" for name, size, digest in rows]
    return "\n".join(lines)


def write_github_summary(
    built: list[BuiltWheel], failed: list[tuple[str, KernelwheelError]]
) -> None:
    """On GitHub Actions, append a Markdown table to the job's step summary."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    lines = ["### kernelwheel build", "", "| wheel | size | sha256 |", "|---|---|---|"]
    lines += [f"| `{n}` | {s} | `{d}` |" for n, s, d in (_describe(w) for w in built)]
    for name, exc in failed:
        lines.append(f"| ✕ {name} | failed | {str(exc).splitlines()[0]} |")
    with open(target, "a") as fh:
        fh.write("\n".join(lines) + "\n")


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    planned = plan_project(args.path, option_values(args))
    project, options = planned.project, planned.options
    recipes = selected_recipes(planned, args.variant)
    if args.print_build_identifiers:
        for recipe in recipes:
            ui.print(recipe.name)
        return 0
    if project.noarch:  # before planning environments: a noarch plan has no torch to pin
        raise ProjectError(
            "pure-Python (noarch) projects are not built by 'kernelwheel build' yet",
            file=project.build_toml,
            hint="add a [kernel.<id>] section, or package the Python files with a normal build",
        )
    version, source = resolve_version(project, args.version)
    ui.info("", f"{project.name} {version} (version from {source}); {len(recipes)} variant(s)")
    built: list[BuiltWheel] = []
    failed: list[tuple[str, KernelwheelError]] = []
    for recipe in recipes:
        ui.group(recipe.name)
        try:
            req = request_for(project, recipe, version, options, planned.recipes)
            built.append(build_and_export(req, ui, hub_layout=options.hub_layout))
        except KernelwheelError as exc:
            if len(recipes) == 1:
                raise
            failed.append((recipe.name, exc))
            ui.error(f"{recipe.name}: {exc}")
        finally:
            ui.endgroup()
    ui.print(summary_table(built))
    write_github_summary(built, failed)
    if failed:
        ui.error(
            f"{len(failed)} of {len(recipes)} variant(s) failed: "
            + ", ".join(name for name, _ in failed)
        )
        return max(exc.exit_code for _, exc in failed)
    return 0
