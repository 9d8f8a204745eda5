"""Choose, per requested package, the one candidate build that fits the target, every other
with its reason (docs/install.md, "Selection", steps 3 and 4). Local labels are never ordered
against each other: their sort order is what makes plain pip pick the wrong build."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..compat import rules as compat
from ..compat.builds import build_of, variant_of_wheel
from ..errors import UsageError, VariantError
from ..plan.selector import Selector
from .probe import Target
from .sources import Candidate, project_of


@dataclass(frozen=True)
class Verdict:
    candidate: Candidate
    version: Version | None  # None: a file whose name is no wheel name (always refused)
    label: str  # the local version ("" when none): the build, as the file name spells it
    reason: str | None  # why it is refused; None: compatible
    preference: tuple[int, int, int] = (0, 0, 0)  # compat.preference: lower fits better
    tag_rank: int = 0  # index of its best tag among the target's (lower: preferred)

    @property
    def release(self) -> Version:
        """The version of a build with a wheel name (every compatible one has it)."""
        assert self.version is not None
        return self.version


@dataclass(frozen=True)
class Selection:
    requirement: Requirement
    project: str  # canonical name
    chosen: Verdict | None
    verdicts: tuple[Verdict, ...]  # every candidate of the project, the chosen one included

    @property
    def passed_over(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v is not self.chosen)


def parse_requirement(text: str) -> Requirement:
    """``PKG`` or ``PKG<specifier>`` (``img2gray==0.1.0``, ``img2gray==0.1.0+torch2.14.cpu.cxx11``);
    no URLs, extras or markers: the point is to choose the file."""
    hint = "e.g. img2gray, img2gray==0.1.0 or 'img2gray>=0.1,<0.2'"
    if text.lower().endswith(".whl"):
        raise _wheel_file(text)
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"invalid requirement {text!r}: {exc}", hint=hint) from None
    if req.url or req.marker or req.extras:
        raise UsageError(
            f"requirement {text!r}: URLs, extras and markers are not supported here", hint=hint
        )
    return req


def merge_requirements(reqs: Sequence[Requirement]) -> list[Requirement]:
    """One requirement per project, every mention's specifiers together, as pip reads ``img2gray
    'img2gray==0.1.0'`` (else each would get a build of its own, and pip one of them)."""
    merged: dict[str, Requirement] = {}
    for req in reqs:
        key = str(canonicalize_name(req.name))
        if (seen := merged.get(key)) is None:
            merged[key] = req
        else:
            merged[key] = Requirement(f"{seen.name}{seen.specifier & req.specifier}")
    return list(merged.values())


def _wheel_file(text: str) -> UsageError:
    """A wheel's path given as a package (what ``build`` printed): the command that installs it."""
    path = Path(text)
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        pin, why = "NAME", ""
    else:
        pin = shlex.quote(f"{name}=={version}")
        why = f" (that build; '{name}' alone takes the build that fits the environment)"
    return UsageError(
        f"{text!r} is a wheel file: install takes package names and reads wheels from "
        "--find-links/--index-url",
        hint=f"kernelwheel install {pin} -f {shlex.quote(str(path.parent))}{why}",
    )


def _verdict(
    candidate: Candidate, req: Requirement, target: Target, only: Selector | None = None
) -> Verdict | None:
    try:
        name, version, _, tags = parse_wheel_filename(candidate.filename)
    except InvalidWheelFilename as exc:  # named, not passed over in silence (pip's way)
        if project_of(candidate.filename) != canonicalize_name(req.name):
            return None
        why = f"not a wheel file name ({exc}): pip ignores it too; give it its built name"
        return Verdict(candidate, None, "", why)
    if name != canonicalize_name(req.name):
        return None
    label = version.local or ""

    def refuse(reason: str) -> Verdict:
        return Verdict(candidate, version, label, reason)

    if candidate.yanked is not None:
        return refuse(f"yanked{': ' + candidate.yanked if candidate.yanked else ''}")
    if candidate.is_local and not os.path.isfile(candidate.location):
        if os.path.islink(candidate.location):  # a wheelhouse's link into a store it lost
            pointed = os.readlink(candidate.location)
            return refuse(f"a link to nowhere (-> {pointed}): restore its target or remove it")
    if not req.specifier.contains(version, prereleases=True):
        return refuse(f"version {version} is not {req.specifier}")
    if (problem := _python_refused(candidate.requires_python, target)) is not None:
        return refuse(problem)
    if not (ranks := [target.tags.index(str(t)) for t in tags if str(t) in target.tags]):
        shown = "/".join(sorted({f"{t.interpreter}-{t.abi}-{t.platform}" for t in tags}))
        return refuse(f"wheel tag {shown} does not fit this Python ({target.tags[0]})")
    try:
        variant = variant_of_wheel(candidate.filename)
    except VariantError:
        return refuse(f"local version +{label} names no kernel variant")
    if only is not None and (variant is None or not only.matches(variant.name)):
        shown = variant.name if variant is not None else f"+{label or 'no local version'}"
        return refuse(f"{shown} is not selected by --variant")
    build = build_of(variant)
    if target.torch is None:
        problem, preference = _without_torch(build, target.driver)
    else:
        found = compat.problems(build, target.torch)
        problem = f"mismatch in {', '.join(found)}" if found else None
        preference = compat.preference(build, target.torch)
    if problem is not None:
        return refuse(f"built for {compat.describe_build(build)}: {problem}")
    return Verdict(candidate, version, label, None, preference, min(ranks))


