"""``kernelwheel.lock``: the model, its TOML form and its reader (docs/lockfile.md).

The writer is the only way the file is made: kernels sorted by repo id, variants by name, files
by path, keys in a fixed order, one value a line. The same lock gives the same bytes, so a
re-run with nothing new leaves the file untouched and a real change shows as a small diff.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _toml as toml
from ..errors import ProjectError, UsageError
from ..hub import VersionRequest

__all__ = ["LOCK_NAME", "LOCK_VERSION", "LockFile", "LockedKernel", "LockedVariant"]

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

    def variant(self, name: str) -> LockedVariant | None:
        return next((v for v in self.variants if v.name == name), None)


@dataclass(frozen=True)
class LockFile:
    kernelwheel: str  # the version that made the wheels (it is in each wheel's WHEEL file)
    source_date_epoch: int  # the wheels' timestamps
    kernels: tuple[LockedKernel, ...] = field(default=())

    def kernel(self, repo: str) -> LockedKernel | None:
        return next((k for k in self.kernels if k.repo == repo), None)

    # -- writing --------------------------------------------------------------------------------

    def dumps(self) -> str:
        lines = [
            HEADER,
            f"lock-version = {LOCK_VERSION}",
            f"kernelwheel = {toml.value(self.kernelwheel)}",
            f"source-date-epoch = {self.source_date_epoch}",
        ]
        for k in sorted(self.kernels, key=lambda k: k.repo):
            lines += ["", "[[kernel]]", f"repo = {toml.value(k.repo)}"]
            if k.path is not None:
                lines.append(f"path = {toml.value(k.path)}")
            lines += [
                f"requested = {toml.value(k.requested)}",
                f"ref = {toml.value(k.ref)}",
                f"commit = {toml.value(k.commit)}",
                f"version = {toml.value(k.version)}",
            ]
            if k.allow_abi_violations:
                lines.append("allow-abi-violations = true")
            if k.skipped:
                lines.append(f"skipped = {toml.array(sorted(k.skipped))}")
            for v in sorted(k.variants, key=lambda v: v.name):
                lines += [
                    "",
                    "[[kernel.variant]]",
                    f"name = {toml.value(v.name)}",
                    f"wheel = {toml.value(v.wheel)}",
                    f"wheel-sha256 = {toml.value(v.wheel_sha256)}",
                    "",
                    "[kernel.variant.files]",
                ]
                lines += [f"{toml.key(p)} = {toml.value(h)}" for p, h in sorted(v.files)]
        return "\n".join(lines) + "\n"

    # -- reading --------------------------------------------------------------------------------

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
        data = toml.parse_toml(text, file=path, hint=_RELOCK)
        reader = _Reader(path)
        version = reader.get(data, "lock-version", int, "lock-version")
        if version != LOCK_VERSION:
            raise ProjectError(
                f"lock-version {version} is not {LOCK_VERSION}, the one this kernelwheel reads",
                file=path,
                key="lock-version",
                hint="use the kernelwheel that wrote it, or " + _RELOCK,
            )
        kernels = []
        for i, raw in enumerate(reader.get(data, "kernel", list, "kernel", default=[])):
            kernels.append(reader.kernel(raw, f"kernel[{i}]"))
        repos = [k.repo for k in kernels]
        dupes = sorted({r for r in repos if repos.count(r) > 1})
        if dupes:
            raise ProjectError(
                f"lists {', '.join(dupes)} more than once", file=path, key="kernel", hint=_RELOCK
            )
        return cls(
            kernelwheel=reader.get(data, "kernelwheel", str, "kernelwheel"),
            source_date_epoch=reader.get(data, "source-date-epoch", int, "source-date-epoch"),
            kernels=tuple(kernels),
        )


_MISSING = object()


class _Reader:
    """Typed field access with errors naming the lock file, the field and the value."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> ProjectError:
        return ProjectError(message, file=self.path, key=where, hint=_RELOCK)

    def get(
        self, table: Any, name: str, kind: type[Any], where: str, default: Any = _MISSING
    ) -> Any:
        if not isinstance(table, Mapping):
            raise self.fail(where.rsplit(".", 1)[0], f"expected a table, got {table!r}")
        if name not in table:
            if default is not _MISSING:
                return default
            raise self.fail(where, "missing")
        found = table[name]
        if isinstance(found, bool) is not (kind is bool) or not isinstance(found, kind):
            raise self.fail(where, f"expected {kind.__name__}, got {found!r}")
        return found

    def match(self, table: Any, name: str, pattern: re.Pattern[str], where: str) -> str:
        text: str = self.get(table, name, str, where)
        if not pattern.fullmatch(text):
            what = "a sha256 (64 lowercase hex digits)" if pattern is _SHA256 else "a commit id"
            raise self.fail(where, f"{text!r} is not {what}")
        return text

    def kernel(self, raw: Any, where: str) -> LockedKernel:
        variants = []
        names: set[str] = set()
        for i, item in enumerate(self.get(raw, "variant", list, f"{where}.variant", default=[])):
            variant = self.variant(item, f"{where}.variant[{i}]")
            if variant.name in names:
                raise self.fail(f"{where}.variant[{i}].name", f"{variant.name!r} appears twice")
            names.add(variant.name)
            variants.append(variant)
        skipped = self.get(raw, "skipped", list, f"{where}.skipped", default=[])
        if not all(isinstance(s, str) for s in skipped):
            raise self.fail(f"{where}.skipped", f"expected variant names, got {skipped!r}")
        requested: str = self.get(raw, "requested", str, f"{where}.requested")
        try:
            VersionRequest.parse(requested)
        except UsageError as exc:
            raise self.fail(f"{where}.requested", exc.message) from None
        return LockedKernel(
            repo=self.get(raw, "repo", str, f"{where}.repo"),
            requested=requested,
            ref=self.get(raw, "ref", str, f"{where}.ref"),
            commit=self.match(raw, "commit", _COMMIT, f"{where}.commit"),
            version=self.get(raw, "version", str, f"{where}.version"),
            variants=tuple(variants),
            path=self.get(raw, "path", str, f"{where}.path", default=None),
            allow_abi_violations=self.get(
                raw, "allow-abi-violations", bool, f"{where}.allow-abi-violations", default=False
            ),
            skipped=tuple(skipped),
        )

    def variant(self, raw: Any, where: str) -> LockedVariant:
        files = self.get(raw, "files", dict, f"{where}.files")
        pairs = []
        for name in files:
            pairs.append(
                (name, self.match(files, name, _SHA256, f"{where}.files.{toml.key(name)}"))
            )
        if not pairs:
            raise self.fail(f"{where}.files", "lists no file")
        return LockedVariant(
            name=self.get(raw, "name", str, f"{where}.name"),
            wheel=self.get(raw, "wheel", str, f"{where}.wheel"),
            wheel_sha256=self.match(raw, "wheel-sha256", _SHA256, f"{where}.wheel-sha256"),
            files=tuple(sorted(pairs)),
        )
