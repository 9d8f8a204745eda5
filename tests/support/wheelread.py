"""Reading a wheel back whole, every RECORD hash verified: what tests check written wheels with."""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename
from packaging.version import Version

from kernelwheel.errors import WheelError
from kernelwheel.model.wheelname import parse_wheel_name
from kernelwheel.wheels.reader import dist_info_dir, parse_metadata
from kernelwheel.wheels.record import parse_record, record_hash


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
        name, version, _build, tags, _label = parse_wheel_name(path.name)
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
