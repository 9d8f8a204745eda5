"""A project's wheels' METADATA: licence and licence files (setuptools' default patterns),
project URLs, and the kernel card plus a section on the wheel as the long description."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .. import __version__
from ..abi.torch_floor import floor_of_files, floor_warning, load_shim_table, raised_floor
from ..errors import ProjectError
from ..model.card import CardFields, card_fields, project_card, strip_front_matter
from ..model.project import KernelProject
from ..model.variant import Variant
from ..wheels import WheelSpec

LICENSE_PREFIXES = ("LICENSE", "LICENCE", "COPYING")


def requirements(project: KernelProject, variant: Variant) -> tuple[str, ...]:
    """What ``variant``'s build requires besides torch: python-depends, then kernel-depends."""
    backend = variant.backend.kind.value if variant.backend is not None else None
    if backend is None:
        return project.python_depends + tuple(d.requirement for d in project.kernel_depends)
    kernels = tuple(d.requirement for d in project.kernel_depends_for(backend))
    return tuple(dict.fromkeys((*project.python_depends_for(backend), *kernels)))


def with_metadata(
    spec: WheelSpec, project: KernelProject, *, variant: str, dirty: bool = False
) -> WheelSpec:
    """``spec`` with the METADATA of a wheel of ``project`` built for ``variant`` (a name or
    words)."""
    urls = tuple(
        (label, url)
        for label, url in (("Upstream", project.upstream), ("Source", project.source))
        if url
    )
    fields = card_fields(project, version=_major(spec.version), dirty=dirty)
    card = project_card(project, fields)
    root = project.root
    found = sorted(p for p in root.iterdir() if p.is_file() and p.name.startswith(LICENSE_PREFIXES))
    return dataclasses.replace(
        spec,
        license=project.license,
        license_files={p.name: _bytes(p, root) for p in found},
        project_urls=urls,
        description=wheel_description(card, fields, version=spec.version, variant=variant),
    )


def check_card(project: KernelProject, *, version: str, dirty: bool = False) -> None:
    """Render the card before anything is built: a broken CARD.md fails before the compiles."""
    project_card(project, card_fields(project, version=_major(version), dirty=dirty))


def wheel_description(card: str, fields: CardFields, *, version: str, variant: str) -> str:
    """The card (front matter left to the Hub) and what a user of this one wheel needs."""
    name, package = fields.name, fields.package
    lines = [
        strip_front_matter(card).rstrip(),
        "",
        "## This wheel",
        "",
        f"`{name}` {version}, the build for `{variant}`, made by kernelwheel {__version__}.",
        "",
        f"- **Install** the build that fits your interpreter's torch: `kernelwheel install {name}"
        " -f DIR` (a folder of wheels; `-i URL` for an index `kernelwheel index` made). With pip,"
        " use the index of your torch and flavour, or pin this build:"
        f" `pip install --find-links DIR '{name}=={version}'`.",
        f"- **Import** it as `import {package}`"
        + (
            f"; its functions: {', '.join(f'`{f}`' for f in fields.functions)}."
            if fields.functions
            else "."
        ),
    ]
    if fields.ops:
        lines.append("- **Ops** the binding declares (in this build's own `torch.ops` namespace):")
        lines.extend(f"  - `{op}`" for op in fields.ops)
    if fields.dirty:
        lines.append("- Built from a git tree with uncommitted changes.")
    return "\n".join(lines) + "\n"


def _major(version: str) -> int | None:
    try:
        return Version(version).major
    except InvalidVersion:
        return None


def refuse_outside(path: Path, root: Path, shown: object) -> None:
    """A symlink out of the project ``root`` would put a file from elsewhere in the wheel."""
    if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
        raise ProjectError(
            f"{shown} is a symlink pointing outside the project",
            file=path,
            hint="copy the file into the project instead",
        )


def _bytes(path: Path, root: Path) -> bytes:
    refuse_outside(path, root, path.name)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ProjectError(
            f"cannot read it ({exc.strerror or exc})", file=path, hint="check its permissions"
        ) from None


@dataclass(frozen=True)
class TorchRequirement:
    """A wheel's ``Requires-Dist`` for torch, and why it is not what the project declared."""

    requirement: str
    warnings: tuple[str, ...] = ()


def torch_requirement(variant: Variant, shared_objects: Sequence[Path]) -> TorchRequirement:
    """A per-torch build pins its series; a stable-ABI build states ``torch>=max(declared,
    measured)`` (its ABI version; the newest libtorch shim function ``shared_objects`` import,
    abi.torch_floor), warning when measured is higher and of imports the table lacks."""
    if not variant.stable_abi or variant.torch is None:
        return TorchRequirement(variant.torch_requirement())
    table = load_shim_table()
    measured = floor_of_files(shared_objects, table)
    floor = raised_floor(variant.torch, measured)
    warnings = [floor_warning(variant.torch, measured, table)]
    if measured.unknown:
        warnings.append(
            f"{', '.join(measured.unknown)}: not in the libtorch shim table (torch "
            f"{', '.join(table.seen)}), so the torch>={floor} it states cannot be proven "
            "for them: a function newer than torch "
            f"{table.newest} needs a newer torch (regenerate the table with "
            "scripts/regen_torch_shim_versions.py)"
        )
    return TorchRequirement(f"torch>={floor}", tuple(w for w in warnings if w))
