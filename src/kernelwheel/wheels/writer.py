"""Reproducible wheel writing (PEP 427 / PEP 491 layout, core metadata 2.1).

Entries are sorted, timestamps come from SOURCE_DATE_EPOCH (or a fixed 1980 default) and
permissions are normalised, so the same inputs give byte-identical wheels. The file appears in
the output folder only once complete (written beside it, then renamed).
"""

from __future__ import annotations

import base64
import os
import re
import time
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from email.policy import compat32
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.version import InvalidVersion, Version

from .. import __version__
from .._util import staged_file
from ..errors import WheelError
from .reader import dist_info_dir, escape_name
from .record import format_record, record_hash

_DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip can hold
_NAME_RE = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)


@dataclass(frozen=True)
class WheelSpec:
    """Everything a wheel contains. ``files`` maps archive paths to their bytes."""

    name: str
    version: str
    tag: Tag
    files: Mapping[str, bytes]
    requires_dist: Sequence[str] = ()
    requires_python: str | None = None
    summary: str | None = None
    license: str | None = None
    executables: frozenset[str] = field(default_factory=frozenset)  # archive paths, mode 0755
    # Hex SHA-256 digests the caller already computed of some files' bytes (archive path ->
    # digest), so RECORD does not hash them again; it hashes every other file.
    sha256: Mapping[str, str] = field(default_factory=dict)


def wheel_filename(name: str, version: str, tag: Tag) -> str:
    return f"{escape_name(name)}-{Version(version)}-{tag.interpreter}-{tag.abi}-{tag.platform}.whl"


def _validate(spec: WheelSpec) -> None:
    if not _NAME_RE.match(spec.name):
        raise WheelError(
            f"invalid distribution name {spec.name!r}",
            hint="use letters, digits, '-', '_' and '.', starting and ending with a letter "
            "or digit",
        )
    try:
        Version(spec.version)
    except InvalidVersion:
        raise WheelError(
            f"invalid version {spec.version!r} for {spec.name}",
            hint="use a PEP 440 version such as 1.2.0 or 1.2.0+torch2.14.cu130.cxx11",
        ) from None
    for req in spec.requires_dist:
        try:
            Requirement(req)
        except InvalidRequirement as exc:
            raise WheelError(f"invalid requirement {req!r}: {exc}") from None
    if spec.requires_python is not None:
        try:
            SpecifierSet(spec.requires_python)
        except InvalidSpecifier:
            raise WheelError(f"invalid Requires-Python {spec.requires_python!r}") from None
    for arcname in spec.files:
        p = PurePosixPath(arcname)
        if p.is_absolute() or ".." in p.parts or "\\" in arcname or not arcname:
            raise WheelError(f"refusing archive path {arcname!r}: it escapes the wheel root")
        if p.parts[0].endswith(".dist-info"):
            raise WheelError(f"archive path {arcname!r} would overwrite generated metadata")


def metadata_text(spec: WheelSpec) -> str:
    msg = Message(policy=compat32)
    msg["Metadata-Version"] = "2.1"
    msg["Name"] = spec.name
    msg["Version"] = str(Version(spec.version))
    if spec.summary:
        msg["Summary"] = " ".join(spec.summary.split())
    if spec.license:
        msg["License"] = " ".join(spec.license.split())
    if spec.requires_python:
        msg["Requires-Python"] = spec.requires_python
    for req in spec.requires_dist:
        msg["Requires-Dist"] = str(Requirement(req))
    return msg.as_string()


def wheel_text(tag: Tag) -> str:
    return (
        "Wheel-Version: 1.0\n"
        f"Generator: kernelwheel {__version__}\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )


def source_date_epoch() -> int:
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None:
        return _DEFAULT_EPOCH
    try:
        value = int(raw)
    except ValueError:
        raise WheelError(
            f"SOURCE_DATE_EPOCH={raw!r} is not an integer", hint="unset it or give seconds"
        ) from None
    return max(value, _DEFAULT_EPOCH)


_WINDOW = 4096  # bytes per sampled window
_WINDOWS = 16  # windows spread evenly over a member: 64 KiB sampled at most


def _compressible(data: bytes) -> bool:
    """Whether deflate pays: compressed CUDA fatbins barely shrink and cost seconds to deflate.
    Decided on a sample of evenly spread windows (so a fatbin section in the middle of an object
    counts in proportion to its size), deterministically, so the same bytes are always stored the
    same way. The sample costs about a millisecond whatever the member's size."""
    if len(data) < _WINDOW:
        return True
    if len(data) <= _WINDOW * _WINDOWS:
        sample = data
    else:
        step = (len(data) - _WINDOW) // (_WINDOWS - 1)
        sample = b"".join(data[i * step : i * step + _WINDOW] for i in range(_WINDOWS))
    return len(zlib.compress(sample, 1)) < 0.9 * len(sample)


def _zipinfo(
    arcname: str, date_time: tuple[int, int, int, int, int, int], mode: int, compress: bool
) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(arcname, date_time=date_time)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    info.create_system = 3  # unix, so the mode bits are honoured on install
    return info


def _record_digest(hexdigest: str | None) -> str | None:
    if hexdigest is None:
        return None
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hexdigest)).rstrip(b"=").decode()


def write_wheel(spec: WheelSpec, out_dir: Path, *, compress: bool = True) -> Path:
    """Write the wheel into out_dir atomically and return its path.

    ``compress=False`` stores every member: for an intermediate wheel that auditwheel unpacks and
    zips again anyway (deflating a multi-megabyte object twice costs a tenth of a second or more
    per build)."""
    _validate(spec)
    dist_info = dist_info_dir(spec.name, spec.version)
    entries: list[tuple[str, bytes]] = sorted(spec.files.items())
    entries.append((f"{dist_info}/METADATA", metadata_text(spec).encode()))
    entries.append((f"{dist_info}/WHEEL", wheel_text(spec.tag).encode()))
    record_name = f"{dist_info}/RECORD"
    rows = [
        (name, _record_digest(spec.sha256.get(name)) or record_hash(data), str(len(data)))
        for name, data in entries
    ]
    entries.append((record_name, format_record([*rows, (record_name, "", "")])))

    date_time = time.gmtime(source_date_epoch())[:6]
    final = out_dir / wheel_filename(spec.name, spec.version, spec.tag)
    try:
        with staged_file(final) as tmp, zipfile.ZipFile(tmp, "w") as zf:
            for name, data in entries:
                mode = 0o755 if name in spec.executables else 0o644
                zf.writestr(_zipinfo(name, date_time, mode, compress and _compressible(data)), data)
    except OSError as exc:  # e.g. a name the file system refuses (ENAMETOOLONG), a full disk
        raise WheelError(
            f"cannot write {final.name} into {out_dir}: {exc.strerror or exc}",
            hint="shorten the name or version" if len(final.name) > 255 else "check the folder",
        ) from None
    return final
