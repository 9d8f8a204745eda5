"""``kernelwheel install PKG[==VERSION]...``: the build that fits the installed torch, pinned."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from ..install.probe import Target
from ..install.select import Selection, Verdict, why_not_chosen
from ..install.service import InstallRequest, InstallResult, NoMatch, install, target_python
from ..install.sources import Sources
from ._args import add_variant_argument
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "install",
        help="install the kernel build that fits the installed torch, without touching torch",
        description=(
            "Inspect the target Python (its torch version, CUDA/ROCm/XPU/CPU flavour, C++ ABI, "
            "arch and wheel tags), list the wheels the sources offer for each PKG, choose per "
            "package the one build the import guard's compatibility rules accept "
            "(docs/install.md), and install it with pip, pinned to that file and its sha256, "
            "with torch pinned to the installed version. If any package has no fitting build, "
            "nothing is installed and every candidate is listed with the reason it was refused."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel install img2gray --find-links wheelhouse\n"
            "  kernelwheel install 'img2gray==0.1.0' --index-url https://host/simple/all/ "
            "--python .venv/bin/python\n"
            "  kernelwheel install img2gray -f wheelhouse --dry-run   # print the pip command\n"
            "\n"
            "exit codes: 0 installed (or dry run); 2 bad arguments or unreadable source; "
            "10 no fitting build, no torch in the target, or pip failed"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("packages", nargs="+", metavar="PKG[==VERSION]", help="what to install")
    p.add_argument(
        "--find-links",
        "-f",
        action="append",
        default=[],
        metavar="DIR|URL",
        help="a folder of wheels, or a page linking them; repeatable",
    )
    p.add_argument("--index-url", "-i", metavar="URL", help="a PEP 503 index (kernelwheel index)")
    p.add_argument(
        "--extra-index-url", action="append", default=[], metavar="URL", help="repeatable"
    )
    p.add_argument(
        "--no-index",
        action="store_true",
        help="pip gets no index for the builds' dependencies (only --find-links)",
    )
    p.add_argument(
        "--python",
        metavar="PY",
        help="the interpreter to install into: a path, or a name looked up on PATH (python3.12)"
        " (default: $VIRTUAL_ENV's, else python3 on PATH)",
    )
    add_variant_argument(p, "consider only builds of the variants it matches", "'*-cu130-*'")
    p.add_argument("--dry-run", action="store_true", help="print the pip command, run nothing")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    request = InstallRequest(
        requirements=tuple(args.packages),
        sources=Sources(tuple(args.find_links), args.index_url, tuple(args.extra_index_url)),
        python=target_python(args.python),
        no_index=args.no_index,
        dry_run=args.dry_run,
        variants=tuple(args.variant),
    )
    try:
        result = install(request, args.runner)
    except NoMatch as exc:
        if not args.json:
            raise  # the CLI prints the message (environment and every refusal) and exits 10
        ui.print(json.dumps(_no_match_json(exc), indent=2))
        return exc.exit_code
    if args.json:
        ui.print(json.dumps(_result_json(result), indent=2))
    else:
        _render(result, ui)
    return 0


def _render(result: InstallResult, ui: ConsoleUI) -> None:
    ui.print(f"environment: {result.target.describe()}")
    for pick in result.picks:
        sel = pick.selection
        ui.print(f"{sel.requirement}: {pick.filename}")
        ui.print(f"  from {pick.location}" + (f", sha256 {pick.sha256}" if pick.sha256 else ""))
        for verdict in sel.passed_over:
            ui.print(f"  not {verdict.candidate.filename}: {_reason(verdict, sel)}")
    command = shlex.join(result.command)
    if result.status == "dry-run":
        ui.print("dry run; the pip command:")
        ui.print(command)
    else:
        ui.print(f"installed with: {command}")


def _reason(verdict: Verdict, sel: Selection) -> str:
    assert sel.chosen is not None
    return verdict.reason or why_not_chosen(verdict, sel.chosen)


def _environment(t: Target) -> dict[str, Any]:
    return {
        "python": str(t.python),
        "python_tag": t.python_tag,
        "machine": t.machine,
        "torch": t.torch_dist,
        "torch_flavour": t.torch.token,
        "cxx11_abi": t.torch.cxx11,
        "description": t.describe(),
    }


def _verdicts(sel: Selection) -> list[dict[str, Any]]:
    return [
        {
            "wheel": v.candidate.filename,
            "location": v.candidate.location,
            "reason": _reason(v, sel) if sel.chosen else v.reason,
        }
        for v in sel.passed_over
    ]


def _result_json(result: InstallResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "environment": _environment(result.target),
        "packages": [
            {
                "requirement": str(p.selection.requirement),
                "wheel": p.filename,
                "location": p.location,
                "version": str(p.selection.chosen.version) if p.selection.chosen else None,
                "variant": p.selection.chosen.label if p.selection.chosen else None,
                "sha256": p.sha256,
                "pin": p.pin,
                "rejected": _verdicts(p.selection),
            }
            for p in result.picks
        ],
        "command": list(result.command),
    }


def _no_match_json(exc: NoMatch) -> dict[str, Any]:
    return {
        "status": "no-match",
        "environment": _environment(exc.target),
        "packages": [
            {
                "requirement": str(sel.requirement),
                "wheel": sel.chosen.candidate.filename if sel.chosen else None,
                "rejected": _verdicts(sel),
            }
            for sel in exc.selections
        ],
        "message": exc.message,
        "hint": exc.hint,
    }
