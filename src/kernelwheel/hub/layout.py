"""How a ``build/<variant>/`` folder maps onto a wheel's package: nested (legacy) or flat
(current) (docs/to-wheel.md, "What a variant becomes", Layouts). Planning works on paths only;
every left-out path is recorded with its reason."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from ..errors import HubError
from ..model.names import is_package_name, package_name
from .metadata import METADATA_JSON, METADATA_SIGSTORE, KernelMetadata

INIT = "__init__.py"


class Layout(str, Enum):
    NESTED = "nested"
    FLAT = "flat"


@dataclass(frozen=True)
class VariantPlan:
    """Where each file of one variant folder goes in the wheel."""

    layout: Layout
    package: str
    files: tuple[tuple[str, str], ...]  # (path inside the variant folder, archive path)
    left_out: tuple[tuple[str, str], ...]  # (path inside the variant folder, why)


def plan(
    paths: Sequence[str], *, metadata: KernelMetadata | None, repo_name: str, where: str
) -> VariantPlan:
    """Each of ``paths`` (in ``build/<variant>/``) at its layout's archive path, or left out with
    its reason (metadata.json and bytecode always)."""
    shims: list[str] = []
    if INIT in paths:
        layout, pkg = Layout.FLAT, _flat(paths, metadata, repo_name, where)
        inside = [p for p in paths if p.startswith(pkg + "/")]
        shims = inside if inside == [f"{pkg}/{INIT}"] else []
    else:
        layout, pkg = Layout.NESTED, _nested(paths, metadata, repo_name, where)
    files, left_out = [], []
    for path in sorted(paths):
        if path == METADATA_JSON:
            left_out.append((path, "read into the wheel's METADATA"))
        elif path == METADATA_SIGSTORE:
            left_out.append((path, f"signature of {METADATA_JSON}, kept beside it"))
        elif "__pycache__" in path.split("/") or path.endswith((".pyc", ".pyo")):
            left_out.append((path, "compiled bytecode"))
        elif path in shims:
            left_out.append((path, "compatibility shim for older kernels releases"))
        elif layout is Layout.FLAT:
            files.append((path, f"{pkg}/{path}"))
        elif path.startswith(pkg + "/"):
            files.append((path, path))
        else:
            left_out.append((path, f"outside the package folder {pkg}/"))
    return VariantPlan(layout, pkg, tuple(files), tuple(left_out))


# A compiled extension ``_<name>_<build id>.abi3.so`` (kernel-builder's ops namespace).
_EXTENSION = re.compile(r"^_([A-Za-z][A-Za-z0-9_]*?)_[0-9a-f]{7,}\.(?:abi3\.so|so|pyd|dylib)$")


def content_name(paths: Sequence[str]) -> str | None:
    """The package name a flat variant folder's own files agree on: the compatibility shim
    folder (``<name>/__init__.py``) and the extension's ops namespace (``_<name>_<id>.abi3.so``)."""
    found = {s for s in _package_folders(paths) if is_package_name(s)}
    found |= {m.group(1) for p in paths if "/" not in p and (m := _EXTENSION.match(p))}
    return found.pop() if len(found) == 1 else None


def _package_folders(paths: Sequence[str]) -> list[str]:
    """The folders directly in the variant folder that hold an ``__init__.py``, sorted."""
    return sorted({p.split("/")[0] for p in paths if p.count("/") == 1 and p.endswith("/" + INIT)})


def _flat(paths: Sequence[str], metadata: KernelMetadata | None, repo_name: str, where: str) -> str:
    from_content = content_name(paths)
    if metadata and metadata.name:
        source, name = "metadata.json 'name'", metadata.name
    elif from_content:
        source, name = "the shim folder and extension name", from_content
    else:
        source, name = "the repo name", repo_name
    pkg = package_name(name)
    if not is_package_name(pkg):
        raise HubError(
            f"{where}: flat layout, but the package name {pkg!r} (from {source}) is not a "
            "Python identifier",
            hint="set a valid 'name' in metadata.json",
        )
    return pkg


def _nested(
    paths: Sequence[str], metadata: KernelMetadata | None, repo_name: str, where: str
) -> str:
    candidates = _package_folders(paths)
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
    if not is_package_name(pkg):
        raise HubError(
            f"{where}: package folder {pkg!r} is not a Python identifier",
            hint="rename the package folder",
        )
    return pkg
