"""``metadata.json`` of a Hub variant folder: one type, read by to-wheel and written by the Hub
layout export. Its fields, current and older: docs/versions.md; every field is optional when
reading, and unknown keys are ignored, as ``kernels`` ignores them."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import HubError
from ..model.gitstate import GitState
from ..model.sections import KernelDependency

METADATA_JSON = "metadata.json"
# In a dev build's provenance (builder/dev.py): what `kernelwheel upload` refuses to publish.
DEV_BUILD_MARK = "(kernelwheel dev build: not for publishing)"
METADATA_SIGSTORE = "metadata.json.sigstore"  # a detached signature of metadata.json
DIGEST_ALGORITHMS = ("sha256", "sha512")
_DOTTED = re.compile(r"^[0-9]+(?:\.[0-9]+)*$")
T = TypeVar("T")


@dataclass(frozen=True, order=True)
class KernelsVersion:
    """A ``kernels`` release as ``kernels-minver`` spells it: dotted integers, compared as
    kernels-data's ``Version`` compares them (trailing zeros insignificant: ``0.17 == 0.17.0``)."""

    release: tuple[int, ...]  # at least major.minor.patch, no further trailing zeros

    @classmethod
    def parse(cls, text: str) -> KernelsVersion:
        """``"0.17.0"`` -> KernelsVersion; raises ValueError for anything else."""
        text = text.strip()
        if not _DOTTED.match(text):
            raise ValueError(f"{text!r} is not a dotted version such as 0.17.0")
        parts = [int(p) for p in text.split(".")]
        while len(parts) > 3 and parts[-1] == 0:
            parts.pop()
        return cls(tuple(parts + [0] * (3 - len(parts))))

    def __str__(self) -> str:
        return ".".join(str(p) for p in self.release)


@dataclass(frozen=True)
class Provenance:
    """Who built the variant (``kernel-builder``, or kernelwheel) from which kernel commit."""

    builder_version: str
    builder_git: GitState | None = None
    kernel: GitState | None = None

    def to_dict(self) -> dict[str, object]:
        builder: dict[str, object] = {"version": self.builder_version}
        if self.builder_git is not None:
            builder.update(self.builder_git.to_dict())
        out: dict[str, object] = {"kernel-builder": builder}
        if self.kernel is not None:
            out["kernel"] = self.kernel.to_dict()
        return out


def _excluded(path: str) -> bool:
    """Files a digest leaves out: metadata.json and its signature (top level only), bytecode."""
    parts = path.split("/")
    return (
        (len(parts) == 1 and path in (METADATA_JSON, METADATA_SIGSTORE))
        or "__pycache__" in parts
        or path.endswith(".pyc")
    )


@dataclass(frozen=True)
class Digest:
    """Hashes of a variant folder's files (path inside the folder -> standard base64)."""

    algorithm: str
    files: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, files: Mapping[str, bytes | Path], algorithm: str = "sha256") -> Digest:
        """The digest ``kernels`` computes of a folder holding ``files`` (their bytes, or the
        files holding them, hashed in 1 MiB chunks)."""
        hashes = [(p, _hash(algorithm, data)) for p, data in files.items() if not _excluded(p)]
        return cls(algorithm, tuple(sorted(hashes)))

    @classmethod
    def of_sha256(cls, digests: Mapping[str, bytes]) -> Digest:
        """The digest from raw sha256 digests already taken (while the files were written)."""
        hashes = [(p, base64.b64encode(d).decode()) for p, d in digests.items() if not _excluded(p)]
        return cls("sha256", tuple(sorted(hashes)))

    def mismatches(self, hashes: Mapping[str, str]) -> list[str]:
        """How a folder whose files hash to ``hashes`` (path -> base64 hash in this digest's
        algorithm, every file of the folder) differs from this digest; empty when it matches."""
        present = {p: h for p, h in hashes.items() if not _excluded(p)}
        listed = dict(self.files)
        problems = [f"{p} is missing" for p in sorted(set(listed) - set(present))]
        for path in sorted(present):
            if (problem := self._mismatch(path, present[path], listed.get(path))) is not None:
                problems.append(problem)
        return problems

    def problem(self, path: str, data: bytes) -> str | None:
        """Why ``data`` (the file at ``path`` in the folder) does not match, or None."""
        return self._mismatch(path, _hash(self.algorithm, data), dict(self.files).get(path))

    def _mismatch(self, path: str, hashed: str, expected: str | None) -> str | None:
        if expected is None:
            return f"{path} is not in metadata.json's digest"
        if hashed != expected:
            return f"{path} does not match its {self.algorithm} in metadata.json's digest"
        return None

    def to_dict(self) -> dict[str, object]:
        return {"algorithm": self.algorithm, "files": dict(self.files)}


