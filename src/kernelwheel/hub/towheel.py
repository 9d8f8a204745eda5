"""``to-wheel``: resolve a revision, select variants, download, convert, check, publish. Wheels are
published only once every selected file is verified (docs/to-wheel.md, "Safety"); a variant that
cannot be converted or fails the ABI check is reported with its reason, the others written."""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._util import DISK_FULL_HINT, RUNNER, Runner, output_dir, publish, staging_dir
from ..errors import AbiError, HubError, KernelwheelError, VariantError, WheelError
from ..log import Reporter, SilentReporter, step
from ..model.variant import OS, LocalVersionStyle, Variant
from ..plan.options import resolve_jobs
from ..plan.selector import Selector
from ..wheels import wheel_filename, write_wheel
from ..wheels.reader import verify_contents
from .convert import PreparedWheel, Unconvertible, prepare_wheel
from .gitsource import GitSource
from .hubsource import HubSource, repo_id_problem
from .layout import Layout
from .revision import RequestKind, Resolution, VersionRequest, choose_ref, revision_resolution
from .source import FileReader, RepoFile, RepoSource, group_by_variant

if TYPE_CHECKING:
    from ..abi.report import WheelReport

# (the wheel written, its files as written: archive path -> bytes) -> verdict
AbiCheck = Callable[[Path, Mapping[str, bytes]], "WheelReport"]


def default_abi_check(wheel: Path, files: Mapping[str, bytes]) -> WheelReport:
    """``kernelwheel check``'s check, on the bytes just written rather than read back."""
    from ..abi.checker import check_wheel

    return check_wheel(wheel, members=files)


@dataclass(frozen=True)
class ToWheelRequest:
    repo: str  # a Hub repo id or the path of a local git clone
    version: str
    revision: str | None = None
    output_dir: Path = Path("wheelhouse")
    variants: tuple[str, ...] = ()  # globs; empty means all
    allow_abi_violations: bool = False
    jobs: int = 0  # 0: one per CPU, at most 32
    local_version_style: LocalVersionStyle = LocalVersionStyle.DOTTED
    name: str | None = None  # the package/distribution name, above what the repo says


@dataclass(frozen=True)
class Converted:
    variant: str
    wheel: Path
    layout: Layout
    package: str
    abi: str  # "ok", "not checked (…)" or "violations allowed: …"
    notes: tuple[str, ...] = ()
    left_out: tuple[tuple[str, str], ...] = ()
    # metadata.json's kernels-minver (the lowest kernels release that loads the Hub variant;
    # the wheel itself imports without kernels): reported, and kept in .dist-info/hub/.
    kernels_minver: str | None = None


@dataclass(frozen=True)
class Rejected:
    variant: str
    reason: str
    exit_code: int


@dataclass(frozen=True)
class ToWheelResult:
    where: str
    resolution: Resolution
    converted: tuple[Converted, ...]
    rejected: tuple[Rejected, ...]
    not_selected: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return max((r.exit_code for r in self.rejected), default=0)


def open_source(repo: str, reporter: Reporter | None = None, runner: Runner = RUNNER) -> RepoSource:
    """A local folder is a git clone; anything else must be a Hub repo id (``reporter`` hears
    when the Hub source falls back from the kernel-type repo to the model-type one)."""
    path = Path(repo).expanduser()
    if path.is_dir():
        return GitSource(path, runner)  # git runs through ``runner``
    if (refused := refused_source(repo)) is not None:
        raise refused
    return HubSource(repo, reporter)


def refused_source(repo: str) -> HubError | None:
    """Why :func:`open_source` refuses ``repo`` before reading anything: a path to no folder,
    or no Hub repo id (to-wheel says so before it makes its output folder)."""
    if Path(repo).expanduser().is_dir():
        return None
    if repo.startswith((".", "/", "~")) or os.sep in repo.strip("/").replace("/", "", 1):
        return HubError(f"{repo}: no such folder", hint="pass a git clone or a Hub id (org/name)")
    if (problem := repo_id_problem(repo)) is not None:
        return HubError(
            f"{repo!r} is neither a local folder nor a Hub repo id: it {problem}",
            hint="pass org/name (e.g. drbh/img2gray) or the path of a git clone",
        )
    return None


def resolve(source: RepoSource, request: VersionRequest) -> Resolution:
    if request.kind is RequestKind.REVISION:
        assert request.ref is not None
        kind, commit = source.rev_parse(request.ref)
        return revision_resolution(request, kind, commit)
    resolution = choose_ref(request, source.refs(), where=source.where)
    pin = getattr(source, "pin", None)
    if pin is not None:  # the Hub: pin the name in the cache for later offline runs
        resolution = dataclasses.replace(resolution, commit=pin(resolution.ref, resolution.commit))
    return resolution


