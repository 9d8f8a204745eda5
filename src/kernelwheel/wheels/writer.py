"""Reproducible, atomic wheel writing (PEP 427 / PEP 491, core metadata 2.4): sorted entries,
SOURCE_DATE_EPOCH times (else 1980) and normalised modes give byte-identical wheels; the file
appears in the output folder only once complete."""

from __future__ import annotations

import difflib
import io
import os
import re
import shutil
import time
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.licenses import InvalidLicenseExpression, _spdx, canonicalize_license_expression
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import __version__
from .._util import DISK_FULL_HINT, disk_full, staged_file
from ..errors import WheelError
from .reader import TOP_LEVEL, dist_info_dir, escape_name
from .record import digest_hash, format_record, hashed_copy, parse_record, record_hash

_DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip can hold
_NAME_RE = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)


# A member's content: its bytes, or the file holding them, streamed into the archive in chunks
# (a package may hold a data file or a shared object of gigabytes: never read whole).
Member = bytes | Path


@dataclass(frozen=True)
class WheelSpec:
    """Everything a wheel contains; ``files``: archive path -> its bytes or its file."""

    name: str
    version: str
    tag: Tag
    files: Mapping[str, Member]
    requires_dist: Sequence[str] = ()
    requires_python: str | None = None
    provides_extra: Sequence[str] = ()  # extras that requires_dist entries are marked with
    summary: str | None = None
    license: str | None = None
    executables: frozenset[str] = field(default_factory=frozenset)  # archive paths, mode 0755
    # Licence files by name under .dist-info/licenses/ (e.g. "LICENSE") -> bytes.
    license_files: Mapping[str, bytes] = field(default_factory=dict)
    # ("Upstream", "https://github.com/...") -> Project-URL: Upstream, https://github.com/...
    project_urls: Sequence[tuple[str, str]] = ()
    description: str | None = None  # the long description (METADATA body)
    # Other files kept in the .dist-info folder, by path inside it (e.g. "hub/metadata.json").
    dist_info_files: Mapping[str, bytes] = field(default_factory=dict)
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
    for extra in spec.provides_extra:
        if not _NAME_RE.match(extra) or extra != canonicalize_name(extra):
            raise WheelError(
                f"invalid extra name {extra!r}", hint="use a normalized name such as 'cuda'"
            )
    if spec.requires_python is not None:
        try:
            SpecifierSet(spec.requires_python)
        except InvalidSpecifier:
            raise WheelError(f"invalid Requires-Python {spec.requires_python!r}") from None
    for arcname in spec.files:
        _check_path(arcname, "archive path")
        if PurePosixPath(arcname).parts[0].endswith(".dist-info"):
            raise WheelError(f"archive path {arcname!r} would overwrite generated metadata")
    for name in spec.license_files:
        _check_path(name, "licence file")
    for name in spec.dist_info_files:
        _check_path(name, "dist-info file")
        if name in _GENERATED or PurePosixPath(name).parts[0] == LICENSES_DIR:
            raise WheelError(f"dist-info file {name!r} would overwrite generated metadata")
    for label, url in spec.project_urls:
        if not label or not url or "," in label or any(c in label + url for c in "\r\n"):
            raise WheelError(
                f"invalid Project-URL {label!r}, {url!r}",
                hint="a label without commas and a URL, each on one line",
            )


_GENERATED = frozenset({"METADATA", "WHEEL", "RECORD", TOP_LEVEL})
LICENSES_DIR = "licenses"  # PEP 639: .dist-info/licenses/


def _check_path(name: str, what: str) -> None:
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts or "\\" in name or name.endswith("/"):
        raise WheelError(f"refusing {what} {name!r}: it escapes the wheel root")


def license_fields(license: str | None) -> tuple[str, str]:
    """The METADATA field for a licence and its value: ``License-Expression`` with the canonical
    SPDX spelling (``apache-2.0`` -> ``Apache-2.0``) when it is one, else ``License`` with the
    text as given (whitespace collapsed)."""
    text = " ".join((license or "").split())
    if text:
        try:
            return "License-Expression", str(canonicalize_license_expression(text))
        except InvalidLicenseExpression:
            pass
    return "License", text


