"""The one parser of wheel file names: PEP 427's, and PEP 825's variant wheels, whose name adds
a variant label after the platform (as ``index --wheel-variants`` writes them)."""

from __future__ import annotations

import re
from typing import NamedTuple

from packaging.tags import Tag
from packaging.utils import BuildTag, InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import Version

# PEP 825's variant label: lowercase letters, digits, '_' and '.'.
_LABEL = re.compile(r"[0-9a-z._]+")


class WheelName(NamedTuple):
    name: NormalizedName
    version: Version
    build: BuildTag
    tags: frozenset[Tag]
    label: str | None  # the variant label of a PEP 825 variant wheel, else None


def parse_wheel_name(filename: str) -> WheelName:
    """``filename`` parsed (packaging's InvalidWheelFilename for a name that is none)."""
    try:
        return WheelName(*parse_wheel_filename(filename), None)
    except InvalidWheelFilename:
        stem, dash, label = filename.removesuffix(".whl").rpartition("-")
        if not filename.endswith(".whl") or not dash or not _LABEL.fullmatch(label):
            raise
        if stem.count("-") not in (4, 5):  # name-ver[-build]-py-abi-plat, then the label
            raise
        return WheelName(*parse_wheel_filename(f"{stem}.whl"), label)