@dataclass(frozen=True)
class _Serialized:
    """Reports from worker threads, one at a time (lines never interleave)."""

    inner: Reporter
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def __getattr__(self, name: str) -> Callable[..., None]:
        def locked(*args: object) -> None:
            with self.lock:
                getattr(self.inner, name)(*args)

        return locked


def to_wheels(
    req: ToWheelRequest,
    reporter: Reporter | None = None,
    *,
    source: RepoSource | None = None,
    abi_check: AbiCheck | None = default_abi_check,
    runner: Runner = RUNNER,
) -> ToWheelResult:
    """Convert the selected variants of a kernel repo, each an outcome; HubError (nothing
    written) when the repo, revision or a file's integrity is wrong."""
    reporter = _Serialized(reporter or SilentReporter())
    request = VersionRequest.parse(req.version, req.revision)
    selector = Selector(build=req.variants or ("*",), build_label="--variant")
    src = source or open_source(req.repo, reporter=reporter, runner=runner)
    scope = src.name
    with step(reporter, scope, f"resolve {request.describe()} in {src.where}") as detail:
        resolution = resolve(src, request)
        detail.append(resolution.describe())
    with step(reporter, scope, "list build/") as detail:
        by_variant = group_by_variant(src.list_build(resolution.commit))
        detail.append(f"{len(by_variant)} variant folder(s)")
    if not by_variant:
        raise HubError(
            f"{src.where}: build/ holds no variant folders at commit {resolution.commit}",
            hint="kernel repos keep each build in build/<variant>/ (e.g. "
            "build/torch27-cxx11-cu128-x86_64-linux/)",
        )
    chosen = selector.select(list(by_variant))
    not_selected = tuple(n for n in by_variant if n not in chosen)
    rejected: list[Rejected] = []
    variants: dict[str, Variant] = {}
    for name in chosen:
        try:
            variants[name] = Variant.parse(name)
        except VariantError as exc:
            rejected.append(Rejected(name, f"cannot map the variant name: {exc}", exc.exit_code))
    wanted = [f for name in variants for f in by_variant[name]]
    if not wanted:
        return ToWheelResult(src.where, resolution, (), tuple(rejected), not_selected)

    output_dir(req.output_dir, "--output-dir")
    with staging_dir(req.output_dir, "to-wheel") as staging:
        with ExitStack() as stack:
            with step(reporter, scope, "fetch") as detail:
                reader = stack.enter_context(src.fetch(resolution.commit, wanted))
                detail.append(f"{len(wanted)} file(s) of {len(variants)} variant(s)")
                if isinstance(src, HubSource):
                    detail.append("(downloading beside the conversion)")
            run = _Conversion(req, src, resolution, reader, reporter, abi_check)
            outcomes = _convert_all(run, variants, by_variant, staging)
        converted: list[Converted] = []
        for outcome in _refuse_collisions(outcomes):
            if isinstance(outcome, Rejected):
                rejected.append(outcome)
                continue
            final = req.output_dir / outcome.wheel.name
            publish(outcome.wheel, final)
            converted.append(dataclasses.replace(outcome, wheel=final))
    order = list(by_variant)
    rejected.sort(key=lambda r: order.index(r.variant))
    return ToWheelResult(src.where, resolution, tuple(converted), tuple(rejected), not_selected)


def _refuse_collisions(outcomes: list[Converted | Rejected]) -> list[Converted | Rejected]:
    """Variant folders that spell one variant two ways (``cu128`` and ``cu12.8``) make one
    wheel name: neither is written (which one was meant cannot be known), both are reported."""
    by_wheel: dict[str, list[str]] = {}
    for o in outcomes:
        if isinstance(o, Converted):
            by_wheel.setdefault(o.wheel.name, []).append(o.variant)
    out: list[Converted | Rejected] = []
    for o in outcomes:
        if not isinstance(o, Converted) or len(by_wheel[o.wheel.name]) == 1:
            out.append(o)
            continue
        others = ", ".join(v for v in by_wheel[o.wheel.name] if v != o.variant)
        out.append(
            Rejected(
                o.variant,
                f"makes the same wheel as {others} ({o.wheel.name}); neither is written\n"
                "  (remove or rename all but one of these build/ folders in the repo, or select "
                "one with --variant)",
                VariantError.exit_code,
            )
        )
    return out