def _hash(algorithm: str, data: bytes | Path) -> str:
    digest = hashlib.new(algorithm, data if isinstance(data, bytes) else b"")
    if isinstance(data, Path):
        with data.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    return base64.b64encode(digest.digest()).decode()


@dataclass(frozen=True)
class KernelMetadata:
    """The fields of ``metadata.json``; all optional, as older files carry only python-depends."""

    name: str | None = None
    version: str | None = None  # the API major ("1"); older files: a full version
    kernels_minver: KernelsVersion | None = None  # the lowest kernels release that loads it
    license: str | None = None
    summary: str | None = None
    python_depends: tuple[str, ...] = ()
    id: str | None = None  # the ops namespace of the build
    backend: str | None = None  # "cuda", "cpu", ...
    archs: tuple[str, ...] = ()  # CUDA capabilities, e.g. ("8.0", "9.0")
    upstream: str | None = None  # git URL of the project the kernel comes from
    source: str | None = None  # git URL of the kernel-builder project
    kernel_depends: tuple[KernelDependency, ...] = ()
    digest: Digest | None = None
    provenance: Provenance | None = None

    def to_json(self) -> str:
        """The file as the ``kernels`` library reads it, keys in kernel-builder's order, the
        version an integer where it is one."""
        backend: dict[str, object] = {"type": self.backend}
        if self.archs:
            backend["archs"] = list(self.archs)
        version = self.version
        data: dict[str, object | None] = {
            "name": self.name,
            "id": self.id,
            "version": int(version) if version is not None and version.isdigit() else version,
            "kernels-minver": None if self.kernels_minver is None else str(self.kernels_minver),
            "license": self.license,
            "upstream": self.upstream,
            "source": self.source,
            "python-depends": list(self.python_depends),
            "kernel-depends": [d.to_dict() for d in self.kernel_depends],
            "summary": self.summary,
            "backend": None if self.backend is None else backend,
            "digest": None if self.digest is None else self.digest.to_dict(),
            "provenance": None if self.provenance is None else self.provenance.to_dict(),
        }
        return json.dumps({k: v for k, v in data.items() if v is not None}, indent=2) + "\n"

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> KernelMetadata:
        raw = _load(data, where)
        read = _Fields(raw, where)
        backend = raw["backend"] if isinstance(raw.get("backend"), dict) else {}
        kind, archs = backend.get("type"), backend.get("archs")
        return cls(
            name=read.get("name", read.text),
            version=read.get("version", read.text),
            kernels_minver=read.get("kernels-minver", read.kernels_version),
            license=read.get("license", read.license),
            summary=read.get("summary", read.text) or read.get("description", read.text),
            python_depends=read.python_depends(),
            id=read.get("id", read.text),
            backend=kind if isinstance(kind, str) else None,
            archs=tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
            upstream=read.get("upstream", read.text),
            source=read.get("source", read.text),
            kernel_depends=read.kernel_depends(),
            digest=read.get("digest", read.digest),
            provenance=read.get("provenance", read.provenance),
        )


def _load(data: bytes, where: str) -> dict[str, Any]:
    try:
        raw = json.loads(data.decode("utf-8"))
    except ValueError as exc:  # also an integer of more digits than Python converts
        raise HubError(
            f"{where}: not valid JSON ({exc})", hint="fix metadata.json in the repo"
        ) from None
    except RecursionError:
        raise HubError(
            f"{where}: nested too deeply to read (arrays or objects inside each other "
            "thousands of levels deep)",
            hint="fix metadata.json in the repo: it holds a flat object of strings and lists",
        ) from None
    if not isinstance(raw, dict):
        raise HubError(
            f"{where}: expected a JSON object, got {type(raw).__name__}",
            hint='e.g. {"python-depends": []}',
        )
    return raw


