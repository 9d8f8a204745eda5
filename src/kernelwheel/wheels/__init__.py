"""Wheels: writing (reproducible, atomic), reading back (RECORD verified), repair to manylinux,
and static indexes. The writer and reader are re-exported here; ``repair`` and ``index`` import
auditwheel and friends, so they are imported from their modules when needed."""

from __future__ import annotations

from .reader import WheelContents, dist_info_dir, escape_name, read_metadata, read_wheel
from .record import format_record, parse_record, record_hash
from .writer import WheelSpec, source_date_epoch, wheel_filename, write_wheel

__all__ = [
    "WheelContents",
    "WheelSpec",
    "dist_info_dir",
    "escape_name",
    "format_record",
    "parse_record",
    "read_metadata",
    "read_wheel",
    "record_hash",
    "source_date_epoch",
    "wheel_filename",
    "write_wheel",
]
