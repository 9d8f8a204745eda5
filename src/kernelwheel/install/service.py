"""``kernelwheel install``: probe, list, select, compare, then pinned pip runs, and every build read
back from the target (docs/install.md, "Selection"). Nothing is installed unless every package has a
fitting build; returns an :class:`InstallResult` or raises :class:`NoMatch`, never prints."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from .._util import RUNNER, Runner, sha256_file
from ..compat import interpreter as _interpreter
from ..compat import rules as compat
from ..errors import InstallError, UsageError
from ..model.sources import PipSources
from ..model.variant import variant_of_wheel
from ..plan.selector import Selector
from ..wheels.reader import read_record, verify_wheel
from .installed import (
    Action,
    Environment,
    Files,
    Installed,
    decide,
    differences,
    files_digest,
    listing,
    own_files,
    read_environment,
)
from .probe import Target, probe
from .select import Selection, merge_requirements, parse_requirement, select
from .sources import Candidate, fetch, list_candidates, site_root_hint


@dataclass(frozen=True)
class InstallRequest:
    requirements: tuple[str, ...]
    sources: PipSources  # its no_index keeps the index URLs from pip, not from the listing
    python: Path
    dry_run: bool = False
    variants: tuple[str, ...] = ()  # --variant globs: only builds of these variants
    reinstall: bool = False  # force a build in even where the same files are installed


@dataclass(frozen=True)
class Pick:
    selection: Selection
    location: str  # the chosen file's path or URL
    sha256: str | None
    pin: str  # the requirement handed to pip
    files: Files  # the build's own files, from the wheel's RECORD
    before: Installed | None = None  # what the target held of the project before
    action: Action = "install"

    @property
    def filename(self) -> str:
        assert self.selection.chosen is not None
        return self.selection.chosen.candidate.filename

    @property
    def version(self) -> Version:
        assert self.selection.chosen is not None
        return self.selection.chosen.release

    @property
    def digest(self) -> str:
        """:func:`~.installed.files_digest` of the wheel: the one the installed copy must have."""
        return files_digest(self.files)

    @property
    def changed(self) -> tuple[str, ...]:
        """The files that differ from the installed build's (none when nothing was there)."""
        return differences(self.before.files, self.files) if self.before else ()


@dataclass(frozen=True)
class InstallResult:
    status: str  # "installed", "already-installed" (no pip run) or "dry-run"
    target: Target
    picks: tuple[Pick, ...]
    commands: tuple[tuple[str, ...], ...]  # the pip runs, in order (none when all are kept)


class NoMatch(InstallError):
    """Some requested package has no build that fits the target; nothing was installed."""

    def __init__(
        self,
        target: Target,
        selections: list[Selection],
        sources: PipSources,
        hint: str | None = None,
        skipped: tuple[str, ...] = (),
    ) -> None:
        self.target = target
        self.selections = tuple(selections)
        message = _no_match_message(target, self.selections, sources, skipped)
        super().__init__(message, hint=hint or _versions_hint(self.selections) or _hint(target))


def _versions_hint(selections: tuple[Selection, ...]) -> str | None:
    """Where only the version asked for left every build out, the fix is the version."""
    held: dict[str, str] = {}
    for sel in (sel for sel in selections if sel.chosen is None):
        versions = {v.version.public for v in sel.verdicts if v.version is not None}
        if not versions or any(
            v.version is None or sel.requirement.specifier.contains(v.version, prereleases=True)
            for v in sel.verdicts
        ):
            return None
        held[str(sel.requirement)] = ", ".join(sorted(versions, key=Version))
    if not held:
        return None
    shown = "; ".join(f"{req}: the sources hold {versions}" for req, versions in held.items())
    return (
        f"ask for a version the sources hold ({shown}), or point --find-links/--index-url at a "
        "source that has the one asked for"
    )


def _no_match_message(
    target: Target,
    selections: tuple[Selection, ...],
    sources: PipSources,
    skipped: tuple[str, ...] = (),
) -> str:
    lines = []
    for sel in selections:
        if sel.chosen is not None:
            lines.append(f"{sel.requirement}: {sel.chosen.candidate.filename} fits")
        elif not sel.verdicts:
            pages = (f"{index.rstrip('/')}/{sel.project}/" for index in sources.indexes)
            read = ", ".join([*sources.find_links, *pages])
            lines.append(f"{sel.requirement}: no wheel of {sel.project} in {read}")
            lines += [
                f"  {page} (taken as not holding it, as pip does: an index answers so for a "
                "project it lacks, or for a login it refuses)"
                for page in skipped
                if f"/{sel.project}/:" in page
            ]
        else:
            lines.append(f"{sel.requirement}: no build fits; {len(sel.verdicts)} candidate(s):")
            lines += [f"  {v.candidate.filename}: {v.reason}" for v in sel.verdicts]
    return (
        f"no fitting build for this environment: {target.describe()}\n"
        + "\n".join(lines)
        + "\nnothing was installed"
    )


