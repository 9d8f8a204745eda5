"""Built variants exported as a Hub kernel repo tree (``build/<variant>/``, kernel-builder's flat
layout) with the ``metadata.json`` ``kernels`` reads (docs/versions.md, "metadata.json of the Hub
export"): what ``kernels`` loads and ``kernelwheel to-wheel`` converts back into wheels."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from .. import __version__
from .._util import DISK_FULL_HINT, atomic_write, disk_full, replace_dir, staging_dir
from ..errors import HubError
from ..model.capability import CudaCapability
from ..model.card import card_fields, project_card
from ..model.gitstate import GitState
from ..model.project import KernelProject
from ..model.python_depends import load_python_depends
from ..model.variant import Variant
from ..model.wheelname import parse_wheel_name
from ..wheels import Member
from ..wheels.reader import extract_package
from .metadata import METADATA_JSON, Digest, KernelMetadata, Provenance
from .minver import kernels_minver

CARD = "README.md"  # the repo's kernel card, at the root of the Hub layout

# SPDX's word for "no license information was given" (metadata.json requires a string).
NO_LICENSE = "NOASSERTION"


def kernel_builder_names(requirements: tuple[str, ...], backend: str) -> tuple[str, ...]:
    """kernel-builder's ``python-depends`` names for a build's requirements (model.python_depends
    reversed); one no name stands for stays in Requires-Dist only: ``kernels`` knows no other."""
    table = load_python_depends()
    names: list[str] = []
    for scope in (None, backend):
        for name in table.names_for(scope):
            needs = table.requirements(name, scope) or ()
            if needs and all(r in requirements for r in needs) and name not in names:
                names.append(name)
    return tuple(names)


def kernel_metadata(
    project: KernelProject,
    variant: Variant,
    namespace: str,
    capabilities: tuple[CudaCapability, ...],
    *,
    major: int,
    files: Mapping[str, Member] | None = None,
    git: GitState | None = None,
    digest: Digest | None = None,
) -> KernelMetadata:
    """metadata.json for one exported variant; its digest from ``files`` (path in the variant
    folder -> bytes or the file holding them), else ``digest``; ``git``: the provenance."""
    if variant.backend is None:
        raise HubError(
            f"{variant.name}: a noarch variant has no backend for metadata.json",
            hint="export binary variants",
        )
    backend = variant.backend.kind.value
    meta = KernelMetadata(
        id=namespace,
        name=project.name,
        version=str(major),
        license=project.license or NO_LICENSE,
        upstream=project.upstream,
        source=project.source,
        python_depends=kernel_builder_names(project.python_depends_for(backend), backend),
        kernel_depends=tuple(project.kernel_depends_for(backend)),
        backend=backend,
        archs=tuple(c.target for c in capabilities),
        digest=digest or (Digest.of(files) if files is not None else None),
        provenance=Provenance(f"kernelwheel {__version__}", kernel=git),
    )
    minver, _ = kernels_minver(variant, meta)
    return dataclasses.replace(meta, kernels_minver=minver)


def export_variant(
    wheel: Path,
    project: KernelProject,
    variant: Variant,
    namespace: str,
    root: Path,
    *,
    capabilities: tuple[CudaCapability, ...] = (),
    git: GitState | None = None,
) -> Path:
    """``root/build/<variant>/`` (returned) from ``wheel``'s package, each file streamed out,
    checked against RECORD and hashed in one pass, and the kernel card."""
    try:
        major = parse_wheel_name(wheel.name)[1].major
    except ValueError as exc:  # InvalidWheelFilename, InvalidVersion
        raise HubError(f"{wheel}: {exc}", hint="export a wheel kernelwheel built") from None
    folder = root / "build" / variant.name
    try:
        with _staging(folder) as staging:
            digests = extract_package(wheel, f"{project.package}/", staging)  # not the dist-info
            meta = kernel_metadata(
                project,
                variant,
                namespace,
                capabilities,
                major=major,
                git=git,
                digest=Digest.of_sha256(digests),
            )
            _publish(staging, folder, meta)
        export_card(project, root, version=major, dirty=bool(git and git.dirty))
    except OSError as exc:
        if not disk_full(exc):
            raise
        raise HubError(
            f"{exc.filename or folder}: {exc.strerror or exc}",
            hint=f"{DISK_FULL_HINT} with --hub-layout",
        ) from None
    return folder


@contextmanager
def _staging(folder: Path) -> Iterator[Path]:
    """A staging folder beside ``folder``; an OSError naming a file in it names that file in
    ``folder``, where it was going (a full disk's error, not the private folder's name)."""
    made: list[Path] = []
    try:
        with staging_dir(folder.parent, "export") as staging:
            made.append(staging)
            yield staging
    except OSError as exc:
        for staging in made:
            for attr in ("filename", "filename2"):
                if (path := Path(getattr(exc, attr) or "")).is_relative_to(staging):
                    setattr(exc, attr, str(folder / path.relative_to(staging)))
        raise


def write_variant(
    root: Path,
    variant: Variant,
    files: Mapping[str, Member],
    meta: KernelMetadata,
    *,
    linked: Collection[str] = (),
) -> Path:
    """``root/build/<variant>/``: ``files`` (bytes, or files copied; those in ``linked``
    hard-linked where the file system allows) and ``meta`` as metadata.json."""
    folder = root / "build" / variant.name
    with _staging(folder) as staging:
        for name, data in files.items():
            dest = staging / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                dest.write_bytes(data)
            elif name in linked and _linked(data, dest):
                continue
            else:
                shutil.copyfile(data, dest)
        return _publish(staging, folder, meta)


def _linked(src: Path, dest: Path) -> bool:
    try:
        os.link(src, dest)
    except OSError:  # another file system, or one without hard links: a copy
        return False
    return True


def _publish(staging: Path, folder: Path, meta: KernelMetadata) -> Path:
    """The filled ``staging`` folder, with ``meta`` as metadata.json, made ``folder``."""
    for so in staging.rglob("*.so"):
        so.chmod(0o755)
    atomic_write(staging / METADATA_JSON, meta.to_json())  # a full disk's error names it
    staging.chmod(0o755)  # a staging folder is private; the variant folder is not
    return replace_dir(staging, folder)


def export_card(
    project: KernelProject, root: Path, *, version: int | None = None, dirty: bool = False
) -> Path:
    """The kernel card (model/card) as ``root/README.md``, which the Hub shows and upload pushes;
    ``version``: the export's API major (else build.toml's); ``dirty``: an unclean git tree."""
    fields = card_fields(project, version=version, dirty=dirty)
    data = project_card(project, fields).encode()
    target = root / CARD
    if not target.is_file() or target.read_bytes() != data:
        atomic_write(target, data)
    return target
