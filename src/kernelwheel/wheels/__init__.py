"""Wheels: writing (reproducible, atomic), reading back (RECORD verified) and static indexes.
The writer and reader are re-exported here; ``index`` is imported from its module when needed.
Repair to manylinux checks the wheel before and after, so it lives in :mod:`kernelwheel.abi`."""

from __future__ import annotations

from .reader import dist_info_dir, escape_name, read_metadata
from .record import format_record, parse_record, record_hash
from .writer import Member, WheelSpec, source_date_epoch, wheel_filename, write_wheel

__all__ = [
    "Member",
    "WheelSpec",
    "dist_info_dir",
    "escape_name",
    "format_record",
    "parse_record",
    "read_metadata",
    "record_hash",
    "source_date_epoch",
    "wheel_filename",
    "write_wheel",
]
