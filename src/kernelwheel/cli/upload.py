"""``kernelwheel upload DIR --repo ORG/NAME``: push a Hub layout to a kernel repo's v<major>."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ._args import add_json_argument, path_arg
from .ui import ConsoleUI, open_cache_log

if TYPE_CHECKING:
    from ..hub.upload import UploadResult


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "upload",
        help="push a Hub layout (build --hub-layout) to a kernel repo's branch v<major>",
        description=(
            "Push the variants of a Hub layout (the folder 'kernelwheel build --hub-layout DIR' "
            "wrote: build/<variant>/ folders and the kernel card README.md) to a kernel-type Hub "
            "repo, as kernel-builder publishes: the repo is created when missing, the variants "
            "go to the branch v<major> (metadata.json's version), made from the default branch "
            "when missing, which get_kernel(repo, version=<major>) and 'kernelwheel to-wheel "
            "REPO <major>' read. One commit: the uploaded variants' files are added or updated, "
            "files an older build left in those variant folders are removed, every other "
            "variant already on the branch is kept. Needs a token with write access (HF_TOKEN "
            "or 'hf auth login'); honours HF_ENDPOINT."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel build kernels/img2gray --build '*' --hub-layout hub\n"
            "  kernelwheel upload hub --repo my-org/img2gray --dry-run   # what would change\n"
            "  kernelwheel upload hub --repo my-org/img2gray\n"
            "  kernelwheel to-wheel my-org/img2gray 1                      # the wheels back\n"
            "\n"
            "log: <cache-dir>/logs/upload-<folder>-<hash>.log\n"
            "\n"
            "exit codes: 0 pushed (or nothing to change, or --dry-run); 2 not a Hub layout, "
            "a variant folder that is not what its name says (metadata.json, extension), "
            "files a build does not write (.env, links, FIFOs), variants of different "
            "projects or versions, no token; 9 the Hub refused (no write or "
            "kernel-creation access, a branch that moved meanwhile, unreachable)"
        ),
    )
    p.add_argument(
        "folder",
        metavar="DIR",
        type=path_arg,
        help="the Hub layout: what build --hub-layout DIR wrote",
    )
    p.add_argument("--repo", required=True, metavar="ORG/NAME", help="the kernel repo on the Hub")
    p.add_argument(
        "--version",
        type=int,
        metavar="MAJOR",
        help="the branch v<MAJOR>; must match the variants' metadata.json version (default: it)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be created, added, updated, removed and kept; change nothing",
    )
    p.add_argument("--message", "-m", help="the commit message (default: names the variants)")
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        help="how long each connect, read and write with the Hub waits (default: "
        "KERNELWHEEL_UPLOAD_TIMEOUT, else HF_HUB_DOWNLOAD_TIMEOUT, else 120)",
    )
    p.add_argument(
        "--tries",
        metavar="N",
        help="how often a call without an answer (or a busy Hub's) is tried, 1-20 (default: "
        "KERNELWHEEL_UPLOAD_TRIES, else 3); the commit is never made twice",
    )
    add_json_argument(p, "the plan (each file and its change), the branch and the commit")


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    from ..hub.upload import UploadRequest, upload  # imported when used

    log = open_cache_log(ui, "upload", args.folder)
    result = upload(
        UploadRequest(
            folder=args.folder,
            repo=args.repo,
            version=args.version,
            dry_run=args.dry_run,
            message=args.message,
            timeout=args.timeout,
            tries=args.tries,
        ),
        ui,
    )
    if args.json:
        ui.print_json(to_json(result, log))
    else:
        report(result, ui)
    return 0


def to_json(result: UploadResult, log: Path) -> dict[str, object]:
    return {
        "command": "upload",
        "ok": True,
        "dry_run": result.dry_run,
        "repo": result.repo,
        "repo_type": "kernel",
        "where": result.where,
        "branch": result.branch,
        "create_repo": result.create_repo,
        "create_branch": result.create_branch,
        "from_branch": result.base,
        "variants": list(result.variants),
        "kept": list(result.kept),
        "files": [{"path": f.path, "change": f.change.value, "size": f.size} for f in result.files],
        "commit": result.commit,
        "commit_url": result.commit_url,
        "log": str(log),
    }


def report(result: UploadResult, ui: ConsoleUI) -> None:
    would = "would " if result.dry_run else ""
    ui.print()
    if result.create_repo:
        ui.print(f"{would}create the kernel repo {result.repo}")
    if result.create_branch:
        ui.print(f"{would}create branch {result.branch} from {result.base or 'the default branch'}")
    for f in result.changes:
        ui.print(f"  {f.change.value:<7} {f.path}")
    unchanged = len(result.files) - len(result.changes)
    if unchanged:
        ui.print(f"  ({unchanged} file(s) already there, unchanged)")
    for name in result.kept:
        ui.print(f"  kept    build/{name}/ (already on {result.branch}, not in this upload)")
    what = f"{len(result.variants)} variant(s) to {result.where}, branch {result.branch}"
    if result.dry_run:
        ui.print(f"dry run: {len(result.changes)} change(s) for {what}; nothing was changed")
    elif result.commit is None:
        ui.print(f"{what}: nothing to change")
    else:
        ui.print(f"pushed {what}: commit {result.commit}")
        if result.commit_url:
            ui.print(f"  {result.commit_url}")
