"""Safety checks on what a repo hands us: file names and content hashes (docs/to-wheel.md,
"Safety"). An LFS file listed with only its blob id is still checked: a pointer is a git blob,
rebuilt from the content's SHA-256 and size and hashed like git does."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..errors import HubError

LFS_SPEC = "https://git-lfs.github.com/spec/v1"
_LFS_MAX_POINTER = 1024
_LFS_OID = re.compile(r"[0-9a-f]{64}")
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\:]")


@dataclass(frozen=True)
class Announced:
    """What a source says a file is: its git blob id and, for LFS files, SHA-256 and size."""

    size: int | None = None
    blob_id: str | None = None
    lfs_sha256: str | None = None


@dataclass(frozen=True)
class LfsPointer:
    oid: str  # sha256 hex
    size: int

    @classmethod
    def parse(cls, data: bytes) -> LfsPointer | None:
        """The pointer a blob holds, or None when the blob is ordinary content."""
        if len(data) > _LFS_MAX_POINTER or not data.startswith(b"version " + LFS_SPEC.encode()):
            return None
        lines = data.decode("utf-8", "replace").splitlines()
        fields = {key: value.strip() for key, _, value in (line.partition(" ") for line in lines)}
        oid = fields.get("oid", "").removeprefix("sha256:")
        size = fields.get("size", "")
        if not _LFS_OID.fullmatch(oid) or not size.isdigit():
            return None
        return cls(oid, int(size))

    def encode(self) -> bytes:
        return f"version {LFS_SPEC}\noid sha256:{self.oid}\nsize {self.size}\n".encode()


def git_blob_id(data: bytes) -> str:
    """The id git gives a blob holding ``data``."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def check_repo_path(path: str, *, where: str) -> None:
    """Refuse a repo file name that could escape a folder or mean something else on another OS."""
    if (
        not path
        or path.startswith("/")
        or any(part in ("", ".", "..") for part in path.split("/"))
        or _BAD_CHARS.search(path) is not None
    ):
        raise HubError(
            f"{where}: refusing file name {path!r}: it could escape the package folder",
            hint="file names must be relative, with no '..', '.', empty parts, backslashes, "
            "colons or control characters; fix the repo (or use another revision)",
        )


def verify(path: str, data: bytes, announced: Announced, *, where: str) -> str:
    """Refuse ``data`` unless it matches what the source announced for ``path``. Returns the
    hex SHA-256 of ``data`` (computed anyway; the wheel's RECORD reuses it)."""
    if announced.blob_id is None and announced.lfs_sha256 is None:
        raise HubError(
            f"{where}: {path}: the source announced no hash for this file, so it cannot be "
            "verified",
            hint="re-download online (a listing with hashes is cached for offline use)",
        )
    sha256 = hashlib.sha256(data).hexdigest()
    if announced.lfs_sha256 is not None:
        if sha256 != announced.lfs_sha256.lower() or (
            announced.size is not None and announced.size != len(data)
        ):
            raise _mismatch(
                path,
                where,
                f"sha256 {sha256} ({len(data)} bytes), but the source announced sha256 "
                f"{announced.lfs_sha256}"
                + (f" ({announced.size} bytes)" if announced.size is not None else ""),
            )
        return sha256
    assert announced.blob_id is not None
    blob = announced.blob_id.lower()
    if git_blob_id(data) == blob or git_blob_id(LfsPointer(sha256, len(data)).encode()) == blob:
        return sha256
    raise _mismatch(
        path,
        where,
        f"sha256 {sha256} ({len(data)} bytes), matching neither the announced git blob "
        f"{announced.blob_id} nor an LFS pointer with that blob id",
    )


def _mismatch(path: str, where: str, detail: str) -> HubError:
    return HubError(
        f"{where}: {path}: content does not match what the source announced: {detail}",
        hint="the download or the cache is corrupt or was tampered with; delete the cached copy "
        "(HF_HUB_CACHE) or re-fetch the clone's LFS objects, then retry; nothing was written",
    )
