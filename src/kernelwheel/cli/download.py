"""``kernelwheel download PROJECT_DIR --wheelhouse DIR``: the locked kernels as verified wheels."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..locking.download import DownloadRequest, DownloadResult, download
from ..locking.lockfile import LOCK_NAME
from ._args import add_locking_arguments, add_variant_argument, jobs_value, path_arg
from .ui import ConsoleUI, open_cache_log


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "download",
        help=f"make the wheels {LOCK_NAME} pins, verified by hash, in a wheelhouse",
        description=(
            f"Read PROJECT_DIR/{LOCK_NAME} and make each locked variant's wheel (all of them, or "
            "those --variant selects) with the to-wheel machinery at the locked commit. Every "
            "file is checked against the lock's sha256 before it is used, and every wheel "
            "against the lock's wheel sha256; a mismatch stops the run naming the file and "
            "both hashes, and nothing is written to DIR. Verified wheels are moved into DIR "
            "together with a hashed requirements.txt and, when DIR holds one build per kernel, "
            "a PEP 751 pylock.toml. Hub downloads honour HF_ENDPOINT, HF_TOKEN, HF_HOME/"
            "HF_HUB_CACHE and HF_HUB_OFFLINE."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel download . --wheelhouse wheels\n"
            "  kernelwheel download . --wheelhouse wheels --variant 'torch214-cxx11-cu130-*'\n"
            "  kernelwheel download . --wheelhouse wheels --torch 2.13.0+cpu\n"
            "  pip install --require-hashes --no-index --find-links wheels "
            "-r wheels/requirements.txt\n"
            "  kernelwheel download . --wheelhouse wheels --json   # paths, variants, sha256s\n"
            "\n"
            "log: <cache-dir>/logs/download-<project>-<hash>.log (not in DIR, which a failed run "
            "leaves untouched)\n"
            "\n"
            "exit codes: 0 written; 2 bad --variant, or a requirements.txt/pylock.toml of the "
            "user's in DIR (nothing written; --force replaces it); 3 missing, stale or invalid "
            "lock; 7 a wheel could not be written (a full disk: nothing written); 9 repo or "
            "integrity problem (hash mismatch: nothing written)"
        ),
    )
    p.add_argument(
        "--wheelhouse",
        "-o",
        type=path_arg,
        required=True,
        metavar="DIR",
        help="where the wheels, requirements.txt and pylock.toml go",
    )
    add_variant_argument(
        p,
        "download only the variants it matches (every kernel must keep one)",
        "'torch2{13,14}-cxx11-cu130-*'",
    )
    p.add_argument(
        "--torch",
        metavar="VERSION",
        help="download, of each kernel, only the build 'kernelwheel install' would choose for "
        "this torch (one per arch the lock names), given as torch.__version__ says it: "
        "2.13.0+cpu, 2.14.1+cu130, 2.11.0+rocm6.3, 2.10.0+xpu. A build for that torch series "
        "comes first, then a stable-ABI build (the newest ABI at or below it), a tvm-ffi build, "
        "a noarch one; a kernel with no build that runs under it is an error naming each reason",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a requirements.txt or pylock.toml in DIR that kernelwheel did not write "
        "(without it such a file is refused, and nothing is written)",
    )
    add_locking_arguments(
        p,
        f"the folder holding {LOCK_NAME} (and pyproject.toml) (default: .)",
        "each wheel's path, variant, sha256 and status, and the log",
    )


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    log = open_cache_log(ui, "download", args.project_dir, args.cache_dir)
    result = download(
        DownloadRequest(
            project_dir=args.project_dir,
            wheelhouse=args.wheelhouse,
            variants=tuple(args.variant),
            jobs=jobs_value(args),
            torch=args.torch,
            force=args.force,
        ),
        ui,
        runner=args.runner,
    )
    if args.json:
        ui.print_json(to_json(result, log))
    else:
        report(result, ui)
    return 0


def to_json(result: DownloadResult, log: Path) -> dict[str, object]:
    reasons = {(repo, v): why for repo, v, why in result.passed_over}
    return {
        "command": "download",
        "ok": True,
        "wheelhouse": str(result.wheelhouse),
        "requirements": str(result.requirements),
        "pylock": str(result.pylock) if result.pylock else None,
        "pylock_note": result.pylock_note,
        "removed": [str(path) for path in result.removed],
        "log": str(log),
        "wheels": [
            {
                "repo": w.repo,
                "commit": w.commit,
                "variant": w.variant,
                "status": "verified",
                "path": str(w.path),
                "sha256": w.sha256,
                "log": str(log),
            }
            for w in result.wheels
        ]
        + [
            {
                "repo": repo,
                "variant": v,
                "status": "not-selected",
                "path": None,
                "sha256": None,
                **({"reason": reasons[repo, v]} if (repo, v) in reasons else {}),
            }
            for repo, v in result.not_selected
        ],
    }


def report(result: DownloadResult, ui: ConsoleUI) -> None:
    ui.print()
    for wheel in result.wheels:
        ui.print(f"  {wheel.path}")
        ui.print(f"    {wheel.repo} {wheel.variant} @ {wheel.commit[:12]}, sha256 {wheel.sha256}")
    ui.print(f"{len(result.wheels)} wheel(s) verified against {LOCK_NAME} and written")
    for repo, variant, why in result.passed_over:
        ui.print(f"  not {repo} {variant}: {why}")
    if result.not_selected:
        ui.print(f"{len(result.not_selected)} locked variant(s) not selected (--variant, --torch)")
    for path in result.removed:
        ui.print(f"  removed {path}: an earlier download's, not selected now")
    ui.print(f"hashed requirements: {result.requirements}")
    if result.pylock is not None:
        ui.print(f"pylock.toml: {result.pylock}")
    else:
        ui.print(f"pylock.toml not written: {result.pylock_note}")
    house = shlex.quote(str(result.wheelhouse))
    req = shlex.quote(str(result.requirements))
    ui.print("install offline with:")
    ui.print(f"  pip install --require-hashes --no-index --find-links {house} -r {req}")
    if result.pylock is None:  # a kernel has several builds here: pip's pick is by label
        # pinned: the folder may hold other releases (an earlier download's), which are not locked
        names = " ".join(sorted({f"{w.project}=={w.version.public}" for w in result.wheels}))
        ui.print(
            "  (of a kernel's builds, pip takes the label that sorts highest among those the "
            "installed torch allows, not the closest fit (cu130 over cu126, whatever the "
            f"driver); to choose by fit: kernelwheel install {names} --no-index "
            f"--find-links {house}, or download one build with --torch VERSION)"
        )
