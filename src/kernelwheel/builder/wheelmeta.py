"""What a kernel project says about itself, for its wheels' METADATA.

- ``general.license`` → ``License-Expression`` (``License`` when it is no SPDX expression:
  the writer decides);
- the project root's ``LICENSE*``, ``LICENCE*`` and ``COPYING*`` files (upper case, as
  setuptools' default patterns) → ``.dist-info/licenses/`` with a ``License-File`` each;
- ``general.upstream`` / ``general.source`` → ``Project-URL: Upstream, …`` / ``Source, …``;
- ``CARD.md`` (the Hub's kernel card), else ``README.md`` → the long description (Markdown).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ProjectError
from ..model.project import CARD_FILES, KernelProject
from ..model.variant import Variant
from ..wheels import WheelSpec

__all__ = [
    "DESCRIPTION_FILES",
    "LICENSE_PREFIXES",
    "ProjectMetadata",
    "project_metadata",
    "requirements",
]

LICENSE_PREFIXES = ("LICENSE", "LICENCE", "COPYING")
DESCRIPTION_FILES = CARD_FILES


@dataclass(frozen=True)
class ProjectMetadata:
    license: str | None = None
    license_files: Mapping[str, bytes] = field(default_factory=dict)
    project_urls: tuple[tuple[str, str], ...] = ()
    description: str | None = None
    description_file: Path | None = None

    def apply(self, spec: WheelSpec) -> WheelSpec:
        """``spec`` with these fields set."""
        return dataclasses.replace(
            spec,
            license=self.license,
            license_files=dict(self.license_files),
            project_urls=self.project_urls,
            description=self.description,
        )


def requirements(project: KernelProject, variant: Variant) -> tuple[str, ...]:
    """What a build for ``variant`` requires besides torch: the general python-depends and its
    backend's (PyPI names), then its Hub kernel dependencies as requirements on their wheels."""
    backend = variant.backend.kind.value if variant.backend is not None else None
    if backend is None:
        return project.python_depends + tuple(d.requirement for d in project.kernel_depends)
    kernels = tuple(d.requirement for d in project.kernel_depends_for(backend))
    return tuple(dict.fromkeys((*project.python_depends_for(backend), *kernels)))


def project_metadata(project: KernelProject) -> ProjectMetadata:
    description_file = next(
        (project.root / n for n in DESCRIPTION_FILES if (project.root / n).is_file()), None
    )
    urls = tuple(
        (label, url)
        for label, url in (("Upstream", project.upstream), ("Source", project.source))
        if url
    )
    return ProjectMetadata(
        license=project.license,
        license_files=_license_files(project.root),
        project_urls=urls,
        description=_text(description_file, project.root) if description_file else None,
        description_file=description_file,
    )


def _license_files(root: Path) -> dict[str, bytes]:
    found = sorted(
        p for p in root.iterdir() if p.is_file() and p.name.startswith(LICENSE_PREFIXES)
    )
    return {p.name: _bytes(p, root) for p in found}


def _bytes(path: Path, root: Path) -> bytes:
    if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
        raise ProjectError(
            f"{path.name} is a symlink pointing outside the project",
            file=path,
            hint="copy the file into the project instead",
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ProjectError(
            f"cannot read it ({exc.strerror or exc})", file=path, hint="check its permissions"
        ) from None


def _text(path: Path, root: Path) -> str:
    try:
        return _bytes(path, root).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProjectError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=path,
            hint="save it as UTF-8: it becomes the wheels' description",
        ) from None