def _python_refused(requires: str | None, target: Target) -> str | None:
    """Why a build's Requires-Python excludes the target's Python (pip passes such a build over),
    judged by the minor version the probe reads: refused only where no X.Y.* release fits."""
    try:
        spec = SpecifierSet(requires or "")
    except InvalidSpecifier:
        return None  # pip ignores an unparsable Requires-Python too
    major, minor = target.python_version
    if any(spec.contains(f"{major}.{minor}.{micro}", prereleases=True) for micro in (0, 999)):
        return None
    return f"requires Python {spec}; this is Python {major}.{minor}"


_REFUSED = (0, 0, 0)
_CPU_UNDER_DRIVER = (compat.TVM_FFI, 1, 0)  # no torch: a CPU build where a CUDA driver is


def _without_torch(
    build: compat.Build, driver: tuple[int, int] | None
) -> tuple[str | None, tuple[int, int, int]]:
    """With no torch only a tvm-ffi build loads (pip installs apache-tvm-ffi with it; install never
    installs torch): a CPU one, or a CUDA one the driver supports, the newest CUDA first."""
    if build.tvm_ffi is None:
        return "it requires torch, and this environment has none", _REFUSED
    if build.kind == compat.CPU:
        return None, (compat.TVM_FFI, 0, 0) if driver is None else _CPU_UNDER_DRIVER
    if build.kind != compat.CUDA or build.version is None:
        return "without torch, only CPU and CUDA builds are matched to the machine", _REFUSED
    if driver is None:
        return "no CUDA driver found (KERNELWHEEL_CUDA_DRIVER=X.Y says one)", _REFUSED
    if not compat.driver_loads(build.version, driver):
        cuda, supported = compat.dotted(build.version), compat.dotted(driver)
        why = f"built with CUDA {cuda}; the driver supports CUDA {supported}"
        return f"mismatch in CUDA driver ({why})", _REFUSED
    return None, (compat.TVM_FFI, 0, -(build.version[0] * 1000 + build.version[1]))


def _best(req: Requirement, compatible: list[Verdict]) -> Verdict:
    # pip's rule (PEP 440): a pre-release only when the requirement names one or none else fits
    final = set(req.specifier.filter({v.release for v in compatible}))
    compatible = [v for v in compatible if v.release in final]
    pool = [v for v in compatible if v.preference[0] != compat.CPU_FALLBACK] or compatible
    top = max(Version(v.release.public) for v in pool)
    pool = [v for v in pool if Version(v.release.public) == top]
    return min(pool, key=lambda v: (v.preference, v.tag_rank, v.candidate.filename))


def select(
    requirements: Sequence[Requirement],
    candidates: Sequence[Candidate],
    target: Target,
    only: Selector | None = None,
) -> list[Selection]:
    """Per requirement, the best compatible build; ``only`` (``--variant`` globs, the same
    language as in build/to-wheel/download) narrows the candidates first."""
    selections = []
    for req in requirements:
        verdicts = [
            v for v in (_verdict(c, req, target, only) for c in candidates) if v is not None
        ]
        compatible = [v for v in verdicts if v.reason is None]
        chosen = _best(req, compatible) if compatible else None
        selections.append(Selection(req, str(canonicalize_name(req.name)), chosen, tuple(verdicts)))
    return selections


def why_not_chosen(verdict: Verdict, chosen: Verdict) -> str:
    """The reason shown for a compatible build that lost to ``chosen``."""
    this, best = verdict.release, chosen.release
    if this.is_prerelease and not best.is_prerelease:
        return (
            f"compatible, but {this.public} is a pre-release, taken only when the "
            f"requirement names one (=={this.public}) or no final release fits"
        )
    if this.public != best.public:
        return f"compatible, but {best.public} is newer"
    if verdict.preference[0] == compat.CPU_FALLBACK:
        return "compatible (a CPU build), but a build for this torch's backend fits better"
    if verdict.preference == _CPU_UNDER_DRIVER:
        return "compatible (a CPU build), but a CUDA build the driver supports fits better"
    mine, theirs = verdict.preference[0], chosen.preference[0]
    if mine != theirs:
        return (
            f"compatible ({compat.KIND_NAMES[mine]}), but {compat.KIND_NAMES[theirs]} is preferred"
        )
    if mine == compat.STABLE_ABI and verdict.preference[1] != chosen.preference[1]:
        return "compatible, but a stable-ABI build for a newer torch was chosen"
    if verdict.preference[2] < 0 and verdict.preference[2] != chosen.preference[2]:
        # ranked by the CUDA driver (compat.preference): the newest CUDA it supports won
        return "compatible, but a build with a newer CUDA that the driver supports was chosen"
    return "compatible, but a closer fit was chosen"
