"""``kernelwheel lock``: each declared kernel resolved to a commit and converted, recording the
sha256 of every file read and of the wheel (wheels are reproducible, so ``download`` can demand the
same bytes); an unchanged kernel is carried over (docs/lockfile.md)."""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from packaging.utils import canonicalize_name, parse_wheel_filename

from .. import __version__
from .._util import RUNNER, Runner, atomic_write, sha256_file
from ..errors import HubError, ProjectError, WheelError
from ..hub.gitsource import GitSource
from ..hub.hubsource import HubSource
from ..hub.revision import Ref, RefKind, RequestKind, Resolution, VersionRequest
from ..hub.safety import Announced
from ..hub.source import FileReader, RepoFile, RepoSource
from ..hub.towheel import AbiCheck, Rejected, ToWheelRequest, default_abi_check, resolve, to_wheels
from ..log import Reporter, SilentReporter
from ..wheels import source_date_epoch
from .declared import Dependency, read_dependencies
from .lockfile import LOCK_NAME, LockedKernel, LockedVariant, LockFile

_T = TypeVar("_T")
# Called with (file, sha256 of its content) before the conversion uses the file; raises to stop.
FileHook = Callable[[RepoFile, str], None]


@dataclass(frozen=True)
class PinnedSource:
    """A kernel repo seen at one commit, for the to-wheel machinery: its only ref is the locked tag
    or branch at the locked commit (wherever the real ref has moved since), and every file the
    conversion reads passes ``hook``, which records its sha256 (``lock``) or checks it
    (``download``)."""

    inner: RepoSource
    repo: str  # the Hub repo id: the wheels' name is derived from its second part
    ref: str
    request: VersionRequest  # ref's origin: a major version is a branch, any other a tag
    commit: str
    hook: FileHook

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]

    @property
    def where(self) -> str:
        return self.inner.where

    def refs(self) -> Sequence[Ref]:
        kind = RefKind.BRANCH if self.request.kind is RequestKind.MAJOR else RefKind.TAG
        return [Ref(self.ref, kind, self.commit)]

    def rev_parse(self, revision: str) -> tuple[RefKind, str]:
        return self.inner.rev_parse(revision)

    def list_build(self, commit: str) -> Sequence[RepoFile]:
        return self.inner.list_build(commit)

    @contextmanager
    def fetch(self, commit: str, files: Sequence[RepoFile]) -> Iterator[FileReader]:
        with self.inner.fetch(commit, files) as reader:
            yield _HookedReader(reader, self.hook)


@dataclass(frozen=True)
class _HookedReader:
    inner: FileReader
    hook: FileHook

    def read(self, file: RepoFile) -> tuple[bytes, Announced]:
        data, announced = self.inner.read(file)
        self.hook(file, hashlib.sha256(data).hexdigest())
        return data, announced


@dataclass(frozen=True)
class LockRequest:
    project_dir: Path
    refresh: bool = False  # convert every kernel again, even where the lock is current
    check: bool = False  # compute the lock and compare, write nothing
    allow_abi_violations: bool = False
    jobs: int = 0  # variants converted in parallel (0: per CPU)


@dataclass(frozen=True)
class KernelOutcome:
    dependency: Dependency
    locked: LockedKernel
    reused: bool  # carried over from the existing lock
    rejected: tuple[Rejected, ...] = ()  # variants left out, with reasons


@dataclass(frozen=True)
class LockResult:
    path: Path
    lock: LockFile
    changed: bool  # the file on disk differs (or is missing)
    written: bool
    kernels: tuple[KernelOutcome, ...]
    notes: tuple[str, ...] = field(default=())


def open_dependency(
    dep: Dependency, project_dir: Path, reporter: Reporter | None = None, runner: Runner = RUNNER
) -> RepoSource:
    """The Hub repo, or the git clone the declaration names (its git run through ``runner``)."""
    if dep.path is None:
        return _in_context(dep, lambda: HubSource(dep.repo, reporter=reporter))
    folder = (project_dir / dep.path).resolve()
    if not folder.is_dir():
        raise ProjectError(
            f"{dep.declared_in}: path {dep.path!r}: no such folder ({folder})",
            file=Path(dep.origin),
            hint=f"clone {dep.repo} there (git clone, then git lfs pull), or fix the path",
        )
    return _in_context(dep, lambda: GitSource(folder, runner))


def _in_context(dep: Dependency, fn: Callable[[], _T]) -> _T:
    """``fn()``, its HubError prefixed with the declaration it came from."""
    try:
        return fn()
    except HubError as exc:
        raise HubError(
            f"{dep.origin}: {dep.declared_in} = {dep.requested!r}: {exc.message}", hint=exc.hint
        ) from exc


def _previous(path: Path, notes: list[str]) -> LockFile | None:
    if not path.exists():
        return None
    try:
        return LockFile.load(path)
    except ProjectError as exc:
        notes.append(f"the existing {LOCK_NAME} cannot be read, so nothing is carried over: {exc}")
        return None


def _reusable(
    old: LockFile | None, dep: Dependency, resolution: Resolution, allow_abi: bool
) -> LockedKernel | None:
    if old is None or old.kernelwheel != __version__:
        return None
    if old.source_date_epoch != source_date_epoch():
        return None
    if (kernel := old.kernel(dep.repo)) is None or not kernel.variants:
        return None
    same = (kernel.requested, kernel.path, kernel.allow_abi_violations, kernel.ref, kernel.commit)
    now = (dep.requested, dep.path, allow_abi, resolution.ref, resolution.commit)
    return kernel if same == now else None


