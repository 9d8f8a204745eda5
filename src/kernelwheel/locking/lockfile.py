"""``kernelwheel.lock``: the model, its TOML form and its reader (docs/lockfile.md). The writer
sorts everything and writes one value a line: the same lock gives the same bytes, so a re-run leaves
the file untouched and a real change is a small diff."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import _toml as toml
from ..errors import ProjectError, UsageError
from ..hub.hubsource import repo_id_problem
from ..hub.revision import VersionRequest

LOCK_NAME = "kernelwheel.lock"
LOCK_VERSION = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_RELOCK = "run 'kernelwheel lock' to write it again (do not edit the lock by hand)"

HEADER = (
    "# kernelwheel.lock: the kernels of this project pinned to commits, with the sha256 of\n"
    "# every file each variant packages and of the wheel kernelwheel makes from it.\n"
    "# Written by 'kernelwheel lock'; commit it, do not edit it. Format: docs/lockfile.md\n"
)


@dataclass(frozen=True)
class LockedVariant:
    name: str  # the Hub variant folder, e.g. torch27-cxx11-cu128-x86_64-linux
    wheel: str  # the wheel's file name
    wheel_sha256: str
    files: tuple[tuple[str, str], ...]  # (path inside build/<variant>/, sha256), sorted


@dataclass(frozen=True)
class LockedKernel:
    repo: str  # Hub repo id
    requested: str  # as declared: ">=1.1,<2", "1.1.2", "1"
    ref: str  # the tag or branch it resolved to
    commit: str
    version: str  # the version the ref stands for (the wheels' version unless metadata.json
    # of a branch build gives a more precise one)
    variants: tuple[LockedVariant, ...]
    path: str | None = None  # a local git clone, as declared
    allow_abi_violations: bool = False
    skipped: tuple[str, ...] = ()  # variant folders at the commit that did not convert


@dataclass(frozen=True)
class LockFile:
    kernelwheel: str  # the version that made the wheels (it is in each wheel's WHEEL file)
    source_date_epoch: int  # the wheels' timestamps
    kernels: tuple[LockedKernel, ...] = field(default=())

    def kernel(self, repo: str) -> LockedKernel | None:
        return next((k for k in self.kernels if k.repo == repo), None)

    def dumps(self) -> str:
        lines = [HEADER, f"lock-version = {LOCK_VERSION}"]
        lines += toml.assignments(
            kernelwheel=self.kernelwheel, source_date_epoch=self.source_date_epoch
        )
        for k in sorted(self.kernels, key=lambda k: k.repo):
            lines += ["", "[[kernel]]", *toml.assignments(repo=k.repo)]
            if k.path is not None:
                lines += toml.assignments(path=k.path)
            lines += toml.assignments(
                requested=k.requested, ref=k.ref, commit=k.commit, version=k.version
            )
            if k.allow_abi_violations:
                lines.append("allow-abi-violations = true")
            if k.skipped:
                lines.append(f"skipped = {toml.array(sorted(k.skipped))}")
            for v in sorted(k.variants, key=lambda v: v.name):
                lines += ["", "[[kernel.variant]]"]
                lines += toml.assignments(name=v.name, wheel=v.wheel, wheel_sha256=v.wheel_sha256)
                lines += ["", "[kernel.variant.files]"]
                lines += [f"{toml.key(p)} = {toml.value(h)}" for p, h in sorted(v.files)]
        return "\n".join(lines) + "\n"

    @classmethod
    def load(cls, path: Path) -> LockFile:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ProjectError(
                "not found",
                file=path,
                hint=f"run 'kernelwheel lock {path.parent}' first (and commit {LOCK_NAME})",
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ProjectError(f"cannot read: {exc}", file=path, hint=_RELOCK) from exc
        return cls.loads(text, path)

    @classmethod
    def loads(cls, text: str, path: Path) -> LockFile:
        doc = toml.Located(toml.parse_toml(text, file=path, hint=_RELOCK), file=path, error=_relock)
        if (version := _integer(doc, "lock-version")) != LOCK_VERSION:
            raise ProjectError(
                f"lock-version {version} is not {LOCK_VERSION}, the one this kernelwheel reads",
                file=path,
                key="lock-version",
                hint="use the kernelwheel that wrote it, or " + _RELOCK,
            )
        kernels = [_kernel(table) for table in doc.table_array("kernel") or ()]
        repos = [k.repo for k in kernels]
        if dupes := sorted({r for r in repos if repos.count(r) > 1}):
            raise doc.error(f"lists {', '.join(dupes)} more than once", "kernel", _RELOCK)
        return cls(
            kernelwheel=doc.required_string("kernelwheel", _RELOCK),
            source_date_epoch=_integer(doc, "source-date-epoch"),
            kernels=tuple(kernels),
        )


def _relock(
    message: str, *, file: Path | str | None = None, key: str | None = None, hint: str | None = None
) -> ProjectError:
    """The lock's error factory: kernelwheel writes the file, so whatever is wrong in it, the fix
    is to lock again (``hint`` is not used)."""
    return ProjectError(message, file=file, key=key, hint=_RELOCK)


def _integer(table: toml.Located, key: str) -> int:
    if (value := table.integer(key, hint=_RELOCK)) is None:
        raise table.error("missing required key", key, _RELOCK)
    return value


def _match(table: toml.Located, key: str, pattern: re.Pattern[str]) -> str:
    text = table.required_string(key, _RELOCK)
    if not pattern.fullmatch(text):
        what = "a sha256 (64 lowercase hex digits)" if pattern is _SHA256 else "a commit id"
        raise table.error(f"{text!r} is not {what}", key, _RELOCK)
    return text


def _kernel(table: toml.Located) -> LockedKernel:
    variants: list[LockedVariant] = []
    for item in table.table_array("variant") or ():
        variant = _variant(item)
        if any(v.name == variant.name for v in variants):
            raise item.error(f"{variant.name!r} appears twice", "name", _RELOCK)
        variants.append(variant)
    requested = table.required_string("requested", _RELOCK)
    try:
        VersionRequest.parse(requested)
    except UsageError as exc:
        raise table.error(exc.message, "requested", _RELOCK) from None
    repo = table.required_string("repo", _RELOCK)
    if (problem := repo_id_problem(repo)) is not None:
        raise table.error(f"{repo!r} is not a Hub repo id: it {problem}", "repo", _RELOCK)
    return LockedKernel(
        repo=repo,
        requested=requested,
        ref=table.required_string("ref", _RELOCK),
        commit=_match(table, "commit", _COMMIT),
        version=table.required_string("version", _RELOCK),
        variants=tuple(variants),
        path=table.string("path"),
        allow_abi_violations=table.boolean("allow-abi-violations") or False,
        skipped=table.string_list("skipped") or (),
    )


def _variant(table: toml.Located) -> LockedVariant:
    files = table.required_table("files", _RELOCK)
    if not (pairs := [(name, _match(files, name, _SHA256)) for name in files.keys()]):
        raise table.error("lists no file", "files", _RELOCK)
    return LockedVariant(
        name=table.required_string("name", _RELOCK),
        wheel=table.required_string("wheel", _RELOCK),
        wheel_sha256=_match(table, "wheel-sha256", _SHA256),
        files=tuple(sorted(pairs)),
    )
