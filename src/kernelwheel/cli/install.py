"""``kernelwheel install PKG[==VERSION]...``: the build that fits the installed torch, pinned."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from ..install.installed import listing
from ..install.select import Selection, Verdict, why_not_chosen
from ..install.service import InstallRequest, InstallResult, NoMatch, Pick, install, target_python
from ..model.sources import PipSources
from ._args import add_target_python_argument, add_variant_argument, source_arg
from .ui import QUIET, ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "install",
        help="install the kernel build that fits the installed torch, without touching torch",
        description=(
            "Inspect the target Python (its torch version, CUDA/ROCm/XPU/CPU flavour, C++ ABI, "
            "arch and wheel tags), list the wheels the sources offer for each PKG, choose per "
            "package the one build the import guard's compatibility rules accept "
            "(docs/install.md), and install it with pip, pinned to that file and its sha256, "
            "with torch pinned to the installed version (into an environment without torch, "
            "only tvm-ffi builds, which need none). If any package has no fitting build, "
            "nothing is installed and every candidate is listed with the reason it was refused. "
            "A build of the installed version replaces the installed one when their files "
            "differ (RECORD), and is left alone when they are the same; what is reported is "
            "read back from the environment after pip ran."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel install img2gray --find-links wheelhouse\n"
            "  kernelwheel install 'img2gray==0.1.0' --index-url https://host/simple/all/ "
            "--python .venv/bin/python\n"
            "  kernelwheel install img2gray -f wheelhouse --dry-run   # print the pip command\n"
            "  kernelwheel install img2gray -f wheelhouse --reinstall # even if the same build\n"
            "\n"
            "exit codes: 0 installed, already installed or dry run; 2 bad arguments or "
            "unreadable source; 7 the chosen wheel is unreadable or fails its RECORD check; "
            "10 no fitting build, a torch that does not import, pip failed, or "
            "the environment does not hold the chosen build after pip ran"
        ),
    )
    p.add_argument("packages", nargs="+", metavar="PKG[==VERSION]", help="what to install")
    p.add_argument(
        "--find-links",
        "-f",
        action="append",
        default=[],
        type=source_arg,
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
    add_target_python_argument(p, "to install into")
    add_variant_argument(p, "consider only builds of the variants it matches", "'*-cu130-*'")
    p.add_argument(
        "--reinstall",
        action="store_true",
        help="install the chosen builds even where the same version and files are installed "
        "(pip --force-reinstall --no-deps; torch is not named, so it stays)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the pip command, run nothing")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    request = InstallRequest(
        requirements=tuple(args.packages),
        sources=PipSources(
            args.index_url, tuple(args.find_links), args.no_index, tuple(args.extra_index_url)
        ),
        python=target_python(args.python),
        dry_run=args.dry_run,
        variants=tuple(args.variant),
        reinstall=args.reinstall,
    )
    try:
        result = install(request, args.runner)
    except NoMatch as exc:
        if not args.json:
            raise  # the CLI prints the message (environment and every refusal) and exits 10
        ui.print_json(_no_match_json(exc))
        return exc.exit_code
    if args.json:
        ui.print_json(_result_json(result))
    else:
        _render(result, ui)
    return 0


def _render(result: InstallResult, ui: ConsoleUI) -> None:
    ui.print(f"environment: {result.target.describe()}")
    if result.target.torch is None:
        ui.print(
            "no torch here: only tvm-ffi builds fit (they require apache-tvm-ffi, which pip "
            "installs, not torch); torch builds need torch installed first"
        )
    for pick in result.picks:
        sel = pick.selection
        ui.print(f"{sel.requirement}: {pick.filename}")
        ui.print(f"  from {pick.location}" + (f", sha256 {pick.sha256}" if pick.sha256 else ""))
        for verdict in sel.passed_over if ui.verbosity > QUIET else ():
            ui.print(f"  not {verdict.candidate.filename}: {_reason(verdict, sel)}")
        for line in _outcome(pick, result.status == "dry-run"):
            ui.print(f"  {line}")
    commands = [shlex.join(cmd) for cmd in result.commands]
    if result.status == "dry-run":
        plural = "s" if len(commands) > 1 else ""
        ui.print(f"dry run; the pip command{plural}:" if commands else "dry run; pip would not run")
        for command in commands:
            ui.print(command)
    elif commands:
        for command in commands:
            ui.print(f"installed with: {command}")
    else:
        ui.print("nothing to install: pip not run")


def _outcome(pick: Pick, dry_run: bool) -> list[str]:
    """What happens in the target; "files sha256" is the digest of the build's RECORD entries,
    the same for a wheel and its installed copy."""
    would = "would be " if dry_run else ""
    new = f"files sha256 {pick.digest}"
    old = pick.before
    if old is None:
        return [f"{would}installed {pick.version}: {new}"]
    where = f"{pick.version} in {old.location}"
    if pick.action == "keep":
        return [f"already installed: {where}, the same files ({new})"]
    if pick.action == "reinstall" and not pick.changed and not old.altered:
        return [f"{would}reinstalled (--reinstall): {where}, the same files ({new})"]
    if not old.has_version(pick.version):
        where, why = f"{old.version} in {old.location} with {pick.version}", ""
    elif old.altered:
        why = f": its files were altered on disk since installed: {listing(old.altered)}"
    else:
        why = f": same version, other files: {listing(pick.changed)}"
    return [
        f"{would}replaced {where}{why}",
        f"  before: files sha256 {old.digest}",
        f"  after:  {new}",
    ]


def _reason(verdict: Verdict, sel: Selection) -> str:
    assert sel.chosen is not None
    return verdict.reason or why_not_chosen(verdict, sel.chosen)


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
        "environment": result.target.to_json(),
        "packages": [
            {
                "requirement": str(p.selection.requirement),
                "wheel": p.filename,
                "location": p.location,
                "version": str(p.selection.chosen.version) if p.selection.chosen else None,
                "variant": p.selection.chosen.label if p.selection.chosen else None,
                "sha256": p.sha256,
                "files_sha256": p.digest,
                "pin": p.pin,
                "action": p.action,
                "previous": _previous(p),
                "rejected": _verdicts(p.selection),
            }
            for p in result.picks
        ],
        "commands": [list(cmd) for cmd in result.commands],
    }


def _previous(pick: Pick) -> dict[str, Any] | None:
    """The build the target held before; ``altered``: files no longer matching its RECORD."""
    old = pick.before
    if old is None:
        return None
    return {
        "version": old.version,
        "location": old.location,
        "files_sha256": old.digest,
        "changed": list(pick.changed),
        "altered": list(old.altered),
    }


def _no_match_json(exc: NoMatch) -> dict[str, Any]:
    return {
        "status": "no-match",
        "environment": exc.target.to_json(),
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
