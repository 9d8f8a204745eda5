"""``kernelwheel build PATH``: build wheels for the selected variants of a kernel project."""

from __future__ import annotations

import argparse
import dataclasses
import os
import threading
import time
from pathlib import Path

from .._util import check_output_path
from ..builder.preflight import select_buildable
from ..builder.service import Outcome, build_project
from ..errors import BuildError
from ..plan.planning import plan_project, refuse_given_version
from ..toolchain.deps import depends_refusals
from ._args import (
    add_json_argument,
    add_option_arguments,
    add_project_argument,
    add_variant_argument,
    option_values,
    project_path,
    refuse_conflicting_selectors,
)
from .ui import ConsoleUI, table, with_log


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
            "for this machine, the plan's variant for the torch of --python, else of the active "
            "virtual environment, else the newest the plan allows for this machine (CUDA with "
            "an NVIDIA GPU, else CPU where the kernel has a CPU backend); a CUDA default "
            "compiles for the GPUs present "
            "(--cuda-capabilities all: every capability). "
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
    )
    add_project_argument(p)
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
    every = "none: the one default variant for this machine; '*' builds every variant"
    add_option_arguments(p, defaults={"build": every})


def outcome_json(o: Outcome) -> dict[str, object]:
    return {
        "variant": o.variant,
        "status": o.status,
        "path": str(o.wheel) if o.wheel else None,
        "sha256": o.sha256,
        "size": o.wheel.stat().st_size if o.wheel else None,
        "compliant": o.compliant if o.wheel else None,
        "seconds": round(o.seconds, 1),
        "log": str(o.log) if o.log else None,
        "error": str(o.error) if o.error else None,
        "diagnostics": list(o.error.diagnostics) if isinstance(o.error, BuildError) else [],
        "warnings": list(o.warnings),
        "exit_code": o.error.exit_code if o.error else 0,
    }


def summary_table(outcomes: list[Outcome], seconds: float) -> str:
    """One row per variant, then the build's ``seconds`` (side by side variants count once)."""
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
    built = sum(1 for o in outcomes if o.wheel)
    lines = table(header, rows, right={2, 3})  # time and size align right
    return "\n".join([*lines, f"{built} of {len(outcomes)} variant(s) built in {seconds:.1f}s"])


def interrupted_summary(finished: list[Outcome], selected: list[str]) -> list[str]:
    """The variants an interrupted run finished (their wheels, or logs), and those it did not."""
    left = unfinished(finished, selected)
    lines = [f"interrupted: {len(selected) - len(left)} of {len(selected)} variant(s) finished"]
    for o in finished:
        where = f": {o.wheel}" if o.wheel else f" (log: {o.log})" if o.log else ""
        lines.append(f"  {o.status} {o.variant}{where}")
    if left:
        lines.append(f"  not finished, no wheel: {', '.join(left)}")
    return lines


def unfinished(finished: list[Outcome], selected: list[str]) -> list[str]:
    """The ``selected`` variants no outcome of ``finished`` is for."""
    done = {name for o in finished for name in o.variant.split(",")}  # a noarch wheel's: all
    return [name for name in selected if name not in done]


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


