"""Wheels: writing (reproducible, atomic), reading back (RECORD verified) and static indexes.
The writer and RECORD's hash are re-exported here; the other modules are imported directly.
Repair to manylinux checks the wheel before and after, so it lives in :mod:`kernelwheel.abi`."""

from __future__ import annotations

from .record import record_hash
from .writer import Member, WheelSpec, source_date_epoch, wheel_filename, write_wheel

__all__ = [
    "Member",
    "WheelSpec",
    "record_hash",
    "source_date_epoch",
    "wheel_filename",
    "write_wheel",
]
