"""Reading wheels back: the dist-info folder, METADATA, and the whole wheel with RECORD verified.

One reader for every stage that looks inside a wheel (Hub export, index, lock files, repair).
"""

from __future__ import annotations

import base64
import hashlib
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
from .record import Row, parse_record, record_hash

__all__ = [
    "IntegrityProblem",
    "bomb_cause",
    "WheelContents",
    "dist_info_dir",
    "escape_name",
    "integrity_problems",
    "is_symlink_entry",
    "metadata_member",
    "parse_metadata",
    "read_metadata",
    "read_record",
    "read_wheel",
    "verify_wheel",
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


def read_record(path: Path) -> list[Row]:
    """The rows of the wheel's RECORD, as stored (:func:`verify_wheel` checks them)."""
    try:
        with zipfile.ZipFile(path) as zf:
            member = metadata_member(zf, path).replace("/METADATA", "/RECORD")
            data = zf.read(member)
    except KeyError:
        raise WheelError(f"{path}: the wheel has no RECORD", hint="rebuild the wheel") from None
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError) as exc:
        raise WheelError(f"{path}: cannot read the wheel ({exc})") from None
    return parse_record(data, where=str(path))


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


# Zip bombs: a member is refused unread when it would unpack to more than MAX_RATIO times its
# compressed size (deflate reaches ~1000:1 on zeros; code, objects and CUDA fatbins stay well
# under 20:1) once past RATIO_FLOOR, or when the wheel would unpack to more than MAX_TOTAL.
# zipfile never yields more than a member's declared size, so the declared sizes bound the work.
MAX_RATIO = 100
RATIO_FLOOR = 1 << 20
MAX_TOTAL = 16 << 30
_CHUNK = 1 << 20
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError)


def bomb_cause(info: zipfile.ZipInfo) -> str | None:
    """Why ``info`` is refused unread as a zip bomb, or None."""
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        ratio = info.file_size / max(info.compress_size, 1)
        return (
            f"would unpack {info.compress_size} bytes to {info.file_size} "
            f"({ratio:.0f}:1, over the {MAX_RATIO}:1 cap): a zip bomb, not read"
        )
    return None


def stream_hash(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[str, int]:
    """The RECORD hash and the size of a member, read in chunks (never whole in memory)."""
    digest = hashlib.sha256()
    size = 0
    with zf.open(info) as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode(), size


def _dist_info_problems(names: list[str], rebuild: str) -> list[IntegrityProblem]:
    """What pip refuses before it installs anything: not exactly one top-level ``.dist-info``
    folder, or one without METADATA or WHEEL."""
    folders = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
    if len(folders) != 1:
        cause = (
            "no .dist-info folder"
            if not folders
            else f"{len(folders)} .dist-info folders ({', '.join(folders)}): pip refuses it"
        )
        return [IntegrityProblem(folders[0] if folders else "*.dist-info", cause, rebuild)]
    out = []
    for needed in ("METADATA", "WHEEL"):
        if f"{folders[0]}/{needed}" not in names:
            out.append(
                IntegrityProblem(
                    f"{folders[0]}/{needed}", "missing: pip refuses the wheel without it", rebuild
                )
            )
    return out


def integrity_problems(zf: zipfile.ZipFile) -> list[IntegrityProblem]:
    """What pip's installer relies on, checked: one ``*.dist-info`` folder with METADATA and
    WHEEL, one ``*.dist-info/RECORD`` read as CSV, every file listed once with its hash and size
    and matching it, nothing listed that is missing, no duplicate, escaping (``../``, absolute)
    or symlink entries, no zip bomb. Members are hashed streamed; a member over the
    compression-ratio cap is refused unread. Empty when the wheel is sound."""
    rebuild = "rebuild or re-convert the wheel; do not edit wheels by hand"
    out: list[IntegrityProblem] = []
    infos = [i for i in zf.infolist() if not i.is_dir()]
    counts: dict[str, int] = {}
    for info in infos:
        counts[info.filename] = counts.get(info.filename, 0) + 1
    for name, n in counts.items():
        if n > 1:
            out.append(IntegrityProblem(name, f"appears {n} times in the archive", rebuild))
    bombs: dict[str, str] = {}
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
        cause = bomb_cause(info)
        if cause is not None:
            bombs[info.filename] = cause
            out.append(IntegrityProblem(info.filename, cause, rebuild))
    total = sum(i.file_size for i in infos)
    if total > MAX_TOTAL:
        out.append(
            IntegrityProblem(
                "*", f"would unpack to {total} bytes, over the {MAX_TOTAL}-byte cap", rebuild
            )
        )
        return out
    out += _dist_info_problems(list(counts), rebuild)
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
    if record in bombs:
        return out
    try:
        rows = parse_record(zf.read(record), where=record)
    except WheelError as exc:
        out.append(IntegrityProblem(record, exc.message, rebuild))
        return out
    except _UNREADABLE as exc:
        out.append(IntegrityProblem(record, f"cannot be decompressed ({exc})", rebuild))
        return out
    by_name = {i.filename: i for i in infos}
    listed: dict[str, int] = {}
    for path, digest, size in rows:
        listed[path] = listed.get(path, 0) + 1
        if listed[path] == 2:
            times = sum(1 for r in rows if r[0] == path)
            out.append(IntegrityProblem(path, f"listed {times} times in RECORD", rebuild))
        if path == record or path in bombs or listed[path] > 1:
            continue
        if path not in counts:
            out.append(IntegrityProblem(path, "listed in RECORD but not in the wheel", rebuild))
            continue
        if not digest.startswith("sha256="):
            out.append(IntegrityProblem(path, f"RECORD gives no sha256 hash ({digest!r})", rebuild))
            continue
        try:
            actual, length = stream_hash(zf, by_name[path])
        except _UNREADABLE as exc:
            out.append(IntegrityProblem(path, f"cannot be decompressed ({exc})", rebuild))
            continue
        if actual != digest:
            out.append(IntegrityProblem(path, "does not match its RECORD hash", rebuild))
        elif size and size != str(length):
            out.append(IntegrityProblem(path, f"is {length} bytes, RECORD says {size}", rebuild))
    for name in counts:
        if name not in listed:
            out.append(IntegrityProblem(name, "not listed in RECORD", rebuild))
    return out


def verify_wheel(path: Path) -> None:
    """Raise WheelError naming every integrity problem of the wheel at ``path`` (the record
    rule, streamed and ratio-capped); what ``install`` and ``index`` run before trusting it."""
    try:
        with zipfile.ZipFile(path) as zf:
            problems = integrity_problems(zf)
    except FileNotFoundError:
        raise WheelError(f"{path}: no such wheel", hint="check the path") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise WheelError(
            f"{path}: not a readable zip archive ({exc})", hint="rebuild or download it again"
        ) from None
    if problems:
        shown = "\n".join(f"  {p.subject}: {p.cause}" for p in problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise WheelError(
            f"{path.name} fails the record rule (what pip relies on but does not check):\n"
            f"{shown}{more}",
            hint=f"{problems[0].fix}; `kernelwheel check {path.name}` lists every problem",
        )