class _Progress:
    """The build's progress: a group per variant, its end line, its error. Variants side by side
    would interleave their lines: on GitHub Actions each one's are held and shown as one group
    when it ends; elsewhere every line names its variant, and its title is shown only alone."""

    def __init__(self, ui: ConsoleUI) -> None:
        self.ui = ui
        self._running: list[str] = []
        self._grouped: str | None = None
        self._lock = threading.Lock()
        self.finished: list[Outcome] = []  # in the order they ended
        self.step_started = ui.step_started
        self.step_finished = ui.step_finished
        self.info = ui.info

    def variant_started(self, name: str, *, side_by_side: bool = False) -> None:
        with self._lock:
            self._running.append(name)
            if side_by_side and self.ui.github:
                self.ui.hold(name)
            elif len(self._running) == 1 and self._grouped is None:
                self._grouped = name
                self.ui.group(name)

    def variant_finished(self, outcome: Outcome) -> None:
        wheel = outcome.wheel.name if outcome.wheel is not None else ""
        with self._lock:
            self.ui.done(outcome.variant, outcome.error is None, outcome.seconds, wheel)
            self.ui.release(outcome.variant)  # a variant's held lines, if any
            for warned in outcome.warnings:  # the compile's summary: one line per unit
                self.ui.warn(f"{outcome.variant}: {warned}")
            if outcome.error is not None:
                self.ui.error(f"{outcome.variant}: {with_log(str(outcome.error), outcome.log)}")
            self._running.remove(outcome.variant)
            self.finished.append(outcome)
            if self._grouped == outcome.variant:
                self._grouped = None
                self.ui.endgroup()


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    refuse_conflicting_selectors(args)
    planned = plan_project(project_path(args), option_values(args))
    if args.path is None and planned.options.source("output_dir") == "default":
        # A project found from one of its subfolders: its wheels go to its own wheelhouse/, not
        # into the subfolder (inside torch-ext/<package>/ they would be packaged next time).
        options = dataclasses.replace(
            planned.options, output_dir=planned.project.root / planned.options.output_dir
        )
        planned = dataclasses.replace(planned, options=options)
    selection = select_buildable(planned, args.variant, runner=args.runner)
    recipes = list(selection.recipes)
    if args.print_build_identifiers:
        # The dry run refuses what the build refuses at once: every variant's depends.
        if not planned.project.noarch and (
            refused := depends_refusals(
                planned.project, [r.variant for r in recipes], planned.deps, planned.options
            )
        ):
            raise next(iter(refused.values()))
        # a version the build refuses (VERSION 1.0.0 for an API major 0) is refused here too,
        # not in each job of the matrix it fans out
        refuse_given_version(planned, args.runner)
        for recipe in recipes:
            ui.print(recipe.name)
        return 0
    # Folders that cannot be written are refused now, not after the compile (--hub-layout is
    # written last of all).
    check_output_path(planned.options.cache_dir, "--cache-dir")
    check_output_path(planned.options.output_dir, "--output-dir")
    if planned.options.hub_layout is not None:
        check_output_path(planned.options.hub_layout, "--hub-layout")
    preamble = planned.options.preamble()  # as cibuildwheel's: those set above their defaults
    if preamble:
        ui.info("", "options (set above their defaults):")
        for line in preamble:
            ui.info("", f"  {line}")
    else:
        ui.info("", "options: all defaults (kernelwheel build --help lists them)")
    default = selection.default
    if default is not None:
        ui.info("", f"default variant {default.recipe.name}: {default.reason}")
        for note in default.notes:
            ui.info("", note)
    gpus = default.gpu_capabilities if default is not None else ()
    started = time.monotonic()
    progress = _Progress(ui)
    try:
        result = build_project(
            planned, recipes, progress, gpu_capabilities=gpus, runner=args.runner
        )
    except KeyboardInterrupt:  # SIGTERM's too: what finished, then main's message and exit code
        selected = [r.name for r in recipes]
        for line in interrupted_summary(progress.finished, selected):
            ui.info("", line)
        if args.json:  # main's error document carries them: a CI's script reads no stderr
            args.json_partial = {
                "wheels": [outcome_json(o) for o in progress.finished],
                "not_finished": unfinished(progress.finished, selected),
            }
        raise
    seconds = time.monotonic() - started
    outcomes = list(result.outcomes)
    if args.json:
        ui.print_json(
            {
                "command": "build",
                "ok": not result.failed,
                "project": result.project,
                "version": result.version,
                "wheels": [outcome_json(o) for o in outcomes],
            }
        )
    else:
        ui.print(summary_table(outcomes, seconds))
    write_github_summary(outcomes)
    if planned.options.hub_layout is not None and not planned.project.noarch:
        written = {o.variant for o in outcomes if o.wheel is not None}
        if others := _other_hub_variants(planned.options.hub_layout, written):
            ui.warn(
                f"{planned.options.hub_layout / 'build'} also holds {', '.join(others)}, not "
                "written by this build (an earlier one's, made from the sources of then): "
                "kernelwheel upload would push it as it is; build it again with --hub-layout, "
                "or delete its folder"
            )
    if (failed := result.failed) and len(outcomes) > 1:
        ui.error(
            f"{len(failed)} of {len(outcomes)} variant(s) failed: "
            + ", ".join(f"{o.variant} (log: {o.log})" if o.log else o.variant for o in failed)
        )
    return result.exit_code


def _other_hub_variants(layout: Path, written: set[str]) -> list[str]:
    """The variant folders of the Hub layout's build/ that this run did not write."""
    try:
        folders = sorted(p.name for p in (layout / "build").iterdir() if p.is_dir())
    except OSError:
        return []
    return [name for name in folders if name not in written]