def license_warning(license: str | None) -> str | None:
    """Why ``license`` is written as free text (``License``), with the closest SPDX ids; None
    for no licence, an SPDX expression, or the Hub's own ``other``. Not refused: real projects
    carry such strings."""
    field, text = license_fields(license)
    if field == "License-Expression" or text in ("", "other"):
        return None
    words = [w for w in text.lower().split() if w not in ("license", "licence")]
    current = [key for key, row in _spdx.LICENSES.items() if not row["deprecated"]]
    close = difflib.get_close_matches("-".join(words), current, n=3, cutoff=0.6)
    hint = (
        f"did you mean {', '.join(_spdx.LICENSES[key]['id'] for key in close)}? " if close else ""
    )
    return (
        f"license {text!r} is no SPDX licence expression: the wheels carry it as free text "
        f"(License:), which installers and indexes do not read as a licence; {hint}use an SPDX "
        "id (https://spdx.org/licenses/), or LicenseRef-<name> for one of your own"
    )


def metadata_text(spec: WheelSpec) -> str:
    """METADATA (core metadata 2.4): one ``Field: value`` line each, then the description."""
    fields: list[tuple[str, str]] = [
        ("Metadata-Version", "2.4"),
        ("Name", spec.name),
        ("Version", str(Version(spec.version))),
    ]
    if spec.summary:
        fields.append(("Summary", " ".join(spec.summary.split())))
    if spec.license and spec.license.strip():
        fields.append(license_fields(spec.license))
    fields += [("License-File", name) for name in sorted(spec.license_files)]
    fields += [("Project-URL", f"{label}, {url}") for label, url in spec.project_urls]
    if spec.requires_python:
        fields.append(("Requires-Python", spec.requires_python))
    fields += [("Provides-Extra", extra) for extra in spec.provides_extra]
    fields += [("Requires-Dist", str(Requirement(req))) for req in spec.requires_dist]
    if spec.description is not None:
        fields.append(("Description-Content-Type", "text/markdown"))
    body = "" if spec.description is None else spec.description.rstrip("\n") + "\n"
    return "".join(f"{key}: {value}\n" for key, value in fields) + "\n" + body


def top_level_text(spec: WheelSpec) -> str | None:
    """``top_level.txt`` when the wheel's top-level names are not all its distribution's
    (to-wheel ``--name relu-kernel`` of the package ``relu/``): the wheel rule then takes the
    package as the wheel's own. None (no file) otherwise, so the usual wheel is unchanged."""
    tops = sorted({PurePosixPath(name).parts[0].split(".")[0] for name in spec.files})
    if all(canonicalize_name(top) == canonicalize_name(spec.name) for top in tops):
        return None
    return "".join(f"{top}\n" for top in tops)


def wheel_text(tag: Tag) -> str:
    return (
        "Wheel-Version: 1.0\n"
        f"Generator: kernelwheel {__version__}\n"
        f"Root-Is-Purelib: {'true' if tag.platform == 'any' else 'false'}\n"
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


def _compressible(data: Member) -> bool:
    """Whether deflate pays: compressed CUDA fatbins barely shrink and cost seconds to deflate.
    Decided on a sample of evenly spread windows (so a fatbin section in the middle of an object
    counts in proportion to its size), deterministically, so the same bytes are always stored the
    same way. The sample costs about a millisecond whatever the member's size."""
    with io.BytesIO(data) if isinstance(data, bytes) else data.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        windows = [(0, size)]
        if size > _WINDOW * _WINDOWS:
            step = (size - _WINDOW) // (_WINDOWS - 1)
            windows = [(i * step, _WINDOW) for i in range(_WINDOWS)]
        parts = []
        for at, n in windows:
            fh.seek(at)
            parts.append(fh.read(n))
    sample = b"".join(parts)
    return size < _WINDOW or len(zlib.compress(sample, 1)) < 0.9 * len(sample)


def _write_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, data: Member, known: str | None
) -> tuple[str, str]:
    """Write one member; its RECORD hash (``known``: the caller's) and size, a file's hashed in
    the pass that copies it."""
    if isinstance(data, bytes):
        zf.writestr(info, data)
        return known or record_hash(data), str(len(data))
    with data.open("rb") as src:
        big = os.fstat(src.fileno()).st_size >= zipfile.ZIP64_LIMIT
        with zf.open(info, "w", force_zip64=big) as dst:
            digest, size = hashed_copy(src, dst.write)
    return known or digest_hash(digest), str(size)