def _left_out_by_variant(request: InstallRequest, unfiltered: list[Selection]) -> str | None:
    """Where ``--variant`` left out a build that fits, the fix is the option, not a build."""
    fits = [sel.chosen.candidate.filename for sel in unfiltered if sel.chosen is not None]
    if not fits:
        return None
    names = sorted({v.name if (v := variant_of_wheel(f)) else f for f in fits})
    given = shlex.quote(" ".join(request.variants))
    return (
        f"--variant {given} leaves out what fits this environment ({', '.join(names)}): pass "
        f"--variant {shlex.quote(' '.join(names))}, or leave --variant out"
    )


def _hint(target: Target) -> str:
    if (t := target.torch) is None:
        return (
            f"install torch into the environment of {target.python} first for a torch build "
            "(kernelwheel install never installs torch), or pass --python PY of one that holds "
            "torch (without --python it installs into the active virtual environment, else "
            "into python3 on PATH), or point --find-links/--index-url at a source with a "
            "tvm-ffi build (they need no torch)"
        )
    major, minor = t.release
    abi = "" if t.kind == compat.METAL else f"-cxx{11 if t.cxx11 else 98}"
    name = f"torch{major}{minor}{abi}-{t.token}-{target.machine}-linux"
    return (
        f"build or download the variant for this torch ({name}, local version "
        f"+{compat.label(t, compact=False)}), or point --find-links/--index-url at a source "
        "that has it"
    )


def target_python(given: str | None = None) -> Path:
    """``--python`` as pip and uv read it, else the active virtual environment's python, else
    ``python3`` on PATH."""
    if given:
        try:
            return _interpreter.locate(given, Path.cwd())
        except UsageError as exc:
            raise UsageError(f"--python: {exc.message}", hint=exc.hint) from None
    if venv := os.environ.get("VIRTUAL_ENV"):
        return Path(venv) / "bin" / "python"
    if (found := shutil.which("python3") or shutil.which("python")) is None:
        raise UsageError("no python3 on PATH", hint="pass --python PATH")
    return Path(found)


def pinned_requirement(project: str, candidate: Candidate, sha256: str | None) -> str:
    url = Path(candidate.location).as_uri() if candidate.is_local else candidate.location
    return f"{project} @ {url}" + (f"#sha256={sha256}" if sha256 else "")


def pip_command(
    target: Target,
    pins: Sequence[str],
    sources: PipSources,
    *,
    force: bool = False,
    torch: bool = True,
) -> list[str]:
    """The pip run installing ``pins`` (direct references with their hashes, so pip can neither
    choose another build nor accept other bytes) with ``torch==<installed>``, so a dependency that
    needs another torch fails instead of replacing it; a forced run (a build of the installed
    version) gets ``--no-deps`` and no torch pin, nor does one of builds that need no torch
    (``torch``: False, tvm-ffi builds only) (docs/install.md, "Selection", step 6)."""
    # The target's own pip if it has one; else this pip, pointed at the target (pip >= 22.3).
    if target.has_pip:
        cmd = [str(target.python), "-m", "pip", "install"]
    else:
        cmd = [sys.executable, "-m", "pip", "--python", str(target.python), "install"]
    cmd.append("--disable-pip-version-check")
    if force:
        cmd += ["--force-reinstall", "--no-deps"]
    # the find-links absolute, so the printed command runs from anywhere
    links = tuple(ln if "://" in ln else str(Path(ln).resolve()) for ln in sources.find_links)
    cmd += dataclasses.replace(sources, find_links=links).pip_args()
    if force or not torch or target.torch_dist is None:  # no torch: none to keep
        return [*cmd, *pins]
    return [*cmd, *pins, f"torch=={target.torch_dist}"]


def run_pip(cmd: Sequence[str], runner: Runner = RUNNER) -> None:
    proc = runner.captured(cmd)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise InstallError(
            f"pip failed (exit {proc.returncode}); torch and the environment are as pip left "
            f"them:\n{tail}",
            hint="read pip's message above; --dry-run prints the command to run it yourself",
        )


