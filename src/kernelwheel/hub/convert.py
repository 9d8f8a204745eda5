"""One variant folder -> one wheel: read and verify its files, lay them out, describe the wheel
(docs/to-wheel.md, "What a variant becomes")."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import HubError
from ..model.names import name_warning, package_name, shadowing
from ..model.python_depends import load_python_depends
from ..model.recipes import TVM_FFI_PACKAGE, load_recipes
from ..model.variant import LocalVersionStyle, Variant
from ..wheels import WheelSpec, license_warning
from .guard import UnreadableInit, guard_files
from .layout import VariantPlan, plan
from .metadata import DEV_BUILD_MARK, METADATA_JSON, METADATA_SIGSTORE, KernelMetadata
from .revision import RequestKind, Resolution
from .safety import verify
from .source import BUILD_DIR, FileReader, RepoFile

ABI3_INTERPRETER = "cp39"  # the stable ABI floor Hub builds target (Py_LIMITED_API=0x03090000)
REQUIRES_PYTHON = ">=3.9"
_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
MANYLINUX = "manylinux_2_28"  # the platform tag of a converted linux wheel
HUB_DIST_INFO = "hub"  # .dist-info/hub/: metadata.json and its signature, as the repo has them


@dataclass(frozen=True)
class PreparedWheel:
    spec: WheelSpec
    plan: VariantPlan
    notes: tuple[str, ...]
    metadata: KernelMetadata | None = None  # the variant's metadata.json, as read

    @property
    def members(self) -> dict[str, bytes]:
        """The wheel's files: all bytes read from the source (only a built wheel's are on disk)."""
        return {name: d for name, d in self.spec.files.items() if isinstance(d, bytes)}


def dist_name(metadata: KernelMetadata | None, repo_name: str, package: str) -> str:
    """The wheel's name: metadata.json's (or --name's), else the repo's where it names the
    package (``Img2Gray`` keeps its spelling), else the package folder's."""
    if metadata is not None and metadata.name:
        return metadata.name
    return repo_name if package_name(repo_name) == package else package


def wheel_tag(variant: Variant) -> Tag:
    """The tag ``kernelwheel build`` gives the kind: a tvm-ffi library is loaded by tvm_ffi, not
    imported by CPython, so it is ``py3-none-<platform>``, not abi3."""
    if variant.noarch:
        return Tag("py3", "none", "any")
    if variant.tvm_ffi is not None:
        return Tag("py3", "none", variant.platform_tag(manylinux=MANYLINUX))
    return Tag(ABI3_INTERPRETER, "abi3", variant.platform_tag(manylinux=MANYLINUX))


def framework_requirements(variant: Variant) -> tuple[str, ...]:
    """What the variant's framework needs (docs/to-wheel.md): for tvm-ffi, apache-tvm-ffi of the
    named series (the Hub build's release is not recorded) and recipes/tvm-ffi.toml's needs."""
    if variant.tvm_ffi is None:
        return (variant.torch_requirement(),)
    series = variant.tvm_ffi
    requires = [f"{TVM_FFI_PACKAGE}>={series},<{series.major}.{series.minor + 1}"]
    recipe = load_recipes().tvm_ffi
    if recipe is not None and variant.backend is not None:
        requires += recipe.requires_for(variant.backend)
    return tuple(requires)


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


def _project_urls(metadata: KernelMetadata | None, notes: list[str]) -> tuple[tuple[str, str], ...]:
    """metadata.json's upstream and source as Project-URLs, http(s) only (installers show them as
    links); any other one is left out with a note."""
    if metadata is None:
        return ()
    kept = []
    for label, url in (("Upstream", metadata.upstream), ("Source", metadata.source)):
        if not url:
            continue
        parts = urlsplit(url)
        odd = any(c.isspace() or ord(c) < 32 for c in url)
        if parts.scheme in ("http", "https") and parts.hostname and not odd:
            kept.append((label, url))
        else:
            notes.append(
                f"warning: metadata.json {label.lower()!r} {url[:80]!r} is not an http(s) URL: "
                "left out of the wheel's Project-URL"
            )
    return tuple(kept)


def _screen_depends(metadata: KernelMetadata, folder: str) -> None:
    """python-depends become Requires-Dist: a direct reference (``x @ file:///…``, ``x @
    https://…``) would make pip fetch whatever the repo names, unhashed; refused."""
    for dep in metadata.python_depends:
        requirement = Requirement(dep)  # metadata.py has parsed each
        if requirement.url is not None:
            raise Unconvertible(
                f"{folder}/{METADATA_JSON}: python-depends has {dep!r}, a direct reference "
                f"({requirement.url[:80]}): a wheel's requirements name PyPI packages only; "
                "refused"
            )


def prepare_wheel(
    variant: Variant,
    files: Sequence[RepoFile],
    reader: FileReader,
    *,
    repo_name: str,
    resolution: Resolution,
    where: str,
    style: LocalVersionStyle = LocalVersionStyle.DOTTED,
    name: str | None = None,
) -> PreparedWheel:
    """One variant read, verified (a HubError) and laid out (else :class:`Unconvertible`)."""
    folder = f"{where}: {BUILD_DIR}/{variant.name}"
    for file in files:
        try:
            file.inner.encode("utf-8")
        except UnicodeEncodeError:
            # A wheel's RECORD and zip names are UTF-8 (PEP 427): such a name cannot be written.
            shown = file.inner.encode("utf-8", "backslashreplace").decode("ascii", "replace")
            raise Unconvertible(
                f"{folder}: the file name {shown!r} is not UTF-8; a wheel cannot hold it "
                "(rename the file in the repo)"
            ) from None
    by_inner = {f.inner: f for f in files}
    notes: list[str] = []
    metadata: KernelMetadata | None = None
    kept: dict[str, bytes] = {}  # metadata.json and its signature, for .dist-info/hub/
    if METADATA_JSON in by_inner:
        data, _ = _read(reader, by_inner[METADATA_JSON], where)
        try:
            metadata = KernelMetadata.parse(data, where=f"{folder}/{METADATA_JSON}")
        except HubError as exc:
            raise Unconvertible(str(exc)) from None
        if metadata.provenance and DEV_BUILD_MARK in metadata.provenance.builder_version:
            raise Unconvertible(
                f"{folder}: a 'kernelwheel dev' build, not a release: wheels come from "
                "'kernelwheel build' (or its --hub-layout)"
            )
        _screen_depends(metadata, folder)
        kept[f"{HUB_DIST_INFO}/{METADATA_JSON}"] = data
    if name is not None:  # --name: above metadata.json, the content and the repo name
        metadata = dataclasses.replace(metadata or KernelMetadata(), name=name)
    try:
        layout = plan(sorted(by_inner), metadata=metadata, repo_name=repo_name, where=folder)
    except HubError as exc:
        raise Unconvertible(str(exc)) from None
    read = {arc: _read(reader, by_inner[inner], where) for inner, arc in layout.files}
    contents = {arc: data for arc, (data, _) in read.items()}
    if metadata is not None and metadata.digest is not None:
        for inner, arc in layout.files:
            if (problem := metadata.digest.problem(inner, contents[arc])) is not None:
                raise Unconvertible(
                    f"{folder}: {problem}: the folder does not hold the files the kernel was "
                    "built with"
                )
    if METADATA_SIGSTORE in by_inner and kept:
        signature, _ = _read(reader, by_inner[METADATA_SIGSTORE], where)
        kept[f"{HUB_DIST_INFO}/{METADATA_SIGSTORE}"] = signature
    if metadata is not None and metadata.kernel_depends:
        kernels = ", ".join(d.describe() for d in metadata.kernel_depends)
        notes.append(f"needs the Hub kernels {kernels}: no wheel requirement can say so")

    dist = dist_name(metadata, repo_name, layout.package)
    if (shadowed := shadowing(dist, layout.package)) is not None:
        raise Unconvertible(
            f"{folder}: the wheel {dist} (package {layout.package}/) would shadow {shadowed}; "
            "refused (pass --name NAME to give it a name of its own)"
        )
    if canonicalize_name(dist) != canonicalize_name(layout.package) and name_warning(
        layout.package, layout.package
    ):
        raise Unconvertible(
            f"{folder}: the package {layout.package}/ is the import name of a well-known PyPI "
            f"distribution: a wheel named {dist} holding it would write over that "
            "distribution's files; refused (convert it under its own name, or have the kernel's "
            "package renamed in the Hub repo)"
        )
    if (warning := name_warning(dist, layout.package)) is not None:
        notes.append(
            f"warning: {warning}; the package folder keeps its name, so installing this wheel "
            "replaces that distribution (have the kernel's package renamed in the Hub repo)"
        )
    version = f"{_base_version(resolution, metadata, notes)}+{variant.local_version_in(style)}"
    try:
        if guard_files(contents, layout.package, dist, version, variant):
            notes.append("import guard added")
    except UnreadableInit as exc:
        raise Unconvertible(f"{folder}: {exc}") from None
    depends = _pypi_requirements(metadata.python_depends, variant) if metadata else ()
    if metadata and (odd := license_warning(metadata.license)) is not None:
        notes.append(f"warning: {METADATA_JSON} {odd}")
    spec = WheelSpec(
        name=dist,
        version=version,
        tag=wheel_tag(variant),
        files=contents,
        requires_dist=_merge(framework_requirements(variant), depends),
        requires_python=REQUIRES_PYTHON,
        summary=(metadata.summary if metadata else None)
        or f"{dist} PyTorch kernel ({variant.name}) from {repo_name} at commit "
        f"{resolution.commit[:12]}, converted by kernelwheel",
        license=metadata.license if metadata else None,
        project_urls=_project_urls(metadata, notes),
        dist_info_files=kept,
        executables=frozenset(a for a in contents if a.endswith(_NATIVE_SUFFIXES)),
        # Each file was hashed to verify it: RECORD reuses the digests of the bytes left as read
        # (not those the guard rewrote).
        sha256={arc: digest for arc, (data, digest) in read.items() if contents[arc] is data},
    )
    return PreparedWheel(spec, layout, tuple(notes), metadata)


def _merge(framework: tuple[str, ...], depends: tuple[str, ...]) -> tuple[str, ...]:
    """The framework's requirements, then the depends that add something: a bare
    ``apache-tvm-ffi`` (python-depends ``tvm-ffi``) adds nothing to the series requirement."""
    named = {canonicalize_name(Requirement(r).name) for r in framework}
    extra = []
    for dep in depends:
        req = Requirement(dep)
        if canonicalize_name(req.name) in named and not req.specifier and req.marker is None:
            continue
        extra.append(dep)
    return tuple(dict.fromkeys((*framework, *extra)))


class Unconvertible(Exception):
    """A variant folder that cannot become a wheel (the message says why); other variants go on."""


def _pypi_requirements(names: tuple[str, ...], variant: Variant) -> tuple[str, ...]:
    """metadata.json's python-depends in kernel-builder's names (``tvm-ffi``, ``onednn``) as the
    PyPI requirements they stand for; anything else is already a requirement."""
    table = load_python_depends()
    backend = variant.backend.kind.value if variant.backend is not None else None
    found: list[str] = []
    own = table.names_for(backend) if backend else ()
    for name in names:
        mapped = table.requirements(name, backend if name in own else None)
        found += [r for r in (mapped or (name,)) if r not in found]
    return tuple(found)
