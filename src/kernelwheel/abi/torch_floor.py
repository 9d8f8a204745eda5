"""The torch floor a stable-ABI shared object really needs: the newest first release, in
``data/torch_shim_versions.tsv``, of the libtorch shim functions it imports (docs/stable-abi.md,
"The torch floor, measured")."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import VariantError
from ..model.variant import TorchVersion
from ._elf import ElfInfo, read_elf
from .policy import AbiDataError, data_file

# The shim's C functions: unmangled, so the prefix is the whole story.
_SHIM = re.compile(r"(?:aoti_torch_|torch_)\w+")
_SEEN = re.compile(r"from torch ([^;]+);")


@dataclass(frozen=True)
class ShimTable:
    """Each shim function's first torch release (None: it predates the table's versions and
    sets no floor), and the releases the table was made from."""

    since: Mapping[str, TorchVersion | None]
    seen: tuple[str, ...]  # torch.__version__ of each release read, oldest first

    @property
    def newest(self) -> str:
        return self.seen[-1] if self.seen else "?"


@dataclass(frozen=True)
class ShimFloor:
    """What one or more shared objects need from libtorch's C shim."""

    imports: tuple[str, ...]  # every shim function imported, sorted
    floor: TorchVersion | None  # the newest first release among them; None: no floor measured
    setting: tuple[str, ...]  # the imports whose first release is the floor
    unknown: tuple[str, ...]  # shim-like imports the table does not list (newer than it?)

    def describe(self, table: ShimTable) -> str:
        """One line for a report: the floor and the functions that set it."""
        if self.floor is None:
            text = "no floor" if self.imports else "no shim functions imported"
        else:
            text = f"torch>={self.floor} ({_names(self.setting)})"
        if self.unknown:
            text += (
                f"; {_names(self.unknown)} not in the shim table (torch {table.newest} and "
                "older): newer than it, or not libtorch's"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "floor": str(self.floor) if self.floor else None,
            "set_by": list(self.setting),
            "unknown": list(self.unknown),
            "shim_imports": len(self.imports),
        }


def _names(names: tuple[str, ...], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def parse_table(text: str, *, source: str = "torch_shim_versions.tsv") -> ShimTable:
    """Read the table's TSV: name, since (X.Y or '-'), source, header."""
    since: dict[str, TorchVersion | None] = {}
    seen: tuple[str, ...] = ()
    hint = "regenerate it with scripts/regen_torch_shim_versions.py"
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            if not seen and (match := _SEEN.search(line)):
                seen = tuple(v.strip() for v in match.group(1).split(","))
            continue
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 4 or not _SHIM.fullmatch(fields[0]):
            message = f"{source}:{lineno}: expected name, since, source, header: {line!r}"
            raise AbiDataError(message, hint=hint)
        try:
            since[fields[0]] = None if fields[1] == "-" else TorchVersion.parse(fields[1])
        except VariantError as exc:
            raise AbiDataError(f"{source}:{lineno}: {exc.message}", hint=hint) from None
    return ShimTable(since, seen)


@functools.cache
def load_shim_table() -> ShimTable:
    """The shim table of the package data (``data/torch_shim_versions.tsv``)."""
    path = data_file("torch_shim_versions.tsv")
    return parse_table(path.read_text(encoding="utf-8"), source=str(path))


def shim_imports(info: ElfInfo) -> tuple[str, ...]:
    """The shim functions an object imports: undefined, unversioned (libtorch versions none of
    its symbols) C symbols named like the shim's."""
    imported = {s.name for s in info.symbols if not s.defined and s.version is None}
    return tuple(sorted(n for n in imported if _SHIM.fullmatch(n)))


def measure_floor(imports: Iterable[str], table: ShimTable | None = None) -> ShimFloor:
    """The torch floor set by ``imports`` (shim function names) against ``table``."""
    names = tuple(sorted(set(imports)))
    if not names:  # an object that imports no shim function (most): no table to read
        return ShimFloor((), None, (), ())
    table = table or load_shim_table()
    unknown = tuple(n for n in names if n not in table.since)
    known = [(n, table.since[n]) for n in names if n in table.since]
    floor = max((v for _, v in known if v is not None), default=None)
    setting = tuple(n for n, v in known if v is not None and v == floor)
    return ShimFloor(names, floor, setting, unknown)


def declared_floor(requires_dist: Iterable[str]) -> tuple[str | None, TorchVersion | None]:
    """(the torch requirement as written, the lowest torch series it admits) from a wheel's
    Requires-Dist lines; (None, None) without one, (text, None) for one with no lower bound."""
    texts: list[str] = []
    floors: list[TorchVersion] = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        texts.append(str(req))
        for spec in req.specifier:
            if spec.operator in (">=", ">", "==", "~=", "==="):
                try:
                    release = Version(spec.version.removesuffix(".*")).release
                except InvalidVersion:
                    continue
                if release:
                    floors.append(TorchVersion(release[0], release[1] if len(release) > 1 else 0))
    if not texts:
        return None, None
    return "; ".join(texts), max(floors) if floors else None


def raised_floor(declared: TorchVersion, measured: ShimFloor) -> TorchVersion:
    """``max(declared, measured)``: the floor a stable-ABI wheel's Requires-Dist states."""
    return declared if measured.floor is None else max(declared, measured.floor)


def floor_warning(declared: TorchVersion | None, measured: ShimFloor, table: ShimTable) -> str:
    """The warning for a declared floor below the measured one ('' when it is not below)."""
    if measured.floor is None or (declared is not None and measured.floor <= declared):
        return ""
    stated = f"torch>={declared}" if declared is not None else "no torch floor"
    return (
        f"the declared {stated} is lower than the torch {measured.floor} its shared objects "
        f"need: {_names(measured.setting)} first appeared in torch {measured.floor} (shim "
        f"table: torch {', '.join(table.seen)}); under an older torch it fails to load"
    )


def floor_of_files(paths: Iterable[Path], table: ShimTable | None = None) -> ShimFloor:
    """The floor of the shared objects at ``paths`` together (raises NotElfError for one that
    is not ELF)."""
    return measure_floor((n for p in paths for n in shim_imports(read_elf(p))), table)