def _zipinfo(
    arcname: str, date_time: tuple[int, int, int, int, int, int], mode: int, compress: bool
) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(arcname, date_time=date_time)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    info.create_system = 3  # unix, so the mode bits are honoured on install
    return info


def write_wheel(
    spec: WheelSpec, out_dir: Path, *, compress: bool = True, shown: Path | None = None
) -> Path:
    """Write the wheel into out_dir atomically and return its path; ``shown``: the folder an
    error names instead (where a wheel written into a staging folder will be published).
    ``compress=False`` stores every member: for an intermediate wheel that auditwheel unpacks and
    zips again anyway."""
    _validate(spec)
    dist_info = dist_info_dir(spec.name, spec.version)
    entries: list[tuple[str, Member]] = sorted(spec.files.items())
    entries += sorted((f"{dist_info}/{name}", data) for name, data in spec.dist_info_files.items())
    if (top_level := top_level_text(spec)) is not None:
        entries.append((f"{dist_info}/{TOP_LEVEL}", top_level.encode()))
    entries += sorted(
        (f"{dist_info}/{LICENSES_DIR}/{name}", data) for name, data in spec.license_files.items()
    )
    entries.append((f"{dist_info}/METADATA", metadata_text(spec).encode()))
    entries.append((f"{dist_info}/WHEEL", wheel_text(spec.tag).encode()))
    record_name = f"{dist_info}/RECORD"
    date_time = time.gmtime(source_date_epoch())[:6]
    final = out_dir / wheel_filename(spec.name, spec.version, spec.tag)
    try:
        with staged_file(final) as tmp, zipfile.ZipFile(tmp, "w") as zf:
            rows: list[tuple[str, str, str]] = []
            for name, data in entries:
                mode = 0o755 if name in spec.executables else 0o644
                info = _zipinfo(name, date_time, mode, compress and _compressible(data))
                hexdigest = spec.sha256.get(name)
                known = None if hexdigest is None else digest_hash(bytes.fromhex(hexdigest))
                rows.append((name, *_write_member(zf, info, data, known)))
            record = format_record([*rows, (record_name, "", "")])
            zf.writestr(
                _zipinfo(record_name, date_time, 0o644, compress and _compressible(record)), record
            )
    except OSError as exc:  # e.g. a name the file system refuses (ENAMETOOLONG), a full disk
        hint = DISK_FULL_HINT if disk_full(exc) else "check the folder"
        raise WheelError(
            f"cannot write {final.name} into {shown or out_dir}: {exc.strerror or exc}",
            hint="shorten the name or version" if len(final.name) > 255 else hint,
        ) from None
    return final


def _copied_info(info: zipfile.ZipInfo, arcname: str) -> zipfile.ZipInfo:
    """A new entry for ``info``'s member under ``arcname``, with its time, mode, compression
    and origin (a fresh object: the source's offsets stay valid for reading it)."""
    out = zipfile.ZipInfo(arcname, info.date_time)
    out.compress_type = info.compress_type
    out.external_attr = info.external_attr
    out.create_system = info.create_system
    out.comment = info.comment
    return out


