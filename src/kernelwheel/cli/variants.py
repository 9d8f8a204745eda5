"""``kernelwheel variants SOURCE``: every build a source offers, judged by ``kernelwheel
install``'s own selection."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.version import Version

from ..install.service import target_python
from ..install.sources import Candidate, discover
from ..install.variants import Entry, Status, VariantsReport, explain, machine
from ._args import add_json_argument, add_target_python_argument, source_arg
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "variants",
        help="list every build of a kernel: which one install picks, which fit, which do not",
        description=(
            "List every build SOURCE offers and judge each for the target Python (its torch, "
            "flavour, C++ ABI, wheel tags) and this machine's CUDA driver, exactly as "
            "'kernelwheel install' judges them: the build install would pick is preferred, the "
            "others it accepts are compatible (with why they lost), the rest rejected with the "
            "reason. SOURCE is a folder of wheels, a wheel, a find-links page or PEP 503 index URL "
            "(http(s):// or file://), or a Hub kernel org/name[@VERSION] (or a git clone of "
            "one: PATH[@VERSION]; only build/ is listed, nothing is downloaded)."
        ),
        epilog=(
            "VERSION (Hub kernels): 1 (branch v1), 1.1.2 (tag v1.1.2), '>=1.1,<2'; "
            "default: the newest vN branch\n"
            "\n"
            "examples:\n"
            "  kernelwheel variants wheelhouse\n"
            "  kernelwheel variants https://host/simple/all/ --python .venv/bin/python\n"
            "  kernelwheel variants kernels-community/relu@1 --json\n"
            "\n"
            "exit codes: 0 listed (whether or not a build fits); 2 bad SOURCE, unreadable "
            "source or a --python that cannot be run; 9 the Hub repo or revision cannot be read; "
            "10 the target Python has a torch that does not import"
        ),
    )
    p.add_argument(
        "source",
        metavar="SOURCE",
        type=source_arg,
        help="a wheel folder or file, an index URL or org/name[@V]",
    )
    add_target_python_argument(p, "to judge for, as install picks it")
    add_json_argument(p, "every build with its verdict and reason")


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    source, candidates, names, unjudged = _builds(args.source, args.runner)
    target, gpus = machine(target_python(args.python), args.runner)
    report = explain(source, candidates, target, gpus, names=names, unjudged=unjudged)
    if args.json:
        ui.print_json(report_json(report))
    else:
        _render(report, ui)
    return 0


def _builds(
    text: str, runner: Any
) -> tuple[str, list[Candidate], dict[str, str], tuple[Entry, ...]]:
    """A folder or URL's wheels, else a Hub kernel's build folders as to-wheel would write them."""
    if (
        "://" in text
        or text.endswith(".whl")
        or (Path(text).is_dir() and not (Path(text) / ".git").exists())
    ):
        return text, discover(text), {}, ()
    from ..hub.towheel import refused_source
    from ..hub.variants import hub_builds, split_source  # the Hub client only for a Hub source

    if (refused := refused_source(split_source(text)[0])) is not None:  # a mistyped wheelhouse?
        refused.hint = (
            "give a wheelhouse folder, a wheel, an index or page URL (http(s):// or file://), "
            "a Hub repo id (org/name[@VERSION]) or a git clone"
        )
        raise refused
    found = hub_builds(text, runner=runner)
    unjudged = tuple(
        Entry(folder, None, f"{found.where}: build/{folder}", None, Status.REJECTED, why)
        for folder, why in found.unmappable
    )
    where = f"{found.where} at {found.resolution.describe()}"
    return where, list(found.candidates), found.names, unjudged


def _render(report: VariantsReport, ui: ConsoleUI) -> None:
    ui.print(f"source: {report.source}")
    ui.print(f"environment: {report.target.describe()}")
    ui.print(f"GPUs: {report.gpus.describe()}")
    if not report.projects:
        ui.print("no wheels found")
        return
    for project in report.projects:
        ui.print("")
        if project.project:
            ui.print(f"{project.project}:")
        names = [_row_name(e, project.entries) for e in project.entries]
        width = max(map(len, names))
        for entry, name in zip(project.entries, names, strict=True):
            reason = f"  {entry.reason}" if entry.reason else ""
            ui.print(f"  {entry.status.value:<10}  {name:<{width}}{reason}".rstrip())
        if project.preferred is None:
            ui.print("  no build fits this environment")
        else:
            ui.print(f"  install picks {project.preferred.wheel}")


def _row_name(entry: Entry, entries: Sequence[Entry]) -> str:
    """The variant, and the release where the builds are of more than one (else one variant's
    rows of two releases would read alike)."""
    releases = {Version(e.version).public for e in entries if e.version}
    if len(releases) < 2 or not entry.version:
        return entry.variant
    return f"{entry.variant} {Version(entry.version).public}"


def report_json(report: VariantsReport) -> dict[str, Any]:
    """The JSON shape of docs/variants.md."""
    t = report.target
    return {
        "source": report.source,
        "environment": {
            **t.to_json(),
            "cuda_driver": None if t.driver is None else ".".join(map(str, t.driver)),
            "gpus": [str(c) for c in report.gpus.capabilities],
            "gpus_source": report.gpus.source,
        },
        "projects": [
            {
                "project": p.project,
                "preferred": p.preferred.variant if p.preferred else None,
                "variants": [_entry_json(e) for e in p.entries],
            }
            for p in report.projects
        ],
    }


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "variant": entry.variant,
        "compatible": entry.status is not Status.REJECTED,
        "preferred": entry.status is Status.PREFERRED,
        "status": entry.status.value,
        "reason": entry.reason,
        "wheel": entry.wheel,
        "version": entry.version,
        "location": entry.location,
    }
