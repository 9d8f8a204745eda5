"""Wheels: writing (reproducible, atomic), reading back (RECORD verified) and static indexes.
The writer is re-exported here; the other modules are imported directly.
Repair to manylinux checks the wheel before and after, so it lives in :mod:`kernelwheel.abi`."""

from __future__ import annotations

from .writer import (
    Member,
    WheelSpec,
    license_warning,
    source_date_epoch,
    wheel_filename,
    write_wheel,
)

__all__ = [
    "Member",
    "WheelSpec",
    "license_warning",
    "source_date_epoch",
    "wheel_filename",
    "write_wheel",
]
