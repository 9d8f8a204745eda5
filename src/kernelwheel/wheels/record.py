"""RECORD, the wheel's manifest (PEP 376/427), written and read with :mod:`csv` as pip does, so
a file name holding a comma or a quote is one field and cannot spoof another entry."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from collections.abc import Callable, Iterable
from typing import IO

from ..errors import WheelError

Row = tuple[str, str, str]  # (archive path, "sha256=<urlsafe b64>" or "", size or "")


def record_hash(data: bytes) -> str:
    return digest_hash(hashlib.sha256(data).digest())


def digest_hash(digest: bytes) -> str:
    """The RECORD form of a sha256 digest: ``sha256=`` and the unpadded urlsafe base64."""
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def hashed_copy(src: IO[bytes], write: Callable[[bytes], object] = len) -> tuple[bytes, int]:
    """The raw sha256 and the size of what ``src`` holds, read in 1 MiB chunks (never whole in
    memory), each chunk also handed to ``write``."""
    digest, size = hashlib.sha256(), 0
    while chunk := src.read(1 << 20):
        digest.update(chunk)
        write(chunk)
        size += len(chunk)
    return digest.digest(), size


def format_record(rows: Iterable[Row]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def parse_record(data: bytes, *, where: str) -> list[Row]:
    """The rows of a RECORD; ``where`` names the wheel in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WheelError(f"{where}: RECORD is not UTF-8 ({exc.reason})") from None
    rows: list[Row] = []
    try:
        for line, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
            if not row:
                continue
            if len(row) != 3:
                raise WheelError(
                    f"{where}: RECORD line {line} has {len(row)} fields, not 3 (path,hash,size)",
                    hint="rebuild the wheel",
                )
            rows.append((row[0], row[1], row[2]))
    except csv.Error as exc:
        raise WheelError(f"{where}: RECORD is not valid CSV ({exc})") from None
    return rows
