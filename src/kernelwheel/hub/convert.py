"""One variant folder -> one wheel: read and verify its files, lay them out, describe the wheel.

The wheel is ``{name}-{version}+{local}-cp39-abi3-{platform}.whl`` for binary variants and
``…-py3-none-any.whl`` for noarch ones, with ``Variant.local_version`` as the local part (the
formatter ``kernelwheel build`` uses), ``Requires-Dist`` on the variant's torch plus the
``python-depends`` of metadata.json, and Summary/License from metadata.json where it has them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.version import InvalidVersion, Version

from ..errors import HubError
from ..model.variant import LocalVersionStyle, Variant
from ..wheels import WheelSpec
from .guard import guard_files
from .layout import KernelMetadata, VariantPlan, package_name, plan
from .revision import RequestKind, Resolution
from .safety import verify
from .source import BUILD_DIR, FileReader, RepoFile

__all__ = ["PreparedWheel", "prepare_wheel", "wheel_tag"]

ABI3_INTERPRETER = "cp39"  # the stable ABI floor Hub builds target (Py_LIMITED_API=0x03090000)
REQUIRES_PYTHON = ">=3.9"
_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")


@dataclass(frozen=True)
class PreparedWheel:
    spec: WheelSpec
    plan: VariantPlan
    notes: tuple[str, ...]


def wheel_tag(variant: Variant, manylinux: str) -> Tag:
    if variant.noarch:
        return Tag("py3", "none", "any")
    return Tag(ABI3_INTERPRETER, "abi3", variant.platform_tag(manylinux=manylinux))


def _read(reader: FileReader, file: RepoFile, where: str) -> tuple[bytes, str]:
    """The file's verified bytes and their hex SHA-256."""
    data, announced = reader.read(file)
    return data, verify(file.path, data, announced, where=where)


def _base_version(resolution: Resolution, metadata: KernelMetadata | None, notes: list[str]) -> str:
    version = resolution.version
    found = metadata.version if metadata else None
    if not found:
        return version
    try:
        theirs = Version(found)
    except InvalidVersion:
        notes.append(f"metadata.json version {found!r} is not a PEP 440 version; ignored")
        return version
    ours = Version(version)
    if resolution.request.kind is RequestKind.MAJOR and theirs.release[0] == ours.release[0]:
        if len(theirs.release) > 1 and not theirs.local:
            notes.append(f"version {theirs} from metadata.json (branch {resolution.ref})")
            return str(theirs)
    elif theirs != ours:
        notes.append(f"metadata.json says version {found}; the wheel keeps {version}")
    return version


def prepare_wheel(
    variant: Variant,
    files: Sequence[RepoFile],
    reader: FileReader,
    *,
    repo_name: str,
    resolution: Resolution,
    manylinux: str,
    where: str,
    style: LocalVersionStyle = LocalVersionStyle.DOTTED,
    name: str | None = None,
) -> PreparedWheel:
    """Read, verify and lay out one variant. Integrity errors propagate as HubError from
    :func:`verify`; layout problems raise :class:`Unconvertible`."""
    folder = f"{where}: {BUILD_DIR}/{variant.name}"
    by_inner = {f.inner: f for f in files}
    notes: list[str] = []
    metadata: KernelMetadata | None = None
    if "metadata.json" in by_inner:
        data, _ = _read(reader, by_inner["metadata.json"], where)
        try:
            metadata = KernelMetadata.parse(data, where=f"{folder}/metadata.json")
        except HubError as exc:
            raise Unconvertible(str(exc)) from None
    if name is not None:  # --name: above metadata.json, the content and the repo name
        metadata = dataclasses.replace(metadata or KernelMetadata(), name=name)
    try:
        layout = plan(
            variant.name, sorted(by_inner), metadata=metadata, repo_name=repo_name, where=folder
        )
    except HubError as exc:
        raise Unconvertible(str(exc)) from None
    read = {arc: _read(reader, by_inner[inner], where) for inner, arc in layout.files}
    contents = {arc: data for arc, (data, _) in read.items()}

    dist = (metadata.name if metadata and metadata.name else None) or (
        repo_name if package_name(repo_name) == layout.package else layout.package
    )
    version = f"{_base_version(resolution, metadata, notes)}+{variant.local_version_in(style)}"
    if guard_files(contents, layout.package, dist, version, variant):
        notes.append("import guard added")
    depends = metadata.python_depends if metadata else ()
    summary = metadata.summary if metadata and metadata.summary else None
    spec = WheelSpec(
        name=dist,
        version=version,
        tag=wheel_tag(variant, manylinux),
        files=contents,
        requires_dist=(variant.torch_requirement(), *depends),
        requires_python=REQUIRES_PYTHON,
        summary=summary
        or f"{dist} PyTorch kernel ({variant.name}) from {repo_name} at commit "
        f"{resolution.commit[:12]}, converted by kernelwheel",
        license=metadata.license if metadata else None,
        executables=frozenset(a for a in contents if a.endswith(_NATIVE_SUFFIXES)),
        # Each file was hashed to verify it: RECORD reuses the digests of the bytes left as read
        # (not those the guard rewrote).
        sha256={arc: digest for arc, (data, digest) in read.items() if contents[arc] is data},
    )
    return PreparedWheel(spec, layout, tuple(notes))


class Unconvertible(Exception):
    """A variant folder that cannot become a wheel (the message says why); other variants go on."""