def lock_kernel(
    dep: Dependency,
    source: RepoSource,
    resolution: Resolution,
    req: LockRequest,
    reporter: Reporter,
    abi_check: AbiCheck | None,
) -> tuple[LockedKernel, tuple[Rejected, ...]]:
    """Convert every variant of ``dep`` at the resolved commit and record the hashes."""
    files: dict[str, dict[str, str]] = {}  # variant -> the sha256 of every file read
    lock = threading.Lock()

    def record(file: RepoFile, sha256: str) -> None:  # the FileHook of ``lock``
        with lock:
            files.setdefault(file.variant, {})[file.inner] = sha256

    pinned = PinnedSource(source, dep.repo, resolution.ref, dep.request, resolution.commit, record)
    with tempfile.TemporaryDirectory(prefix="kernelwheel-lock-") as tmp:
        request = ToWheelRequest(
            repo=dep.repo,
            version=dep.requested,
            output_dir=Path(tmp),
            allow_abi_violations=req.allow_abi_violations,
            jobs=req.jobs,
        )
        result = to_wheels(request, reporter, source=pinned, abi_check=abi_check)
        variants = tuple(
            LockedVariant(
                name=c.variant,
                wheel=c.wheel.name,
                wheel_sha256=sha256_file(c.wheel),
                files=tuple(sorted(files.get(c.variant, {}).items())),
            )
            for c in result.converted
        )
    if unwritten := [r for r in result.rejected if r.exit_code == WheelError.exit_code]:
        # this machine could not write the wheel (a full disk): no property of the variant
        raise WheelError(
            f"{dep.repo}: {unwritten[0].variant}: {unwritten[0].reason.splitlines()[0]}",
            hint=f"free space where the wheels are made (TMPDIR), or set TMPDIR to a folder on "
            f"another disk; {LOCK_NAME} was not written",
        )
    if not variants:
        reasons = "; ".join(f"{r.variant}: {r.reason.splitlines()[0]}" for r in result.rejected)
        raise HubError(
            f"{dep.origin}: {dep.declared_in}: no variant of {dep.repo} at commit "
            f"{resolution.commit} converts to a wheel ({reasons or 'none found'})",
            hint="lock another version"
            + ("" if req.allow_abi_violations else ", or pass --allow-abi-violations"),
        )
    locked = LockedKernel(
        repo=dep.repo,
        requested=dep.requested,
        ref=resolution.ref,
        commit=resolution.commit,
        version=resolution.version,
        variants=variants,
        path=dep.path,
        allow_abi_violations=req.allow_abi_violations,
        skipped=tuple(sorted(r.variant for r in result.rejected)),
    )
    return locked, result.rejected


def lock_project(
    req: LockRequest,
    reporter: Reporter | None = None,
    *,
    runner: Runner = RUNNER,
    abi_check: AbiCheck | None = default_abi_check,
) -> LockResult:
    """Resolve, convert and record every declared kernel; write ``kernelwheel.lock`` when it
    changed (unless ``check``). A local clone's git runs through ``runner``."""
    reporter = reporter or SilentReporter()
    declarations = read_dependencies(req.project_dir)
    path = req.project_dir / LOCK_NAME
    notes: list[str] = []
    old = None if req.refresh else _previous(path, notes)
    outcomes: list[KernelOutcome] = []
    for dep in declarations.dependencies:
        source = open_dependency(dep, req.project_dir, reporter, runner)
        resolution = _in_context(dep, partial(resolve, source, dep.request))
        if (kept := _reusable(old, dep, resolution, req.allow_abi_violations)) is not None:
            reporter.info(
                dep.repo.split("/", 1)[1],  # as the converting run names it, not the clone's folder
                f"{resolution.describe()}: unchanged since the lock, "
                f"{len(kept.variants)} variant(s) carried over",
            )
            outcomes.append(KernelOutcome(dep, kept, reused=True))
            continue
        locked, rejected = lock_kernel(dep, source, resolution, req, reporter, abi_check)
        outcomes.append(KernelOutcome(dep, locked, reused=False, rejected=rejected))
    _check_distributions(outcomes, declarations.pyproject)
    lock = LockFile(__version__, source_date_epoch(), tuple(o.locked for o in outcomes))
    text = lock.dumps()
    try:
        changed = path.read_text(encoding="utf-8") != text
    except FileNotFoundError:
        changed = True
    if written := changed and not req.check:
        atomic_write(path, text)
    return LockResult(path, lock, changed, written, tuple(outcomes), tuple(notes))


def _check_distributions(outcomes: list[KernelOutcome], pyproject: Path) -> None:
    """Two kernels whose wheels share a distribution name would overwrite each other."""
    owner: dict[str, str] = {}
    for outcome in outcomes:
        kernel = outcome.locked
        for variant in kernel.variants:
            name = canonicalize_name(parse_wheel_filename(variant.wheel)[0])
            if (first := owner.setdefault(name, kernel.repo)) != kernel.repo:
                raise ProjectError(
                    f"{first} and {kernel.repo} both make wheels of the distribution {name}",
                    file=pyproject,
                    hint="pip can install only one of them; declare only one",
                )