def _convert_all(
    run: _Conversion,
    variants: dict[str, Variant],
    by_variant: dict[str, list[RepoFile]],
    staging: Path,
) -> list[Converted | Rejected]:
    claimed: set[str] = set()
    lock = threading.Lock()

    def folder_for(name: str, wheel: str) -> Path:
        """The staging folder for the first variant to claim a wheel name, one of its own for a
        later one (not one per variant: an empty folder costs milliseconds to remove)."""
        with lock:
            if wheel not in claimed:
                claimed.add(wheel)
                return staging
        own = staging / str(names.index(name))
        own.mkdir()
        return own

    def one(name: str) -> Converted | Rejected:
        return run.one(name, variants[name], by_variant[name], functools.partial(folder_for, name))

    names = list(variants)
    # Compressing and hashing release the GIL: threads scale with the CPUs this process may use.
    jobs = min(run.req.jobs if run.req.jobs > 0 else min(32, resolve_jobs(None)), len(names))
    if jobs <= 1:
        return [one(n) for n in names]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, names))  # a failure cancels the variants not started


@dataclass(frozen=True)
class _Conversion:
    """What the conversions of one run's variants share."""

    req: ToWheelRequest
    src: RepoSource
    resolution: Resolution
    reader: FileReader
    reporter: Reporter
    abi_check: AbiCheck | None

    def one(
        self,
        folder: str,
        variant: Variant,
        files: Sequence[RepoFile],
        staging: Callable[[str], Path],  # the wheel's file name -> the folder to write it into
    ) -> Converted | Rejected:
        req, src = self.req, self.src
        try:
            with step(self.reporter, folder, "wheel") as detail:
                prepared = prepare_wheel(
                    variant,
                    files,
                    self.reader,
                    repo_name=src.name,
                    resolution=self.resolution,
                    where=src.where,
                    style=req.local_version_style,
                    name=req.name,
                )
                spec = prepared.spec
                wheel = write_wheel(
                    spec,
                    staging(wheel_filename(spec.name, spec.version, spec.tag)),
                    shown=req.output_dir,
                )
                detail.append(wheel.name)
                try:
                    verify_contents(wheel)  # the wheel rule, on what was just written
                except WheelError:
                    wheel.unlink(missing_ok=True)
                    raise
        except Unconvertible as exc:
            return Rejected(folder, str(exc), HubError.exit_code)
        except WheelError as exc:
            if exc.hint == DISK_FULL_HINT:
                exc.hint += " with --output-dir"
            return Rejected(folder, f"cannot write the wheel: {exc}", exc.exit_code)
        if variant.noarch:
            abi = "not checked (noarch)"
        elif variant.os is not OS.LINUX:
            abi = f"not checked (the ABI check reads ELF; {variant.os.value if variant.os else ''})"
        elif self.abi_check is None:
            abi = "not checked (disabled)"
        else:
            outcome = self.abi(folder, wheel, prepared, self.abi_check)
            if isinstance(outcome, Rejected):
                wheel.unlink(missing_ok=True)
                return outcome
            abi = outcome
        plan, meta = prepared.plan, prepared.metadata
        minver = str(meta.kernels_minver) if meta is not None and meta.kernels_minver else None
        return Converted(
            folder, wheel, plan.layout, plan.package, abi, prepared.notes, plan.left_out, minver
        )

    def abi(
        self, folder: str, wheel: Path, prepared: PreparedWheel, abi_check: AbiCheck
    ) -> str | Rejected:
        try:
            with step(self.reporter, folder, "ABI check") as detail:
                try:
                    verdict = abi_check(wheel, prepared.members)
                except KernelwheelError as exc:
                    detail.append("could not check")
                    reason = f"ABI check failed to run: {exc}"
                    raise _StepFailed(Rejected(folder, reason, exc.exit_code)) from None
                if verdict.ok:
                    detail.append("ok")
                    return "ok"
                if self.req.allow_abi_violations:
                    detail.append("violations allowed")
                    return "violations allowed (--allow-abi-violations): " + verdict.summary()
                detail.append("violations: not written")
                reason = (
                    verdict.summary()
                    + "\n  (pass --allow-abi-violations to write such wheels anyway)"
                )
                raise _StepFailed(Rejected(folder, reason, AbiError.exit_code))
        except _StepFailed as failed:
            return failed.rejected


@dataclass(eq=False)
class _StepFailed(Exception):
    """Carries a rejection out of a reported step, so the step is marked failed, not done."""

    rejected: Rejected