def install(request: InstallRequest, runner: Runner = RUNNER) -> InstallResult:
    """Install ``request``'s kernels into its interpreter (pip and the probe through ``runner``)."""
    if not request.requirements:
        raise UsageError("no package given", hint="e.g. kernelwheel install img2gray -f wheelhouse")
    reqs = merge_requirements([parse_requirement(text) for text in request.requirements])
    if not request.sources.find_links and not request.sources.indexes:
        raise UsageError(
            "no source of wheels given",
            hint="pass --find-links DIR|URL and/or --index-url URL (kernel wheels carry local "
            "versions, so they are never on PyPI)",
        )
    target = probe(request.python, runner)
    projects = sorted({str(canonicalize_name(req.name)) for req in reqs})
    only = Selector(build=request.variants, build_label="--variant") if request.variants else None
    skipped: list[str] = []  # index pages answered 403/410: taken as not there, as pip does
    candidates = list_candidates(request.sources, projects, skipped)
    selections = select(reqs, candidates, target, only)
    if any(sel.chosen is None for sel in selections):
        hint = _left_out_by_variant(request, select(reqs, candidates, target)) if only else None
        if hint is None and not candidates:
            hint = site_root_hint(request.sources.indexes)
        raise NoMatch(target, selections, request.sources, hint, tuple(skipped))
    with tempfile.TemporaryDirectory(prefix="kw-install-") as downloads:
        fetched = [_pick(sel, Path(downloads)) for sel in selections]
    wanted = [p.selection.project for p in fetched]
    before = read_environment(target.python, wanted, runner)
    picks = tuple(_decide(p, before, request.reinstall) for p in fetched)
    commands = _commands(target, picks, request)
    if request.dry_run:
        return InstallResult("dry-run", target, picks, commands)
    if not commands:
        return InstallResult("already-installed", target, picks, ())
    for cmd in commands:
        run_pip(cmd, runner)
    after = read_environment(target.python, wanted, runner)
    if after.torch != target.torch_dist:  # the pin makes this impossible; say so loudly if not
        raise InstallError(
            f"torch changed from {target.torch_dist or 'none'} to {after.torch or 'none'} "
            "during the install",
            hint="report this: the torch pin (a forced run: --no-deps) should have prevented it; "
            "where there was none (no torch, or tvm-ffi builds only), a build's requirement "
            "changed it",
        )
    for pick in picks:
        _read_back(pick, after.builds.get(pick.selection.project), target)
    return InstallResult("installed", target, picks, commands)


def _decide(pick: Pick, before: Environment, reinstall: bool) -> Pick:
    found = before.builds.get(pick.selection.project)
    action = decide(found, pick.version, pick.files, reinstall=reinstall)
    return dataclasses.replace(pick, before=found, action=action)


def _commands(
    target: Target, picks: Sequence[Pick], request: InstallRequest
) -> tuple[tuple[str, ...], ...]:
    """The forced run (builds of an installed version) first, then the pinned one."""
    commands = []
    for force, actions in ((True, ("reinstall",)), (False, ("install", "replace"))):
        if run := [p for p in picks if p.action in actions]:
            # a tvm-ffi build needs no torch: pinning the installed one would make it a
            # requirement of the run (pip resolves torch and its index) for nothing
            torch = any(_needs_torch(p.filename) for p in run)
            pins = [p.pin for p in run]
            commands.append(
                tuple(pip_command(target, pins, request.sources, force=force, torch=torch))
            )
    return tuple(commands)


def _needs_torch(filename: str) -> bool:
    """Whether the build loads torch: any but a tvm-ffi build (kept as before where unlabelled)."""
    variant = variant_of_wheel(filename)
    return variant is None or variant.tvm_ffi is None


def _read_back(pick: Pick, found: Installed | None, target: Target) -> None:
    """The build pip left in the target must be the wheel's: its version and files."""
    if found is not None and found.is_build(pick.version, pick.files):
        return
    if found is None:
        what = "it finds none installed"
    elif not found.has_version(pick.version):
        what = f"it finds version {found.version} in {found.location}"
    elif found.altered:
        what = f"in {found.location}, files differ from its RECORD: {listing(found.altered)}"
    else:
        changed = listing(differences(found.files, pick.files))
        what = f"in {found.location}, files differ from the wheel's: {changed}"
    raise InstallError(
        f"pip ran, but {target.python} does not hold {pick.filename} (files sha256 "
        f"{pick.digest}): {what}",
        hint=f"is a copy of {pick.selection.project} earlier on that interpreter's sys.path "
        "hiding the one pip installed? --dry-run prints the pip command, to run it and see "
        "what pip does",
    )


def _pick(sel: Selection, downloads: Path) -> Pick:
    """The chosen build, checked before pip sees it (pip installs files that do not match RECORD
    without a word); the pin carries the sha256 of the bytes checked."""
    assert sel.chosen is not None
    candidate = sel.chosen.candidate
    path = fetch(candidate, downloads)
    try:
        sha256 = sha256_file(path)
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot be read ({exc.strerror or exc})", hint="check the file"
        ) from None
    if candidate.sha256 and candidate.sha256 != sha256:
        raise InstallError(
            f"{candidate.location}: its sha256 is {sha256}, the index ({candidate.source}) says "
            f"{candidate.sha256}; nothing was installed",
            hint="the file changed after the index was written: rebuild the index, or download "
            "from a source you trust",
        )
    verify_wheel(path)
    files = own_files(read_record(path))
    pin = pinned_requirement(sel.project, candidate, sha256)
    return Pick(sel, candidate.location, sha256, pin, files)
