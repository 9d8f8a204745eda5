"""``metadata.json`` of a Hub kernel variant folder: one type, read by to-wheel (into the wheel's
METADATA) and written by the Hub-layout export (for the ``kernels`` library)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import HubError

__all__ = ["METADATA_JSON", "KernelMetadata"]

METADATA_JSON = "metadata.json"


@dataclass(frozen=True)
class KernelMetadata:
    """The fields of ``metadata.json`` that reach the wheel. All optional: older files carry
    only ``python-depends``."""

    name: str | None = None
    version: str | None = None
    license: str | None = None
    summary: str | None = None
    python_depends: tuple[str, ...] = ()
    id: str | None = None  # the ops namespace of the build
    backend: str | None = None  # "cuda", "cpu", ... or "universal"
    archs: tuple[str, ...] = ()  # CUDA capabilities, e.g. ("8.0", "9.0")

    def to_json(self) -> str:
        """The file as the ``kernels`` library reads it (keys sorted, the version an integer
        where it is one, as in kernel-builder's output)."""
        data: dict[str, object] = {"python-depends": list(self.python_depends)}
        for key, value in (("id", self.id), ("name", self.name), ("license", self.license)):
            if value is not None:
                data[key] = value
        if self.version is not None:
            data["version"] = int(self.version) if self.version.isdigit() else self.version
        if self.summary is not None:
            data["summary"] = self.summary
        if self.backend is not None:
            backend: dict[str, object] = {"type": self.backend}
            if self.archs:
                backend["archs"] = list(self.archs)
            data["backend"] = backend
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> KernelMetadata:
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
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

        def text(key: str) -> str | None:
            value = raw.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise HubError(
                    f"{where}: field {key!r} must be a string, got {value!r}",
                    hint=f"fix {key!r} in metadata.json",
                )
            return str(value).strip() or None

        depends = raw.get("python-depends", [])
        if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
            raise HubError(
                f"{where}: field 'python-depends' must be a list of strings, got {depends!r}",
                hint='e.g. "python-depends": ["einops"]',
            )
        for dep in depends:
            try:
                Requirement(dep)
            except InvalidRequirement as exc:
                raise HubError(
                    f"{where}: field 'python-depends' has {dep!r}, which is not a pip "
                    f"requirement ({exc})",
                    hint="use PEP 508 requirements such as 'einops' or 'einops>=0.8'",
                ) from None
        backend = raw.get("backend")
        kind = backend.get("type") if isinstance(backend, dict) else None
        archs = backend.get("archs") if isinstance(backend, dict) else None
        return cls(
            name=text("name"),
            version=text("version"),
            license=_license(raw.get("license"), where),
            summary=text("summary") or text("description"),
            python_depends=tuple(depends),
            id=text("id"),
            backend=kind if isinstance(kind, str) else None,
            archs=tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
        )


def _license(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, dict) and isinstance(value.get("id") or value.get("name"), str):
        return str(value.get("id") or value.get("name"))
    raise HubError(
        f"{where}: field 'license' must be a string, got {value!r}",
        hint='e.g. "license": "apache-2.0"',
    )
