"""A Hub layout as ``kernelwheel upload`` reads it: only what a build writes, each part checked
before anything is pushed (docs/upload.md lists the checks). Nothing but a regular file is ever
opened (a FIFO would block forever), and each file is read once, in chunks, for every hash."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..abi.linkage import GpuLinkage, NotElfError, read_linkage
from ..errors import HubError, UsageError, VariantError
from ..model.variant import OS, Backend, BackendKind, Variant
from .export import CARD
from .metadata import DEV_BUILD_MARK, METADATA_JSON, METADATA_SIGSTORE, KernelMetadata
from .safety import check_repo_path
from .source import BUILD_DIR

CHUNK = 1 << 20
# Without a digest, what a build writes into a variant folder: the package's Python files and
# compiled extensions, beside metadata.json and its signature.
_BUILD_SUFFIXES = (".py", ".pyi", ".so", ".pyd", ".dylib")
_BUILD_NAMES = (METADATA_JSON, METADATA_SIGSTORE, "py.typed")
_COMPILED = (".so", ".pyd", ".dylib")
_REBUILD = "rebuild the variant with 'kernelwheel build --hub-layout DIR'"
_KINDS = {
    stat.S_IFLNK: "a symlink",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


@dataclass(frozen=True)
class LayoutFile:
    """One file to push, as it was read: its size and hashes."""

    path: Path
    size: int
    sha256: str  # hex: an LFS file's oid
    blob_id: str  # the git blob id: a regular file's id in the repo


@dataclass(frozen=True)
class Layout:
    """A Hub layout on disk: repo path -> file; the project and major its variants agree on."""

    files: dict[str, LayoutFile]
    variants: tuple[str, ...]
    major: int
    name: str


def read_layout(folder: Path, version: int | None = None) -> Layout:
    """The checked files of the Hub layout ``folder`` (the module's docstring); ``version``
    may state the variants' metadata.json version but not change it."""
    build = folder / BUILD_DIR
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder", hint="pass the folder of a Hub layout")
    if not _lstat_is(build, stat.S_ISDIR):
        raise UsageError(
            f"{folder}: no {BUILD_DIR}/ folder: not a Hub layout",
            hint="pass the folder 'kernelwheel build --hub-layout DIR' wrote",
        )
    entries = _walk(build, folder)
    with os.scandir(build) as found:  # an empty variant folder holds no file to list
        empty = {e.name for e in found if e.is_dir(follow_symlinks=False)}
    names = sorted({path.relative_to(build).parts[0] for path in entries} | empty)
    if not names:
        raise UsageError(
            f"{build}: holds no variant folders",
            hint="build some variants with 'kernelwheel build --hub-layout DIR' first",
        )
    folders = [_VariantFolder.open(build, name) for name in names]
    _one_project(folder, folders, version)
    files: dict[str, LayoutFile] = {}
    for one in folders:
        inner = [p for p in entries if p.relative_to(build).parts[0] == one.name]
        files.update(one.read(inner, folder))
    card = folder / CARD
    if _lstat_is(card, stat.S_ISREG):
        files[CARD] = _hash(card)[0]
    return Layout(files, tuple(names), folders[0].major, folders[0].meta_name)


def _lstat_is(path: Path, test: Callable[[int], bool]) -> bool:
    """Whether ``path`` itself (a link not followed) passes ``test`` (``stat.S_ISDIR``...)."""
    try:
        return test(path.lstat().st_mode)
    except OSError:
        return False


def _walk(root: Path, layout: Path) -> list[Path]:
    """The regular files under ``root``, sorted, bytecode left out; anything else refused."""
    out: list[Path] = []
    with os.scandir(root) as found:
        entries = sorted(found, key=lambda e: e.name)
    for entry in entries:
        path = Path(entry.path)
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(entry.name).decode("ascii", "backslashreplace")
            raise UsageError(
                f"{_shown(root)}: the file name '{shown}' is not UTF-8",
                hint="rename or remove it: Hub paths are UTF-8, and a build writes none such; "
                + _REBUILD,
            ) from None
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            if entry.name != "__pycache__":
                out += _walk(path, layout)
        elif stat.S_ISREG(mode):
            if path.suffix not in (".pyc", ".pyo"):
                out.append(path)
        else:
            raise _not_a_file(path, mode, layout)
    return out


def _shown(path: Path) -> str:
    """``path`` printable whatever its bytes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _not_a_file(path: Path, mode: int, layout: Path) -> UsageError:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    if stat.S_ISLNK(mode):
        target = os.readlink(path)
        inside = (path.parent / target).resolve().is_relative_to(layout.resolve())
        kind += f" to {target!r}" + ("" if inside else ", outside the layout")
    return UsageError(
        f"{_shown(path)}: {kind}: a Hub layout holds regular files only, and this one is "
        "neither read nor pushed",
        hint="remove it (or replace a symlink with the file it points to); "
        "'kernelwheel build --hub-layout DIR' writes none",
    )


@dataclass(frozen=True)
class _VariantFolder:
    """One ``build/<variant>/`` folder, its name and metadata.json checked."""

    root: Path
    variant: Variant
    meta: KernelMetadata
    meta_name: str
    major: int

    @property
    def name(self) -> str:
        return self.root.name

    @classmethod
    def open(cls, build: Path, name: str) -> _VariantFolder:
        root = build / name
        if not _lstat_is(root, stat.S_ISDIR):
            raise UsageError(
                f"{root}: a file in {BUILD_DIR}/, which holds only variant folders",
                hint=f"remove it from {BUILD_DIR}/ (the kernel card README.md goes beside it)",
            )
        variant = _parse_variant(root)
        meta_path = root / METADATA_JSON
        if not _lstat_is(meta_path, stat.S_ISREG):
            raise UsageError(
                f"{meta_path}: missing: {BUILD_DIR}/{name} is not a variant kernelwheel exported",
                hint="rebuild it with 'kernelwheel build --hub-layout', or remove the folder",
            )
        meta = _read_metadata(meta_path)
        if meta.version is None or not meta.version.isdigit():
            raise UsageError(
                f"{meta_path}: 'version' is {meta.version!r}, not an integer API major",
                hint=_REBUILD,
            )
        if meta.provenance is not None and DEV_BUILD_MARK in meta.provenance.builder_version:
            raise UsageError(
                f"{meta_path}: {BUILD_DIR}/{name} is a 'kernelwheel dev' build, not a release",
                hint="publish what 'kernelwheel build --hub-layout DIR' writes",
            )
        for key, value, what in (
            ("name", meta.name, "which project it belongs to"),
            ("backend", meta.backend, "which backend it is built for"),
        ):
            if value is None and (key == "name" or variant.backend is not None):
                raise UsageError(
                    f"{meta_path}: no {key!r}: {what} is unknown, so {BUILD_DIR}/{name} cannot "
                    "be checked",
                    hint=_REBUILD + f" (it writes the {key})",
                )
        _check_backend(meta_path, variant, meta)
        assert meta.name is not None
        return cls(root, variant, meta, meta.name, int(meta.version))

    def read(self, paths: list[Path], layout: Path) -> dict[str, LayoutFile]:
        """The folder's files, allow-listed, extensions checked, hashed once against the digest."""
        inner = {p.relative_to(self.root).as_posix(): p for p in paths}
        for rel, path in inner.items():
            check_repo_path(path.relative_to(layout).as_posix(), where=str(layout))
            self._allowed(rel, path)
        self._check_extensions(inner)
        algorithm = self.meta.digest.algorithm if self.meta.digest else None
        files: dict[str, LayoutFile] = {}
        hashes: dict[str, str] = {}
        for rel, path in inner.items():
            files[path.relative_to(layout).as_posix()], digest = _hash(path, algorithm)
            if digest is not None:
                hashes[rel] = digest
        if self.meta.digest is not None and (problems := self.meta.digest.mismatches(hashes)):
            raise UsageError(
                f"{self.root / METADATA_JSON}: the folder does not match its digest: "
                + "; ".join(problems[:3])
                + (f" and {len(problems) - 3} more" if len(problems) > 3 else ""),
                hint=_REBUILD + " (kernels would refuse to load it as it is)",
            )
        return files

    def _allowed(self, rel: str, path: Path) -> None:
        """Refuse a file a build does not write."""
        parts = rel.split("/")
        listing = ""
        if any(part.startswith(".") for part in parts):
            why = (
                "a hidden file: a build writes none, and one such as .env may hold secrets; it "
                "is not pushed"
            )
        elif rel in (METADATA_JSON, METADATA_SIGSTORE):
            return
        elif self.meta.digest is not None:
            if rel in dict(self.meta.digest.files):
                return
            why = "not in metadata.json's digest: not a file the build wrote"
        elif not rel.endswith(_BUILD_SUFFIXES) and parts[-1] not in _BUILD_NAMES:
            why = (
                f"not a file a build writes (its package's {', '.join(_BUILD_SUFFIXES)} files "
                "and metadata.json)"
            )
            listing = ", which lists every file it writes in metadata.json's digest"
        else:
            return
        hint = f"remove it from {BUILD_DIR}/{self.name}/, or {_REBUILD}{listing}"
        raise UsageError(f"{path}: {why}", hint=hint)

    def _check_extensions(self, inner: dict[str, Path]) -> None:
        """The compiled files agree with the variant's backend (the module's docstring)."""
        compiled = {rel: p for rel, p in inner.items() if rel.endswith(_COMPILED)}
        variant = self.variant
        if variant.torch is None and variant.tvm_ffi is None:
            if compiled:
                raise self._mismatch(
                    f"a noarch (pure Python) variant, but holds compiled code: "
                    f"{', '.join(sorted(compiled))}"
                )
            return
        if variant.os is not OS.LINUX:
            return  # Mach-O and PE extensions: not read
        found: dict[str, GpuLinkage] = {}
        for rel, path in sorted(compiled.items()):
            try:
                found[rel] = read_linkage(path)
            except NotElfError:
                raise self._mismatch(
                    f"{rel} is not an ELF shared object, which a linux variant's extension is"
                ) from None
        assert variant.backend is not None
        self._check_runtime(variant.backend, found)

    def _mismatch(self, detail: str) -> UsageError:
        return UsageError(
            f"{self.root}: {detail}",
            hint=f"put each build in the folder its variant names ({_REBUILD}), or remove "
            "the folder",
        )

    def _check_runtime(self, backend: Backend, found: dict[str, GpuLinkage]) -> None:
        """A CUDA (ROCm) folder holds an extension built for CUDA (ROCm), of its CUDA major; any
        other folder none built for a GPU runtime."""
        kind = backend.kind
        wanted = kind.value if kind in (BackendKind.CUDA, BackendKind.ROCM) else None
        label = f"a {kind.display_name} variant"
        for rel, linkage in found.items():
            for runtime in sorted(linkage.runtimes - {wanted}):
                raise self._mismatch(
                    f"{label}, but its extension {rel} is built for "
                    f"{BackendKind(runtime).display_name} ({linkage.shown(runtime)})"
                )
        if wanted is None:
            return
        if not any(wanted in linkage.runtimes for linkage in found.values()):
            what = ", ".join(sorted(found)) or "no extension"
            gpu = kind.display_name
            raise self._mismatch(
                f"{label}, but it holds {what}, built for no GPU runtime (no {gpu} device code, "
                f"no {gpu} library needed): a CPU build under a {gpu} name"
            )
        if kind is BackendKind.CUDA and backend.version is not None:
            for rel, linkage in found.items():
                if linkage.cuda_major is not None and linkage.cuda_major != backend.version[0]:
                    raise self._mismatch(
                        f"a CUDA {backend.cuda_version} variant, but its extension {rel} "
                        f"{linkage.shown('cuda')}: a CUDA {linkage.cuda_major} build"
                    )


def _parse_variant(root: Path) -> Variant:
    try:
        variant = Variant.parse(root.name)
    except VariantError as exc:
        raise UsageError(
            f"{root}: not a variant folder: {exc.message}",
            hint=f"{BUILD_DIR}/ holds only the variant folders a build writes ({exc.hint}); "
            "remove or move it",
        ) from None
    if variant.name != root.name:
        raise UsageError(
            f"{root}: the variant is spelled {variant.name!r} on the Hub",
            hint=f"rename the folder {variant.name} ('kernels' and to-wheel look that up)",
        )
    return variant


def _read_metadata(path: Path, limit: int = 1 << 24) -> KernelMetadata:
    """metadata.json, refused past ``limit`` bytes (it is a few kB)."""
    with _open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"{path}: larger than {limit} bytes: not a metadata.json", hint=_REBUILD)
    try:
        return KernelMetadata.parse(data, where=str(path))
    except HubError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None


