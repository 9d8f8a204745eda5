"""``kernelwheel variants``: every build a source offers, judged by :func:`.select.select`, the very
call ``install`` makes (docs/variants.md); builds with no wheel name come as ``unjudged``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename

from .._util import RUNNER, Runner
from ..compat.gpus import Gpus, visible_gpus
from ..errors import VariantError
from ..model.variant import variant_of_wheel
from .probe import Target, probe
from .select import Selection, Verdict, select, why_not_chosen
from .sources import Candidate, project_of


class Status(str, Enum):
    PREFERRED = "preferred"
    COMPATIBLE = "compatible"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Entry:
    """One build: its variant name (a Hub folder's, or the one its wheel name's local version
    names), its wheel, and install's verdict."""

    variant: str
    wheel: str | None  # None: a build with no wheel name (an unmappable Hub folder)
    location: str
    version: str | None
    status: Status
    reason: str | None  # None only for the preferred build


@dataclass(frozen=True)
class ProjectBuilds:
    project: str  # canonical name
    entries: tuple[Entry, ...]  # preferred first, then compatible, then rejected

    @property
    def preferred(self) -> Entry | None:
        return next((e for e in self.entries if e.status is Status.PREFERRED), None)


@dataclass(frozen=True)
class VariantsReport:
    source: str  # how the source is named in output
    target: Target
    gpus: Gpus
    projects: tuple[ProjectBuilds, ...]


def explain(
    source: str,
    candidates: Sequence[Candidate],
    target: Target,
    gpus: Gpus,
    *,
    names: dict[str, str] | None = None,
    unjudged: Sequence[Entry] = (),
) -> VariantsReport:
    """Every candidate judged for ``target`` by :func:`.select.select`; ``names``: wheel file name →
    the variant name shown; ``unjudged``: rejected builds added to the first project."""
    by_project: dict[str, list[Candidate]] = {}
    for candidate in candidates:  # a file misnamed is listed too, refused with why
        by_project.setdefault(project_of(candidate.filename), []).append(candidate)
    found = []
    for project, offered in sorted(by_project.items()):
        (sel,) = select([Requirement(project)], offered, target)
        entries = [_entry(v, sel, names or {}) for v in sel.verdicts]
        # Status lists them preferred first; the sort is stable: listing order kept
        entries.sort(key=lambda e: list(Status).index(e.status))
        found.append(ProjectBuilds(project, tuple(entries)))
    if unjudged and found:
        found[0] = replace(found[0], entries=found[0].entries + tuple(unjudged))
    elif unjudged:
        found.append(ProjectBuilds("", tuple(unjudged)))
    return VariantsReport(source, target, gpus, tuple(found))


def _entry(verdict: Verdict, sel: Selection, names: dict[str, str]) -> Entry:
    filename = verdict.candidate.filename
    if verdict is sel.chosen:
        status, reason = Status.PREFERRED, None
    elif verdict.reason is None:
        assert sel.chosen is not None  # a compatible build that lost: something was chosen
        status, reason = Status.COMPATIBLE, why_not_chosen(verdict, sel.chosen)
    else:
        status, reason = Status.REJECTED, verdict.reason
    version = str(verdict.version) if verdict.version is not None else None
    name = names.get(filename) or (_variant_name(filename) if version else filename)
    return Entry(name, filename, verdict.candidate.location, version, status, reason)


def _variant_name(filename: str) -> str:
    """The variant the wheel's local version names (``torch213-cxx11-cpu-x86_64-linux``);
    ``+label`` as written when it names none; ``universal`` for a wheel without one."""
    try:
        variant = variant_of_wheel(filename)
    except VariantError:
        return f"+{parse_wheel_filename(filename)[1].local}"
    return "universal" if variant is None else variant.name


def machine(python: Path, runner: Runner = RUNNER) -> tuple[Target, Gpus]:
    """The target interpreter as install probes it, and this machine's GPUs (compat.gpus)."""
    target = probe(python, runner)
    return target, visible_gpus(target.python, runner=runner)
