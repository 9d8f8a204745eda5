"""Tampered wheels for the integrity tests: a wheel's entries copied into a new zip, changed."""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path

from kernelwheel.wheels.record import format_record, parse_record, record_hash


def rewrite(
    wheel: Path,
    *,
    drop: tuple[str, ...] = (),
    replace: dict[str, bytes] | None = None,
    add: tuple[tuple[str, bytes], ...] = (),
    listed: bool = True,
    restamp: dict[str, bytes] | None = None,
) -> Path:
    """Rewrite ``wheel`` in place: ``drop`` entries, ``replace`` their bytes (RECORD left as it
    was: the hash no longer matches), ``add`` entries (listed in RECORD with their true hash
    when ``listed``, so only the rule under test fails), ``restamp`` entries' bytes with their
    RECORD rows made true (a sound wheel that says something else)."""
    with zipfile.ZipFile(wheel) as zf:
        entries = [(i, zf.read(i)) for i in zf.infolist()]
        record = next(i.filename for i, _ in entries if i.filename.endswith(".dist-info/RECORD"))
    rows = parse_record(dict((i.filename, d) for i, d in entries)[record], where=str(wheel))
    if listed:
        rows = [(name, record_hash(data), str(len(data))) for name, data in add] + rows
    restamp = restamp or {}
    rows = [
        (r[0], record_hash(restamp[r[0]]), str(len(restamp[r[0]]))) if r[0] in restamp else r
        for r in rows
    ]
    replace = {**(replace or {}), **restamp}
    tmp = wheel.with_suffix(".new")
    with zipfile.ZipFile(tmp, "w") as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate names we add on purpose
        for info, data in entries:
            if info.filename in drop:
                continue
            if info.filename == record:
                data = format_record(rows)
            out.writestr(info, replace.get(info.filename, data))
        for name, data in add:
            out.writestr(name, data)
    tmp.replace(wheel)
    return wheel


def add_zero_member(wheel: Path, name: str, size: int) -> Path:
    """Append ``size`` zero bytes as ``name`` (deflated ~1000:1), listed in RECORD with their
    true hash: a zip bomb that is otherwise a sound wheel."""
    import base64
    import hashlib

    zero = bytes(1 << 20)
    digest = hashlib.sha256()
    for _ in range(size >> 20):
        digest.update(zero)
    hashed = "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(wheel) as zf:
        entries = [(i, zf.read(i)) for i in zf.infolist()]
    record = next(i.filename for i, _ in entries if i.filename.endswith(".dist-info/RECORD"))
    tmp = wheel.with_suffix(".new")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info, data in entries:
            if info.filename == record:
                rows = parse_record(data, where=str(wheel))
                data = format_record([(name, hashed, str(size)), *rows])
            out.writestr(info, data)
        with out.open(name, "w", force_zip64=True) as fh:
            for _ in range(size >> 20):
                fh.write(zero)
    tmp.replace(wheel)
    return wheel
