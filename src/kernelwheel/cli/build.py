"""``kernelwheel build PATH``: build wheels for the selected variants of a kernel project."""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .._util import sha256_file
from ..builder.noarch import build_noarch
from ..builder.pipeline import build_and_export
from ..builder.request import request_for
from ..errors import KernelwheelError
from ..model.project import KernelProject
from ..model.recipes import VariantRecipe
from ..plan.options import Options
from ..plan.planning import plan_project, selected_recipes, wheel_version
from ..plan.toolchains import require_toolchains
from ..plan.versioning import read_git_state
from ._args import (
    add_build_arguments,
    add_json_argument,
    add_selection_arguments,
    add_variant_argument,
    option_values,
    refuse_conflicting_selectors,
)
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "build",
        help="compile a kernel project into wheels, one per variant",
        description=(
            "Compile a kernel project (build.toml, csrc/, torch-ext/) into abi3 wheels. Each "
            "variant is built in its own environment holding that variant's torch and CUDA "
            "toolchain (created once and cached); a [tvm-ffi] project's variants are built "
            "against apache-tvm-ffi, without torch, and a pure-Python project becomes one "
            "py3-none-any wheel for all of its torch-<backend> variants. Without a selector "
            "(here, in [tool.kernelwheel] or KERNELWHEEL_*), ONE variant is built: the default "
            "for this machine, the newest torch in the recipes with its CUDA flavour (CPU for "
            "a CPU-only kernel). "
            "--build '*' builds the whole matrix ('kernelwheel matrix' lists it). Each step "
            "is shown as it starts and ends; the full log of each variant is in "
            "OUTPUT_DIR/logs/<variant>.log."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel build kernels/img2gray             # one variant: this machine's "
            "default\n"
            "  kernelwheel build kernels/img2gray --build '*' # every variant of the matrix\n"
            "  kernelwheel build kernels/img2gray --variant torch213-cxx11-cpu-x86_64-linux\n"
            "  kernelwheel build kernels/img2gray --variant 'torch21{3,4}-*-cpu-x86_64-*' -j 4\n"
            "  kernelwheel build kernels/img2gray --json > build.json   # paths, sha256s, logs\n"
            "  kernelwheel build kernels/img2gray --print-build-identifiers\n"
            "  kernelwheel build kernels/img2gray --python /usr/bin/python3 "
            "--variant torch211-cxx11-cu130-x86_64-linux   # use an existing torch"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", type=Path, help="the kernel project folder (holding build.toml)")
    p.add_argument(
        "--version",
        help="the wheel version before the local part, X.Y.Z with X = build.toml's integer "
        "general.version (the API major); default: [tool.kernelwheel] version, a VERSION file "
        "beside build.toml, a git tag vX.Y.Z on HEAD, else X.0.0 (docs/versions.md)",
    )
    add_variant_argument(
        p,
        "build the variants it matches, of any arch (not combinable with the selection flags)",
        "torch214-cxx11-cu130-x86_64-linux, 'torch21{3,4}-*-cpu-*'",
    )
    p.add_argument(
        "--print-build-identifiers",
        action="store_true",
        help="print the names of the variants that would be built, and exit",
    )
    add_json_argument(p, "each variant's wheel path, sha256, status, time and log")
    add_build_arguments(p)
    add_selection_arguments(
        p, default="none: the one default variant for this machine; '*' builds every variant"
    )
    p.set_defaults(func=run)


@dataclass(frozen=True)
class Outcome:
    """One variant of the run: built (with its wheel) or failed (with its error)."""

    variant: str
    seconds: float
    log: Path | None
    wheel: Path | None = None
    sha256: str | None = None
    compliant: bool = True
    error: KernelwheelError | None = None

    @property
    def status(self) -> str:
        return "built" if self.wheel is not None else "failed"

    def to_json(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "status": self.status,
            "path": str(self.wheel) if self.wheel else None,
            "sha256": self.sha256,
            "size": self.wheel.stat().st_size if self.wheel else None,
            "compliant": self.compliant if self.wheel else None,
            "seconds": round(self.seconds, 1),
            "log": str(self.log) if self.log else None,
            "error": str(self.error) if self.error else None,
            "exit_code": self.error.exit_code if self.error else 0,
        }


def summary_table(outcomes: list[Outcome]) -> str:
    """One row per variant: status, time, wheel (or the log to read), size, sha256."""
    if not outcomes:
        return "no wheels built"
    header = ("variant", "status", "time", "size", "wheel / log", "sha256")
    rows = [
        (
            o.variant,
            o.status,
            f"{o.seconds:.1f}s",
            f"{o.wheel.stat().st_size / 1024:.0f} KiB" if o.wheel else "-",
            o.wheel.name if o.wheel else f"log: {o.log}" if o.log else "-",
            o.sha256 or "-",
        )
        for o in outcomes
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    right = {2, 3}  # time and size align right

    def line(row: tuple[str, ...]) -> str:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    total = sum(o.seconds for o in outcomes)
    built = sum(1 for o in outcomes if o.wheel)
    return "\n".join(
        [
            line(header),
            *(line(r) for r in rows),
            f"{built} of {len(outcomes)} variant(s) built in {total:.1f}s",
        ]
    )


def write_github_summary(outcomes: list[Outcome]) -> None:
    """On GitHub Actions, append a Markdown table to the job's step summary."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    lines = ["### kernelwheel build", "", "| wheel | size | time | sha256 |", "|---|---|---|---|"]
    for o in outcomes:
        if o.wheel is not None:
            size = f"{o.wheel.stat().st_size / 1024:.0f} KiB"
            lines.append(f"| `{o.wheel.name}` | {size} | {o.seconds:.1f}s | `{o.sha256}` |")
        else:
            first = str(o.error).splitlines()[0] if o.error else "failed"
            lines.append(f"| ✕ {o.variant} | failed | {o.seconds:.1f}s | {first} |")
    with open(target, "a") as fh:
        fh.write("\n".join(lines) + "\n")


def _with_log(exc: KernelwheelError, log: Path | None) -> str:
    """The error, naming the log to read unless it already does."""
    text = str(exc)
    if log is not None and str(log) not in text:
        text += f"\n  log: {log}"
    return text


def _build_noarch(
    project: KernelProject,
    recipes: list[VariantRecipe],
    version: str,
    options: Options,
    ui: ConsoleUI,
) -> Outcome:
    name = ",".join(r.name for r in recipes)
    ui.group(name)
    started = time.monotonic()
    try:
        built = build_noarch(
            project, recipes, version, options.output_dir, ui, hub_layout=options.hub_layout
        )
    except KernelwheelError as exc:
        seconds = time.monotonic() - started
        ui.done(name, False, seconds)
        ui.error(f"{name}: {exc}")
        return Outcome(name, seconds, None, error=exc)
    finally:
        ui.endgroup()
    seconds = time.monotonic() - started
    ui.done(name, True, seconds, built.path.name)
    return Outcome(name, seconds, None, built.path, sha256_file(built.path))


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    refuse_conflicting_selectors(args)
    planned = plan_project(args.path, option_values(args))
    project, options = planned.project, planned.options
    recipes = selected_recipes(planned, args.variant)
    if args.print_build_identifiers:
        for recipe in recipes:
            ui.print(recipe.name)
        return 0
    require_toolchains(recipe.variant for recipe in recipes)  # before any environment is made
    git = read_git_state(project.root)
    resolved = wheel_version(planned, git)
    version = resolved.version
    ui.info(
        "", f"{project.name} {version} (version from {resolved.source}); {len(recipes)} variant(s)"
    )
    outcomes: list[Outcome] = []
    if project.noarch:  # one pure-Python wheel for all of its variants, nothing to compile
        outcomes.append(_build_noarch(project, recipes, version, options, ui))
        recipes = []
    # Every request first: a dependency that cannot be provided stops the run before anything
    # is compiled.
    requests = [
        request_for(project, recipe, version, options, planned.recipes, planned.deps, git=git)
        for recipe in recipes
    ]
    for recipe, req in zip(recipes, requests, strict=True):
        ui.group(recipe.name)
        started, wall = time.monotonic(), time.time()
        log: Path | None = None
        try:
            log = req.log
            built = build_and_export(req, ui, hub_layout=options.hub_layout)
            seconds = time.monotonic() - started
            outcomes.append(
                Outcome(
                    recipe.name,
                    seconds,
                    built.log,
                    built.path,
                    sha256_file(built.path),
                    built.compliant,
                )
            )
            ui.done(recipe.name, True, seconds, built.path.name)
        except KernelwheelError as exc:
            seconds = time.monotonic() - started
            if log is not None and not (log.exists() and log.stat().st_mtime >= wall - 1):
                log = None  # failed before the build wrote its log
            outcomes.append(Outcome(recipe.name, seconds, log, error=exc))
            ui.done(recipe.name, False, seconds)
            ui.error(f"{recipe.name}: {_with_log(exc, log)}")
        finally:
            ui.endgroup()
    failed = [o for o in outcomes if o.error is not None]
    if args.json:
        ui.print(
            json.dumps(
                {
                    "command": "build",
                    "ok": not failed,
                    "project": project.name,
                    "version": version,
                    "wheels": [o.to_json() for o in outcomes],
                },
                indent=2,
            )
        )
    else:
        ui.print(summary_table(outcomes))
    write_github_summary(outcomes)
    if failed:
        if len(outcomes) > 1:
            ui.error(
                f"{len(failed)} of {len(outcomes)} variant(s) failed: "
                + ", ".join(f"{o.variant} (log: {o.log})" if o.log else o.variant for o in failed)
            )
        return max(o.error.exit_code for o in failed if o.error is not None)
    return 0
