"""``kernelwheel download``: the locked kernels as wheels in a wheelhouse (docs/lockfile.md). Every
file is checked against the lock as it is read, then every wheel; all is made in a staging folder
and moved in only when every wheel is verified."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .. import __version__
from .._util import RUNNER, Runner, output_dir, publish, sha256_file, staging_dir
from ..compat import rules as compat
from ..compat.builds import parse_variant
from ..errors import HubError, ProjectError, UsageError, WheelError
from ..hub.revision import VersionRequest
from ..hub.source import RepoFile
from ..hub.towheel import AbiCheck, ToWheelRequest, default_abi_check, to_wheels
from ..log import Reporter, SilentReporter
from ..plan.selector import Selector
from ..wheels import source_date_epoch
from .declared import PYPROJECT, Dependency, read_dependencies
from .fortorch import choose_for_torch, parse_torch
from .lockfile import LOCK_NAME, LockedKernel, LockedVariant, LockFile
from .pylock import (
    PYLOCK,
    REQUIREMENTS,
    HouseWheel,
    pylock_toml,
    requirements_txt,
    written_by_kernelwheel,
)
from .resolve import PinnedSource, open_dependency

_RELOCK = "run 'kernelwheel lock' and review the diff of kernelwheel.lock"
# After an integrity failure the lock itself may be wrong: convert everything again.
_REFRESH = "run 'kernelwheel lock --refresh' and review the diff of kernelwheel.lock"


def _unwritten(message: str) -> HubError:
    """An integrity failure, before anything reached the wheelhouse."""
    return HubError(message, hint=f"nothing was written; {_REFRESH}")


@dataclass(frozen=True)
class DownloadRequest:
    project_dir: Path
    wheelhouse: Path
    variants: tuple[str, ...] = ()  # globs over variant names; empty: every locked variant
    jobs: int = 0
    torch: str | None = None  # "2.13.0+cpu": only the builds install would choose for it
    force: bool = False  # replace a requirements.txt / pylock.toml kernelwheel did not write


@dataclass(frozen=True)
class DownloadResult:
    wheelhouse: Path
    wheels: tuple[HouseWheel, ...]
    requirements: Path
    pylock: Path | None
    pylock_note: str  # why pylock.toml was (not) written
    not_selected: tuple[tuple[str, str], ...] = ()  # (repo, variant)
    # --torch: (repo, variant, why another build was chosen or why it cannot run)
    passed_over: tuple[tuple[str, str, str], ...] = ()
    # an earlier download's wheels of locked variants not selected now (pip would take them)
    removed: tuple[Path, ...] = ()


def _check_lock(lock: LockFile, path: Path) -> None:
    if lock.kernelwheel != __version__:
        raise ProjectError(
            f"written by kernelwheel {lock.kernelwheel}, but this is kernelwheel {__version__}: "
            "the wheels would differ from the recorded hashes (each wheel names its generator)",
            file=path,
            key="kernelwheel",
            hint=f"install kernelwheel=={lock.kernelwheel}, or {_RELOCK}",
        )
    if lock.source_date_epoch != (epoch := source_date_epoch()):
        raise ProjectError(
            f"records wheels made with SOURCE_DATE_EPOCH={lock.source_date_epoch}, but it is "
            f"{epoch} now: their timestamps, hence their hashes, would differ",
            file=path,
            key="source-date-epoch",
            hint=f"run with SOURCE_DATE_EPOCH={lock.source_date_epoch} (or unset it if that is "
            f"the default), or {_RELOCK}",
        )


def _check_fresh(lock: LockFile, lock_path: Path, project_dir: Path) -> None:
    """The lock must pin what pyproject.toml declares now (when the project has one)."""
    if not (project_dir / PYPROJECT).exists():
        return
    declared = {d.repo: d for d in read_dependencies(project_dir).dependencies}
    locked = {k.repo: k for k in lock.kernels}
    problems = [f"{r} is declared but not locked" for r in sorted(declared.keys() - locked)]
    problems += [f"{r} is locked but no longer declared" for r in sorted(locked.keys() - declared)]
    for repo in sorted(declared.keys() & locked):
        d, k = declared[repo], locked[repo]
        if d.requested != k.requested:
            problems.append(f"{repo} is declared {d.requested!r} but locked as {k.requested!r}")
        if d.path != k.path:
            problems.append(f"{repo} is declared with path {d.path!r} but locked with {k.path!r}")
    if problems:
        raise ProjectError(
            f"out of date with {PYPROJECT}: " + "; ".join(problems), file=lock_path, hint=_RELOCK
        )


def _select(
    lock: LockFile, patterns: Sequence[str], lock_path: Path
) -> tuple[dict[str, list[LockedVariant]], list[tuple[str, str]]]:
    selector = Selector(build=tuple(patterns) or ("*",), build_label="--variant")
    for kernel in lock.kernels:  # checked first: an empty kernel empties every hint below
        if not kernel.variants:
            skipped = ", ".join(kernel.skipped)
            skipped = f" (skipped when locked: {skipped})" if skipped else ""
            raise ProjectError(
                f"locks no variant of {kernel.repo}{skipped}, so the wheelhouse would lack it",
                file=lock_path,
                key="kernel",
                hint=f"{_RELOCK}; if {kernel.repo} has no variant that converts, fix or drop its "
                f"declaration in {PYPROJECT}",
            )
    every = [v.name for k in lock.kernels for v in k.variants]
    for pattern in selector.build:
        if not any(Selector(build=(pattern,)).matches(n) for n in every):
            raise UsageError(
                f"--variant {pattern!r} matches no locked variant",
                hint=f"locked variants: {', '.join(sorted(set(every)))}",
            )
    chosen: dict[str, list[LockedVariant]] = {}
    left: list[tuple[str, str]] = []
    for kernel in lock.kernels:
        if not (picked := [v for v in kernel.variants if selector.matches(v.name)]):
            raise UsageError(
                f"--variant {' '.join(selector.build)!r} selects no variant of {kernel.repo}, so "
                "the wheelhouse would lack it",
                hint=f"add a pattern for one of its locked variants: "
                f"{', '.join(v.name for v in kernel.variants)}",
            )
        chosen[kernel.repo] = picked
        left += [(kernel.repo, v.name) for v in kernel.variants if v not in picked]
    return chosen, left


class _Verifier:
    """The FileHook of ``download``: every file read must have the sha256 the lock recorded."""

    def __init__(self, kernel: LockedKernel, variants: Sequence[LockedVariant], lock: Path):
        self.kernel = kernel
        self.expected = {v.name: dict(v.files) for v in variants}
        self.lock_path = lock
        self.seen: dict[str, set[str]] = {v.name: set() for v in variants}
        self.lock = threading.Lock()

    def __call__(self, file: RepoFile, sha256: str) -> None:
        if (expected := self.expected.get(file.variant, {}).get(file.inner)) is None:
            raise _unwritten(
                f"{self.kernel.repo} at commit {self.kernel.commit}: {file.path} would be "
                f"packaged, but {self.lock_path} records no hash for it (actual sha256 {sha256})"
            )
        if sha256 != expected:
            raise HubError(
                f"{self.kernel.repo} at commit {self.kernel.commit}: {file.path}: sha256 "
                f"mismatch: expected {expected} ({self.lock_path}), actual {sha256}",
                hint="the download, the cache or the clone was altered, or the repo's history "
                "was rewritten; nothing was written to the wheelhouse. Clear the cached copy "
                f"(HF_HUB_CACHE) or re-fetch the clone and retry; if the change is expected, "
                f"{_REFRESH}",
            )
        with self.lock:
            self.seen[file.variant].add(file.inner)

    def check_complete(self, variant: str) -> None:
        if missing := sorted(set(self.expected[variant]) - self.seen[variant]):
            raise _unwritten(
                f"{self.kernel.repo} {variant}: {self.lock_path} records "
                f"{', '.join(missing)}, but the conversion did not package it"
            )


def _materialise(
    kernel: LockedKernel,
    variants: Sequence[LockedVariant],
    out: Path,
    req: DownloadRequest,
    reporter: Reporter,
    runner: Runner,
    abi_check: AbiCheck | None,
) -> list[HouseWheel]:
    """``variants`` of ``kernel`` converted into ``out``, every file and wheel checked."""
    lock_path = req.project_dir / LOCK_NAME
    request = VersionRequest.parse(kernel.requested)
    where = f"kernel {kernel.repo}"
    dep = Dependency(kernel.repo, kernel.requested, request, kernel.path, where, str(lock_path))
    source = open_dependency(dep, req.project_dir, reporter, runner)
    verifier = _Verifier(kernel, variants, lock_path)
    pinned = PinnedSource(source, kernel.repo, kernel.ref, request, kernel.commit, verifier)
    try:
        result = to_wheels(
            ToWheelRequest(
                repo=kernel.repo,
                version=kernel.requested,
                output_dir=out,
                variants=tuple(v.name for v in variants),
                allow_abi_violations=kernel.allow_abi_violations,
                jobs=req.jobs,
            ),
            reporter,
            source=pinned,
            abi_check=abi_check,
        )
    except UsageError as exc:  # a locked variant the repo does not have at that commit
        raise HubError(
            f"{lock_path}: {kernel.repo} at commit {kernel.commit}: {exc.message}",
            hint=f"{exc.hint}; {_REFRESH}" if exc.hint else _REFRESH,
        ) from exc
    if result.rejected:
        reasons = "; ".join(f"{r.variant}: {r.reason}" for r in result.rejected)
        # wheels that could not be written (a full disk): the lock is not what needs changing
        unwritten = all(r.exit_code == WheelError.exit_code for r in result.rejected)
        raise (WheelError if unwritten else HubError)(
            f"{kernel.repo} at commit {kernel.commit}: locked variant(s) did not convert: "
            f"{reasons}",
            hint="nothing was written" + ("" if unwritten else f"; {_REFRESH}"),
        )
    made = {c.variant: c.wheel for c in result.converted}
    wheels = []
    for variant in variants:
        if (wheel := made.get(variant.name)) is None:
            raise _unwritten(
                f"{kernel.repo} {variant.name}: no wheel was made for this locked variant"
            )
        verifier.check_complete(variant.name)
        if wheel.name != variant.wheel:
            raise _unwritten(
                f"{kernel.repo} {variant.name}: the wheel is {wheel.name}, but {lock_path} "
                f"records {variant.wheel}"
            )
        actual = sha256_file(wheel)
        if actual != variant.wheel_sha256:
            raise HubError(
                f"{kernel.repo} {variant.name}: {wheel.name}: sha256 mismatch: expected "
                f"{variant.wheel_sha256} ({lock_path}), actual {actual}",
                hint="every file matched the lock, so the wheel writer differs (another "
                f"kernelwheel build, or a changed environment); nothing was written. {_REFRESH}",
            )
        wheels.append(HouseWheel(wheel, actual, kernel.repo, kernel.commit, variant.name))
    return wheels


def download(
    req: DownloadRequest,
    reporter: Reporter | None = None,
    *,
    runner: Runner = RUNNER,
    abi_check: AbiCheck | None = default_abi_check,
) -> DownloadResult:
    """The selected locked variants as verified wheels in ``req.wheelhouse``."""
    reporter = reporter or SilentReporter()
    lock_path = req.project_dir / LOCK_NAME
    lock = LockFile.load(lock_path)
    _check_lock(lock, lock_path)
    _check_fresh(lock, lock_path, req.project_dir)
    if not lock.kernels:
        raise ProjectError("locks no kernel", file=lock_path, hint=_RELOCK)
    chosen, left = _select(lock, req.variants, lock_path)
    passed_over: list[tuple[str, str, str]] = []
    if req.torch is not None:
        chosen, passed_over = _for_torch(chosen, req.torch, req.variants)
        left += [(repo, variant) for repo, variant, _ in passed_over]

    output_dir(req.wheelhouse, "--wheelhouse")
    _check_outputs(req, [v.wheel for variants in chosen.values() for v in variants])
    with staging_dir(req.wheelhouse, "download") as staging:
        wheels: list[HouseWheel] = []
        for i, kernel in enumerate(lock.kernels):
            wheels += _materialise(
                kernel, chosen[kernel.repo], staging / str(i), req, reporter, runner, abi_check
            )
        (staging / REQUIREMENTS).write_text(requirements_txt(wheels), encoding="utf-8")
        pylock, note = pylock_toml(wheels)
        if pylock is not None:
            (staging / PYLOCK).write_text(pylock, encoding="utf-8")
        # Everything is verified: move it in (unless the user put a file of theirs meanwhile).
        _check_outputs(req, [w.filename for w in wheels])
        placed = [replace(w, path=publish(w.path, req.wheelhouse / w.filename)) for w in wheels]
        publish(staging / REQUIREMENTS, req.wheelhouse / REQUIREMENTS)
        pylock_path = req.wheelhouse / PYLOCK if pylock is not None else None
        if pylock is not None:
            publish(staging / PYLOCK, req.wheelhouse / PYLOCK)
        elif written_by_kernelwheel(req.wheelhouse / PYLOCK):
            (req.wheelhouse / PYLOCK).unlink()  # an earlier download's: it names other wheels
        removed = _stale_wheels(lock, req.wheelhouse, {w.filename for w in wheels})
        for path in removed:
            path.unlink()
    return DownloadResult(
        req.wheelhouse,
        tuple(placed),
        req.wheelhouse / REQUIREMENTS,
        pylock_path,
        note,
        tuple(left),
        tuple(passed_over),
        removed,
    )


def _stale_wheels(lock: LockFile, house: Path, kept: set[str]) -> tuple[Path, ...]:
    """The wheels of locked variants an earlier download left in ``house`` that this one did
    not select, each byte for byte the lock's (so download can make it again): the new
    requirements.txt does not list them, and pip would take one whose label sorts higher and
    fail its hash check."""
    return tuple(
        path
        for kernel in lock.kernels
        for variant in kernel.variants
        if variant.wheel not in kept
        and (path := house / variant.wheel).is_file()
        and not path.is_symlink()
        and sha256_file(path) == variant.wheel_sha256
    )


def _for_torch(
    chosen: dict[str, list[LockedVariant]], torch_text: str, globs: Sequence[str]
) -> tuple[dict[str, list[LockedVariant]], list[tuple[str, str, str]]]:
    """Of each kernel's selected variants, those ``kernelwheel install`` would choose for the
    torch; a kernel with none that can run under it is an error naming every reason."""
    torch = parse_torch(torch_text)
    kept: dict[str, list[LockedVariant]] = {}
    passed: list[tuple[str, str, str]] = []
    for repo, variants in chosen.items():
        choice = choose_for_torch(variants, torch)
        if not choice.chosen:
            reasons = "; ".join(f"{v.name}: {why}" for v, why in choice.passed_over)
            among = " selected by --variant" if globs else ""
            raise UsageError(
                f"--torch {torch_text}: no locked variant of {repo}{among} can run under "
                f"{torch.describe()} ({reasons})",
                hint=_torch_hint(choice.passed_over, torch),
            )
        kept[repo] = list(choice.chosen)
        passed += [(repo, v.name, why) for v, why in choice.passed_over]
    return kept, passed


def _torch_hint(passed: Sequence[tuple[LockedVariant, str]], torch: compat.Torch) -> str:
    floors = [
        v.torch
        for v in (parse_variant(p.name) for p, _ in passed)
        if v is not None and v.stable_abi and v.torch is not None
    ]
    lowest = min(floors, key=lambda t: (t.major, t.minor), default=None)
    if lowest is not None and torch.release < (lowest.major, lowest.minor):
        return (
            f"its stable-ABI builds need torch >= {lowest.major}.{lowest.minor}: upgrade torch, "
            "or lock a release of the kernel that has a build for this torch"
        )
    return "lock a release of the kernel that has a build for this torch, or name another --torch"


def _check_outputs(req: DownloadRequest, wheels: Sequence[str] = ()) -> None:
    """Refuse, before anything is written, a user's requirements.txt or pylock.toml (without
    --force) or a folder where a wheel goes (the wheels before it would be moved in, none after)."""
    for name in wheels:
        if (path := req.wheelhouse / name).is_dir() and not path.is_symlink():
            raise UsageError(
                f"--wheelhouse {req.wheelhouse}: {path} is a folder, where download would put "
                "that wheel; nothing was written",
                hint=f"move {path} away, or pass another --wheelhouse DIR",
            )
    if req.force:
        return
    for name in (REQUIREMENTS, PYLOCK):
        path = req.wheelhouse / name
        if (path.exists() or path.is_symlink()) and not written_by_kernelwheel(path):
            raise UsageError(
                f"--wheelhouse {req.wheelhouse}: {path} was not written by kernelwheel (it does "
                f"not begin as kernelwheel's {name} does); download would replace it, so "
                "nothing was written",
                hint=f"move {path} away, pass another --wheelhouse DIR, or pass --force to "
                "replace it",
            )
