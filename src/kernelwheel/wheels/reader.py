"""Reading wheels back: the dist-info folder, METADATA, and the whole wheel with RECORD verified.

One reader for every stage that looks inside a wheel (Hub export, index, lock files, repair).
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from email.policy import compat32
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import WheelError
from .record import parse_record, record_hash

__all__ = [
    "IntegrityProblem",
    "WheelContents",
    "dist_info_dir",
    "escape_name",
    "integrity_problems",
    "is_symlink_entry",
    "metadata_member",
    "parse_metadata",
    "read_metadata",
    "read_wheel",
]


def escape_name(name: str) -> str:
    """The distribution name as it appears in file names (PEP 427, normalised)."""
    return canonicalize_name(name).replace("-", "_")


def dist_info_dir(name: str, version: str) -> str:
    return f"{escape_name(name)}-{Version(version)}.dist-info"


def metadata_member(zf: zipfile.ZipFile, where: object) -> str:
    """The archive path of the one top-level ``*.dist-info/METADATA``."""
    found = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(found) != 1:
        raise WheelError(f"{where}: expected one *.dist-info/METADATA, found {found}")
    return found[0]


def parse_metadata(data: bytes) -> Message:
    return Parser(policy=compat32).parsestr(data.decode("utf-8", "replace"))


def read_metadata(path: Path) -> bytes:
    """The METADATA file of the wheel at ``path``, as stored."""
    try:
        with zipfile.ZipFile(path) as zf:
            return zf.read(metadata_member(zf, path))
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError) as exc:
        raise WheelError(f"{path}: cannot read the wheel ({exc})") from None


@dataclass(frozen=True)
class WheelContents:
    """A wheel read back: its name parts, metadata headers and files (RECORD verified)."""

    path: Path
    name: str
    version: Version
    tags: frozenset[Tag]
    metadata: Message
    files: Mapping[str, bytes]


def read_wheel(path: Path) -> WheelContents:
    """Read a wheel and verify every RECORD hash; raises WheelError naming the bad entry."""
    try:
        name, version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise WheelError(f"{path}: {exc}") from None
    try:
        with zipfile.ZipFile(path) as zf:
            files = {info.filename: zf.read(info) for info in zf.infolist() if not info.is_dir()}
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise WheelError(f"{path}: cannot read wheel: {exc}") from None
    dist_info = dist_info_dir(name, str(version))
    record = files.get(f"{dist_info}/RECORD")
    if record is None:
        raise WheelError(f"{path}: missing {dist_info}/RECORD")
    listed: set[str] = set()
    for arcname, digest, _size in parse_record(record, where=str(path)):
        listed.add(arcname)
        if arcname.endswith("/RECORD"):
            continue
        if arcname not in files:
            raise WheelError(f"{path}: RECORD lists {arcname} but the wheel lacks it")
        if record_hash(files[arcname]) != digest:
            raise WheelError(f"{path}: {arcname} does not match its RECORD hash")
    unlisted = sorted(set(files) - listed)
    if unlisted:
        raise WheelError(f"{path}: files missing from RECORD: {', '.join(unlisted)}")
    metadata = parse_metadata(files[f"{dist_info}/METADATA"])
    return WheelContents(path, str(name), version, frozenset(tags), metadata, files)


_SYMLINK = 0o120000


def is_symlink_entry(info: zipfile.ZipInfo) -> bool:
    """A zip entry that unpacks as a symbolic link (its mode, on Unix-made archives)."""
    return (info.external_attr >> 16) & 0o170000 == _SYMLINK


def _unsafe(name: str) -> bool:
    parts = name.split("/")
    return not name or name.startswith("/") or "\\" in name or ".." in parts or ":" in parts[0]


@dataclass(frozen=True)
class IntegrityProblem:
    subject: str  # the archive path (or RECORD)
    cause: str
    fix: str


def integrity_problems(zf: zipfile.ZipFile) -> list[IntegrityProblem]:
    """What pip's installer relies on, checked: one ``*.dist-info/RECORD`` read as CSV, every
    file listed once with its hash and size and matching it, nothing listed that is missing, no
    duplicate, escaping (``../``, absolute) or symlink entries. Empty when the wheel is sound."""
    rebuild = "rebuild or re-convert the wheel; do not edit wheels by hand"
    out: list[IntegrityProblem] = []
    infos = [i for i in zf.infolist() if not i.is_dir()]
    counts: dict[str, int] = {}
    for info in infos:
        counts[info.filename] = counts.get(info.filename, 0) + 1
    for name, n in counts.items():
        if n > 1:
            out.append(IntegrityProblem(name, f"appears {n} times in the archive", rebuild))
    for info in infos:
        if _unsafe(info.filename):
            out.append(
                IntegrityProblem(
                    info.filename, "escapes the install folder (absolute or '..' path)", rebuild
                )
            )
        if is_symlink_entry(info):
            out.append(
                IntegrityProblem(
                    info.filename,
                    "is a symlink entry (pip writes it as a regular file holding the target)",
                    "ship the file itself instead of a link",
                )
            )
    records = [n for n in counts if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        subject = records[0] if records else "*.dist-info/RECORD"
        dist = [n.split("/")[0] for n in counts if n.count("/") == 1 and ".dist-info/" in n]
        if not records and dist:
            subject = f"{sorted(dist)[0]}/RECORD"
        cause = "missing" if not records else f"{len(records)} RECORD files: {records}"
        out.append(IntegrityProblem(subject, cause, rebuild))
        return out
    record = records[0]
    try:
        rows = parse_record(zf.read(record), where=record)
    except WheelError as exc:
        out.append(IntegrityProblem(record, exc.message, rebuild))
        return out
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        out.append(IntegrityProblem(record, f"cannot be decompressed ({exc})", rebuild))
        return out
    listed: dict[str, int] = {}
    for path, digest, size in rows:
        listed[path] = listed.get(path, 0) + 1
        if listed[path] == 2:
            times = sum(1 for r in rows if r[0] == path)
            out.append(IntegrityProblem(path, f"listed {times} times in RECORD", rebuild))
        if path == record:
            continue
        if path not in counts:
            out.append(IntegrityProblem(path, "listed in RECORD but not in the wheel", rebuild))
            continue
        if not digest.startswith("sha256="):
            out.append(
                IntegrityProblem(path, f"RECORD gives no sha256 hash ({digest!r})", rebuild)
            )
            continue
        try:
            data = zf.read(path)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            out.append(IntegrityProblem(path, f"cannot be decompressed ({exc})", rebuild))
            continue
        if record_hash(data) != digest:
            out.append(IntegrityProblem(path, "does not match its RECORD hash", rebuild))
        elif size and size != str(len(data)):
            out.append(
                IntegrityProblem(path, f"is {len(data)} bytes, RECORD says {size}", rebuild)
            )
    for name in counts:
        if name not in listed:
            out.append(IntegrityProblem(name, "not listed in RECORD", rebuild))
    return out
