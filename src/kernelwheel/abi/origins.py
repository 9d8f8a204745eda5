"""Which object file of a build pulled in a symbol: the undefined symbols of each ``.o`` (its
``.symtab``, read with pyelftools), so a refusal can name the source to change."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection


def undefined_symbols(path: Path) -> frozenset[str]:
    """The symbols an object file references but does not define, without a version suffix
    (``log2@GLIBC_2.2.5`` -> ``log2``); empty for a file that is no ELF object."""
    try:
        with path.open("rb") as stream:
            symtab = ELFFile(stream).get_section_by_name(".symtab")
            if not isinstance(symtab, SymbolTableSection):
                return frozenset()
            return frozenset(
                str(sym.name).split("@", 1)[0]
                for sym in symtab.iter_symbols()
                if sym.name and sym["st_shndx"] == "SHN_UNDEF"
            )
    except (OSError, ELFError):
        return frozenset()


def objects_referencing(
    objects: Iterable[Path], symbols: Iterable[str]
) -> dict[str, tuple[Path, ...]]:
    """For each of ``symbols``, the ``objects`` that reference it (in the order given); a symbol
    no object references is left out."""
    wanted = set(symbols)
    found: dict[str, list[Path]] = {}
    for obj in objects:
        for name in sorted(undefined_symbols(obj) & wanted):
            found.setdefault(name, []).append(obj)
    return {name: tuple(paths) for name, paths in found.items()}