def _dist_info_member(zin: zipfile.ZipFile, leaf: str, wheel: Path) -> str:
    found = next((n for n in zin.namelist() if re.fullmatch(rf"[^/]+\.dist-info/{leaf}", n)), None)
    if found is None:
        raise WheelError(f"{wheel.name}: no .dist-info/{leaf}", hint="rebuild the wheel")
    return found


def rewrite_wheel(
    source: Path,
    target: Path,
    *,
    replace: Mapping[str, bytes] | None = None,
    add: Mapping[str, bytes] | None = None,
    dist_info: str | None = None,
) -> Path:
    """Copy the wheel ``source`` to ``target`` member by member, streamed with each entry's
    time, mode and compression: the ``.dist-info`` folder renamed to ``dist_info``, ``replace``
    members (by their new names) given those bytes, ``add`` members written before RECORD. The
    one way a finished wheel is changed; :func:`write_wheel` is the one way one is made."""
    replace, add = dict(replace or {}), dict(add or {})
    with zipfile.ZipFile(source) as zin:
        record_file = _dist_info_member(zin, "RECORD", source)
        old_dist = record_file.split("/")[0]
        new_dist = dist_info or old_dist

        def renamed(name: str) -> str:
            return new_dist + name[len(old_dist) :] if name.startswith(old_dist + "/") else name

        kept = {row[0]: row[1:] for row in parse_record(zin.read(record_file), where=source.name)}
        rows: list[tuple[str, str, str]] = []
        new_record = renamed(record_file)
        with staged_file(target) as tmp, zipfile.ZipFile(tmp, "w") as zout:
            for info in zin.infolist():
                if info.is_dir() or info.filename == record_file:
                    continue
                arcname = renamed(info.filename)
                out_info = _copied_info(info, arcname)
                if arcname in replace:
                    data = replace.pop(arcname)
                    zout.writestr(out_info, data)
                    rows.append((arcname, record_hash(data), str(len(data))))
                    continue
                if info.filename not in kept:
                    raise WheelError(
                        f"{source.name}: {info.filename} is not in RECORD", hint="rebuild it"
                    )
                big = info.file_size >= zipfile.ZIP64_LIMIT
                with zin.open(info) as src, zout.open(out_info, "w", force_zip64=big) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                rows.append((arcname, *kept[info.filename]))
            if replace:
                raise WheelError(f"{source.name}: no member {sorted(replace)[0]} to replace")
            for arcname, data in add.items():
                zout.writestr(_zipinfo(arcname, (1980, 1, 1, 0, 0, 0), 0o644, True), data)
                rows.append((arcname, record_hash(data), str(len(data))))
            record = _copied_info(zin.getinfo(record_file), new_record)
            zout.writestr(record, format_record([*rows, (new_record, "", "")]))
    return target


def retag_wheel(wheel: Path, platform_tag: str, dest_dir: Path) -> Path:
    """Write a copy of ``wheel`` into ``dest_dir`` whose platform tag (file name and the
    ``Tag:`` lines of ``*.dist-info/WHEEL``) is exactly ``platform_tag``; every other member
    kept as it is (auditwheel names a repaired wheel by every policy it meets; abi/repair
    keeps the one asked for)."""
    prefix, py, abi, _ = wheel.name[: -len(".whl")].rsplit("-", 3)
    target = dest_dir / f"{prefix}-{py}-{abi}-{platform_tag}.whl"
    with zipfile.ZipFile(wheel) as zin:
        wheel_file = _dist_info_member(zin, "WHEEL", wheel)
        text = zin.read(wheel_file).decode("utf-8")
    lines: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        if line.startswith("Tag:"):
            py_tag, abi_tag, _ = line[len("Tag:") :].strip().rsplit("-", 2)
            line = f"Tag: {py_tag}-{abi_tag}-{platform_tag}"
            if line in seen:
                continue
            seen.add(line)
        lines.append(line)
    new_wheel = ("\n".join(lines) + "\n").encode("utf-8")
    return rewrite_wheel(wheel, target, replace={wheel_file: new_wheel})