def _check_backend(path: Path, variant: Variant, meta: KernelMetadata) -> None:
    backend = variant.backend
    names = {backend.kind.value, backend.token} if backend is not None else {"universal"}
    stated = (meta.backend or "").lower()
    if stated in names or (backend is None and meta.backend is None):
        return
    raise UsageError(
        f"{path}: backend {meta.backend!r}, but the folder {variant.name} is a "
        f"{backend.kind.display_name if backend else 'universal'} variant",
        hint="put each build in the folder its variant names (" + _REBUILD + ")",
    )


def _one_project(folder: Path, folders: list[_VariantFolder], version: int | None) -> None:
    """One project and one version across the layout, which ``version`` may state."""
    projects = sorted({f.meta_name for f in folders})
    if len(projects) > 1:
        by = ", ".join(f"{f.name}: {f.meta_name}" for f in folders)
        raise UsageError(
            f"{folder}: the variants' metadata.json name {len(projects)} projects "
            f"({', '.join(projects)}): {by}",
            hint="one layout holds one project's variants: move the other project's folders "
            "to its own layout",
        )
    majors = sorted({f.major for f in folders})
    if len(majors) > 1:
        by = ", ".join(f"{f.name}: {f.major}" for f in folders)
        raise UsageError(
            f"{folder}: the variants' metadata.json give different versions ({by})",
            hint="one upload goes to one branch v<version>: upload each version's variants "
            "from its own layout",
        )
    if version is not None and version != majors[0]:
        raise UsageError(
            f"--version {version}, but the variants' metadata.json say version {majors[0]}",
            hint=f"drop --version (branch v{majors[0]}), or rebuild with version {version}",
        )


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened if it is a regular file: a FIFO refused unwaited, a symlink unfollowed."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        mode = path.lstat().st_mode if path.is_symlink() else 0
        if mode:
            raise _not_a_file(path, mode, path.parent) from None
        raise UsageError(
            f"{_shown(path)}: cannot be read ({exc.strerror})",
            hint="make it readable, or " + _REBUILD,
        ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_a_file(path, mode, path.parent)
    return os.fdopen(fd, "rb")


def _hash(path: Path, digest: str | None = None) -> tuple[LayoutFile, str | None]:
    """The file's size, sha256 and git blob id, and its base64 ``digest`` hash, read once in
    chunks; a file that is no longer a regular one is refused, never waited on."""
    with _open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        sha256 = hashlib.sha256()
        blob = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
        other = hashlib.new(digest) if digest is not None and digest != "sha256" else None
        hashes = [h for h in (sha256, blob, other) if h is not None]
        read = 0
        while chunk := f.read(CHUNK):
            read += len(chunk)
            for h in hashes:
                h.update(chunk)
    if read != size:
        raise UsageError(
            f"{path}: changed while it was read ({size} bytes, then {read})",
            hint="let the build finish, then rerun the upload",
        )
    hashed = other if other is not None else sha256
    return LayoutFile(path, size, sha256.hexdigest(), blob.hexdigest()), (
        base64.b64encode(hashed.digest()).decode() if digest is not None else None
    )