class _Fields:
    """Typed reads of one metadata.json object; each error names the field and the fix."""

    def __init__(self, raw: dict[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def error(self, key: str, message: str, hint: str) -> HubError:
        return HubError(f"{self.where}: field {key!r} {message}", hint=hint)

    def get(self, key: str, read: Callable[[str, Any], T]) -> T | None:
        """``read(key, value)`` of a field that is given; None for one absent or null."""
        value = self.raw.get(key)
        return None if value is None else read(key, value)

    def license(self, key: str, value: Any) -> str | None:
        if isinstance(value, str):
            return value.strip() or None
        if isinstance(value, dict) and isinstance(value.get("id") or value.get("name"), str):
            return str(value.get("id") or value.get("name"))
        hint = 'e.g. "license": "apache-2.0"'
        raise self.error(key, f"must be a string, got {value!r}", hint)

    def text(self, key: str, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.error(
                key, f"must be a string, got {value!r}", f"fix {key!r} in metadata.json"
            )
        return str(value).strip() or None

    def kernels_version(self, key: str, value: Any) -> KernelsVersion:
        hint = f'e.g. "{key}": "0.17.0" (the lowest kernels release that loads the variant)'
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {value!r}", hint)
        try:
            return KernelsVersion.parse(value)
        except ValueError as exc:
            raise self.error(key, f"has {exc}", hint) from None

    def python_depends(self) -> tuple[str, ...]:
        depends = self.raw.get("python-depends", [])
        if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
            raise self.error(
                "python-depends",
                f"must be a list of strings, got {depends!r}",
                'e.g. "python-depends": ["einops"]',
            )
        for dep in depends:
            try:
                Requirement(dep)
            except InvalidRequirement as exc:
                raise self.error(
                    "python-depends",
                    f"has {dep!r}, which is not a pip requirement ({exc})",
                    "use PEP 508 requirements such as 'einops' or 'einops>=0.8'",
                ) from None
        return tuple(depends)

    def kernel_depends(self) -> tuple[KernelDependency, ...]:
        entries = self.raw.get("kernel-depends", [])
        hint = 'e.g. "kernel-depends": [{"repo-id": "kernels-community/relu", "version": 1}]'
        if not isinstance(entries, list):
            raise self.error("kernel-depends", f"must be a list, got {entries!r}", hint)
        out: list[KernelDependency] = []
        for entry in entries:
            fields = entry if isinstance(entry, dict) else {}
            repo_id, version, revision = (fields.get(k) for k in ("repo-id", "version", "revision"))
            ok_version = isinstance(version, int) and not isinstance(version, bool) and version >= 0
            if (
                not isinstance(repo_id, str)
                or (version is None) == (revision is None)
                or (version is not None and not ok_version)
                or (revision is not None and not isinstance(revision, str))
            ):
                raise self.error(
                    "kernel-depends",
                    f"has {entry!r}: each entry is a repo-id with either an integer version "
                    "or a revision string",
                    hint,
                )
            out.append(KernelDependency(repo_id, version, revision))
        return tuple(out)

    def digest(self, key: str, value: Any) -> Digest:
        hint = 'e.g. "digest": {"algorithm": "sha256", "files": {"_ops.py": "<base64>"}}'
        algorithm = value.get("algorithm") if isinstance(value, dict) else None
        files = value.get("files") if isinstance(value, dict) else None
        if algorithm not in DIGEST_ALGORITHMS:
            raise self.error(
                key,
                f"has algorithm {algorithm!r}; kernels knows {', '.join(DIGEST_ALGORITHMS)}",
                hint,
            )
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise self.error(key, "needs 'files': an object of path -> base64 hash", hint)
        return Digest(str(algorithm), tuple(sorted(files.items())))

    def provenance(self, key: str, value: Any) -> Provenance:
        hint = (
            'e.g. "provenance": {"kernel-builder": {"version": "0.17.0"}, '
            '"kernel": {"commit": "<40 hex digits>", "dirty": false}}'
        )
        builder = value.get("kernel-builder") if isinstance(value, dict) else None
        version = builder.get("version") if isinstance(builder, dict) else None
        if not isinstance(version, str):
            raise self.error(key, "needs 'kernel-builder': {'version': ...}", hint)
        kernel = value.get("kernel")
        return Provenance(
            builder_version=version,
            builder_git=self.git(builder, "kernel-builder", optional=True, hint=hint),
            kernel=None if kernel is None else self.git(kernel, "kernel", hint=hint),
        )

    def git(self, value: Any, what: str, *, hint: str, optional: bool = False) -> GitState | None:
        """A ``{commit, dirty}`` pair (model.gitstate reads it)."""
        if not isinstance(value, dict):
            raise self.error("provenance", f"has {what} {value!r}, not an object", hint)
        if (
            optional
            and value.get("commit", value.get("sha")) is None
            and value.get("dirty") is None
        ):
            return None
        try:
            return GitState.parse(value)
        except ValueError as exc:
            raise self.error("provenance", f"has {what} {exc}", hint) from None
