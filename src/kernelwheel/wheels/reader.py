"""Reading wheels back: the dist-info folder, METADATA, and the whole wheel with RECORD verified.

One reader for every stage that looks inside a wheel (Hub export, index, lock files, repair).
"""

from __future__ import annotations

import zipfile
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
    "WheelContents",
    "dist_info_dir",
    "escape_name",
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
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
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
    except (OSError, zipfile.BadZipFile) as exc:
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
