"""Which revision of a kernel repo to convert: the VERSION argument, parsed and resolved
(docs/to-wheel.md, "Using it"). Pure logic over a list of refs; the sources supply the refs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..errors import HubError, UsageError

_SHOWN = 8


class RefKind(str, Enum):
    TAG = "tag"
    BRANCH = "branch"
    COMMIT = "commit"
    CACHED = "cached ref"  # a name found in the offline cache: tag or branch is unknown


class RequestKind(str, Enum):
    EXACT = "exact"  # 1.1.2 -> tag v1.1.2
    MAJOR = "major"  # 1 -> branch v1
    RANGE = "range"  # >=1.1.2,<2 -> highest matching vX.Y.Z tag
    REVISION = "revision"  # --revision: a branch, tag or commit as given


@dataclass(frozen=True)
class Ref:
    name: str
    kind: RefKind
    commit: str


@dataclass(frozen=True)
class VersionRequest:
    """The parsed VERSION argument (and --revision)."""

    text: str
    kind: RequestKind
    ref: str | None  # the tag/branch to look up (EXACT, MAJOR) or the --revision text
    specifier: SpecifierSet | None = None  # RANGE only

    @classmethod
    def parse(cls, version: str, revision: str | None = None) -> VersionRequest:
        text = version.strip()
        if not text:
            raise UsageError("VERSION is empty", hint=_VERSION_HINT)
        if revision is not None:
            if not revision.strip():
                raise UsageError("--revision is empty", hint="give a branch, tag or commit")
            _wheel_version(text, "VERSION (the wheel version, since --revision is given)")
            return cls(text, RequestKind.REVISION, revision.strip())
        bare = text[1:] if text[:1] in ("v", "V") and text[1:2].isdigit() else text
        if bare.isdigit():
            return cls(text, RequestKind.MAJOR, f"v{int(bare)}")
        try:
            exact = Version(bare)
        except InvalidVersion:
            pass
        else:
            if exact.local is not None:
                raise UsageError(
                    f"VERSION {text!r} has a local part (+{exact.local})",
                    hint="drop it (to-wheel adds each variant's local label); " + _VERSION_HINT,
                )
            return cls(text, RequestKind.EXACT, f"v{bare}")
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            raise UsageError(
                f"VERSION {text!r} is not a version (1.1.2), a major version (1) or a PEP 440 "
                "range (>=1.1.2,<2)",
                hint=_VERSION_HINT,
            ) from None
        if not str(spec):
            raise UsageError(f"VERSION {text!r} is an empty range", hint=_VERSION_HINT)
        return cls(text, RequestKind.RANGE, None, spec)

    def describe(self) -> str:
        return {
            RequestKind.EXACT: f"version {self.text} (tag {self.ref})",
            RequestKind.MAJOR: f"major version {self.text} (branch {self.ref})",
            RequestKind.RANGE: f"the highest vX.Y.Z tag in {self.text!r}",
            RequestKind.REVISION: f"revision {self.ref}",
        }[self.kind]


_VERSION_HINT = (
    "e.g. '1.1.2' (tag v1.1.2), '1' (branch v1), '>=1.1.2,<2' (highest matching tag), "
    "or any VERSION with --revision BRANCH|TAG|COMMIT"
)


def _wheel_version(text: str, what: str) -> str:
    bare = text[1:] if text[:1] in ("v", "V") and text[1:2].isdigit() else text
    try:
        version = Version(bare)
    except InvalidVersion:
        raise UsageError(
            f"{what} {text!r} is not a PEP 440 version", hint="e.g. 1.1.2 or 1"
        ) from None
    if version.local is not None:
        raise UsageError(
            f"{what} {text!r} has a local part (+{version.local})",
            hint="drop it: to-wheel adds the variant's local label itself",
        )
    return str(version)


@dataclass(frozen=True)
class Resolution:
    """What was converted: the chosen ref (or revision), its commit and the wheels' version."""

    request: VersionRequest
    ref: str
    kind: RefKind
    commit: str
    version: str

    def describe(self) -> str:
        where = self.ref if self.kind is RefKind.COMMIT else f"{self.kind.value} {self.ref}"
        return f"{self.request.text} -> {where} (commit {self.commit})"


def _tag_version(name: str) -> Version | None:
    if not name.startswith("v"):
        return None
    try:
        version = Version(name[1:])
    except InvalidVersion:
        return None
    return version if not version.local else None


def _listing(names: Sequence[str]) -> str:
    names = sorted(names)
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "") or "none"


def choose_ref(request: VersionRequest, refs: Sequence[Ref], *, where: str) -> Resolution:
    """Resolve an EXACT, MAJOR or RANGE request against ``refs``. ``where`` names the repo in
    errors. REVISION requests are resolved by the source itself (they may be commits)."""
    offline = (
        "; offline, only refs cached by earlier downloads are known (run once online)"
        if any(r.kind is RefKind.CACHED for r in refs)
        else ""
    )
    # A cached ref's kind is unknown: one named like a major branch (v1) is taken for one, not
    # for the tag of version 1 (a range would otherwise resolve to the branch offline).
    tags = [
        r
        for r in refs
        if r.kind is RefKind.TAG
        or (r.kind is RefKind.CACHED and not re.fullmatch(r"v[0-9]+", r.name))
    ]
    branches = [r for r in refs if r.kind in (RefKind.BRANCH, RefKind.CACHED)]
    versions = {r.name: v for r in tags if (v := _tag_version(r.name)) is not None}
    if request.kind in (RequestKind.EXACT, RequestKind.MAJOR):
        assert request.ref is not None
        for ref in tags if request.kind is RequestKind.EXACT else branches:
            if ref.name == request.ref:
                return Resolution(request, ref.name, ref.kind, ref.commit, request.ref[1:])
    if request.kind is RequestKind.EXACT:
        hint = f"version tags there: {_listing(list(versions))}"
        if any(b.name == request.ref for b in branches):
            hint += f"; {request.ref} exists as a branch: pass --revision {request.ref}"
        raise HubError(
            f"{where} has no tag {request.ref} (for VERSION {request.text})", hint=hint + offline
        )
    if request.kind is RequestKind.MAJOR:
        majors = [b.name for b in branches if re.fullmatch(r"v[0-9]+", b.name)]
        raise HubError(
            f"{where} has no branch {request.ref} (for VERSION {request.text})",
            hint=f"version branches there: {_listing(majors)}; version tags: "
            f"{_listing(list(versions))} (pass X.Y.Z for a tag){offline}",
        )
    assert request.kind is RequestKind.RANGE and request.specifier is not None
    matching = list(request.specifier.filter(versions.values()))
    if not matching:
        raise HubError(
            f"no vX.Y.Z tag of {where} satisfies {request.text!r}",
            hint=f"version tags there: {_listing(list(versions))}{offline}",
        )
    best = max(matching)
    ref = next(r for r in tags if versions.get(r.name) == best)
    return Resolution(request, ref.name, ref.kind, ref.commit, str(best))


def find_ref(refs: Sequence[Ref], name: str, *more: RefKind) -> Ref | None:
    """The tag named ``name``, else the branch, else one of ``more`` kinds (--revision)."""
    kinds = (RefKind.TAG, RefKind.BRANCH, *more)
    return next((r for k in kinds for r in refs if r.kind is k and r.name == name), None)


def revision_resolution(request: VersionRequest, kind: RefKind, commit: str) -> Resolution:
    """The Resolution of a --revision request, once the source found its commit."""
    assert request.kind is RequestKind.REVISION and request.ref is not None
    return Resolution(request, request.ref, kind, commit, _wheel_version(request.text, "VERSION"))
