"""How a ``build/<variant>/`` folder maps onto a wheel's package (formats.md §3).

- Nested (legacy): ``build/<variant>/<pkg>/__init__.py`` …: the ``<pkg>/`` folder is the package.
- Flat (current): ``build/<variant>/__init__.py`` … plus ``metadata.json``: the variant folder
  itself is the package, laid out as ``<pkg>/``. Its ``<pkg>/__init__.py`` compatibility shim
  (which loads the variant folder for older ``kernels`` releases) has no meaning inside a wheel
  and is left out.

``metadata.json`` (either layout) is read into the wheel's METADATA, not packaged. Bytecode is
left out. Planning works on paths only; every left-out path is recorded with its reason.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import HubError

__all__ = ["METADATA_JSON", "KernelMetadata", "Layout", "VariantPlan", "package_name", "plan"]

METADATA_JSON = "metadata.json"
INIT = "__init__.py"


class Layout(str, Enum):
    NESTED = "nested"
    FLAT = "flat"


def package_name(name: str) -> str:
    """The import name kernel-builder derives from a kernel name: '-' and '.' become '_'."""
    return re.sub(r"[-.]", "_", name)


def _is_package(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


@dataclass(frozen=True)
class KernelMetadata:
    """The fields of ``metadata.json`` that reach the wheel. All optional: older files carry
    only ``python-depends``."""

    name: str | None = None
    version: str | None = None
    license: str | None = None
    summary: str | None = None
    python_depends: tuple[str, ...] = ()

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> KernelMetadata:
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HubError(
                f"{where}: not valid JSON ({exc})", hint="fix metadata.json in the repo"
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
        return cls(
            name=text("name"),
            version=text("version"),
            license=_license(raw.get("license"), where),
            summary=text("summary") or text("description"),
            python_depends=tuple(depends),
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


@dataclass(frozen=True)
class VariantPlan:
    """Where each file of one variant folder goes in the wheel."""

    variant: str
    layout: Layout
    package: str
    files: tuple[tuple[str, str], ...]  # (path inside the variant folder, archive path)
    left_out: tuple[tuple[str, str], ...]  # (path inside the variant folder, why)
    metadata_path: str | None  # inside the variant folder, when there is one


def _bytecode(path: str) -> bool:
    return "__pycache__" in path.split("/") or path.endswith((".pyc", ".pyo"))


def plan(
    variant: str,
    paths: Sequence[str],
    *,
    metadata: KernelMetadata | None,
    repo_name: str,
    where: str,
) -> VariantPlan:
    """Plan one variant. ``paths`` are relative to ``build/<variant>/``; ``where`` names the
    variant folder in errors."""
    meta_path = METADATA_JSON if METADATA_JSON in paths else None
    if INIT in paths:
        return _plan_flat(variant, paths, metadata, repo_name, where, meta_path)
    return _plan_nested(variant, paths, metadata, repo_name, where, meta_path)


def _plan_flat(
    variant: str,
    paths: Sequence[str],
    metadata: KernelMetadata | None,
    repo_name: str,
    where: str,
    meta_path: str | None,
) -> VariantPlan:
    source = "metadata.json 'name'" if metadata and metadata.name else "the repo name"
    pkg = package_name(metadata.name if metadata and metadata.name else repo_name)
    if not _is_package(pkg):
        raise HubError(
            f"{where}: flat layout, but the package name {pkg!r} (from {source}) is not a "
            "Python identifier",
            hint="set a valid 'name' in metadata.json",
        )
    shim = [p for p in paths if p.startswith(pkg + "/")]
    is_shim = shim == [f"{pkg}/{INIT}"]
    files, left_out = [], []
    for path in sorted(paths):
        if path == meta_path:
            left_out.append((path, "read into the wheel's METADATA"))
        elif _bytecode(path):
            left_out.append((path, "compiled bytecode"))
        elif is_shim and path in shim:
            left_out.append((path, "compatibility shim for older kernels releases"))
        else:
            files.append((path, f"{pkg}/{path}"))
    return VariantPlan(variant, Layout.FLAT, pkg, tuple(files), tuple(left_out), meta_path)


def _plan_nested(
    variant: str,
    paths: Sequence[str],
    metadata: KernelMetadata | None,
    repo_name: str,
    where: str,
    meta_path: str | None,
) -> VariantPlan:
    candidates = sorted({p.split("/")[0] for p in paths if p.count("/") == 1 and p.endswith(INIT)})
    candidates = [c for c in candidates if f"{c}/{INIT}" in paths]
    if not candidates:
        raise HubError(
            f"{where}: no Python package: expected {INIT} directly in the variant folder (flat "
            f"layout) or in one folder inside it (nested layout)",
            hint=f"found: {', '.join(sorted(paths)[:8]) or 'no files'}",
        )
    if len(candidates) > 1:
        preferred = [
            package_name(n)
            for n in (metadata.name if metadata else None, repo_name)
            if n and package_name(n) in candidates
        ]
        if not preferred:
            raise HubError(
                f"{where}: several packages ({', '.join(candidates)}) and none is named after "
                f"the repo ({package_name(repo_name)})",
                hint="keep one package per variant folder",
            )
        candidates = preferred[:1]
    pkg = candidates[0]
    if not _is_package(pkg):
        raise HubError(
            f"{where}: package folder {pkg!r} is not a Python identifier",
            hint="rename the package folder",
        )
    files, left_out = [], []
    for path in sorted(paths):
        if path == meta_path:
            left_out.append((path, "read into the wheel's METADATA"))
        elif _bytecode(path):
            left_out.append((path, "compiled bytecode"))
        elif path.startswith(pkg + "/"):
            files.append((path, path))
        else:
            left_out.append((path, f"outside the package folder {pkg}/"))
    return VariantPlan(variant, Layout.NESTED, pkg, tuple(files), tuple(left_out), meta_path)
