"""``kernelwheel lock [PROJECT_DIR]``: pin the project's kernels in ``kernelwheel.lock``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..locking.lockfile import LOCK_NAME
from ..locking.resolve import LockRequest, LockResult, lock_project
from ._args import add_locking_arguments, jobs_value
from .ui import ConsoleUI, open_cache_log


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lock",
        help="pin the kernels pyproject.toml declares (commit, file and wheel hashes) in "
        f"{LOCK_NAME}",
        description=(
            "Resolve each kernel the project declares in pyproject.toml ([tool.kernels."
            "dependencies] or [tool.kernelwheel.dependencies]) to a tag or branch and its "
            "commit, convert every variant there as 'kernelwheel to-wheel' does, and record the "
            "sha256 of each file a variant packages and of the wheel made from it in "
            f"PROJECT_DIR/{LOCK_NAME} (TOML, stable order; see docs/lockfile.md). A kernel "
            "whose commit has not changed is carried over without downloading. Re-running with "
            "nothing new leaves the file byte-for-byte unchanged."
        ),
        epilog=(
            "declarations (pyproject.toml):\n"
            "  [tool.kernels.dependencies]\n"
            '  "drbh/img2gray" = ">=1.1.2,<2"    # highest vX.Y.Z tag in the range\n'
            '  "acme/relu" = 1                   # branch v1\n'
            "  [tool.kernelwheel.dependencies]\n"
            '  "acme/gelu" = { version = "1.0.0", path = "../gelu" }   # a local git clone\n'
            "\n"
            "examples:\n"
            "  kernelwheel lock .\n"
            "  kernelwheel lock . --check        # in CI: fail when the lock is out of date\n"
            "  kernelwheel lock . --json         # every locked wheel's name, variant, sha256\n"
            "\n"
            "log: <cache-dir>/logs/lock-<project>-<hash>.log (cache-dir: --cache-dir, "
            "KERNELWHEEL_CACHE_DIR, default ~/.cache/kernelwheel)\n"
            "\n"
            "exit codes: 0 written or already current; 1 --check found it out of date; "
            "3 bad declaration or lock file; 7 a wheel could not be made (a full disk: no lock "
            "written); 9 repo, revision or integrity problem"
        ),
    )
    p.add_argument(
        "--check",
        action="store_true",
        help=f"write nothing; exit 1 when {LOCK_NAME} is missing or out of date",
    )
    p.add_argument(
        "--refresh",
        action="store_true",
        help="convert every kernel again instead of carrying unchanged ones over",
    )
    p.add_argument(
        "--allow-abi-violations",
        action="store_true",
        help="lock variants whose shared objects fail the ABI check (recorded in the lock, "
        "so download accepts them too)",
    )
    add_locking_arguments(
        p,
        "the folder holding pyproject.toml (default: .)",
        "the lock's outcome and each locked wheel (name, variant, sha256)",
    )


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    log = open_cache_log(ui, "lock", args.project_dir, args.cache_dir)
    result = lock_project(
        LockRequest(
            project_dir=args.project_dir,
            refresh=args.refresh,
            check=args.check,
            allow_abi_violations=args.allow_abi_violations,
            jobs=jobs_value(args),
        ),
        ui,
        runner=args.runner,
    )
    if args.json:
        ui.print_json(to_json(result, log, check=args.check))
    else:
        report(result, ui)
    if args.check and result.changed:
        ui.error(
            f"{result.path} is out of date (or missing): run 'kernelwheel lock "
            f"{args.project_dir}' and commit it"
        )
        return 1
    return 0


def to_json(result: LockResult, log: Path, *, check: bool) -> dict[str, object]:
    wheels: list[dict[str, object]] = []
    kernels: list[dict[str, object]] = []
    for outcome in result.kernels:
        k = outcome.locked
        status = "carried-over" if outcome.reused else "locked"
        kernels.append(
            {
                "repo": k.repo,
                "requested": k.requested,
                "ref": k.ref,
                "commit": k.commit,
                "status": status,
                "variants": len(k.variants),
                "skipped": list(k.skipped),
            }
        )
        rows: list[tuple[str, str, str | None, str | None, dict[str, str]]] = [
            (v.name, status, v.wheel, v.wheel_sha256, {}) for v in k.variants
        ]
        rows += [
            (r.variant, "rejected", None, None, {"reason": r.reason}) for r in outcome.rejected
        ]
        wheels += [
            {
                "repo": k.repo,
                "variant": name,
                "status": how,
                "path": None,  # lock keeps no wheel: 'kernelwheel download' makes them
                "wheel": wheel,
                "sha256": sha256,
                "log": str(log),
                **extra,
            }
            for name, how, wheel, sha256, extra in rows
        ]
    return {
        "command": "lock",
        "ok": not (check and result.changed),
        "lock": str(result.path),
        "changed": result.changed,
        "written": result.written,
        "log": str(log),
        "kernels": kernels,
        "wheels": wheels,
        "notes": list(result.notes),
    }


def report(result: LockResult, ui: ConsoleUI) -> None:
    ui.print()
    for outcome in result.kernels:
        k = outcome.locked
        how = "carried over" if outcome.reused else "locked"
        ui.print(
            f"  {k.repo} {k.requested!r} -> {k.ref} (commit {k.commit[:12]}): "
            f"{len(k.variants)} variant(s) {how}"
        )
        for r in outcome.rejected:
            ui.warn(f"{k.repo} {r.variant}: not locked: {r.reason}")
        if outcome.reused and k.skipped:
            ui.warn(f"{k.repo}: {len(k.skipped)} variant(s) not locked: {', '.join(k.skipped)}")
    for note in result.notes:
        ui.warn(note)
    if result.written:
        ui.print(f"wrote {result.path}")
    elif result.changed:
        ui.print(f"{result.path} would change (--check: not written)")
    else:
        ui.print(f"{result.path} is up to date")
