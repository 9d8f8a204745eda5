"""Thin ELF helpers, read with pyelftools (imported on the first read): DT_NEEDED, DT_SONAME,
the dynamic symbols with their GNU versions (``.gnu.version`` into ``.gnu.version_r``) and
PT_GNU_STACK; the C++ demangler. Policy logic lives elsewhere."""

from __future__ import annotations

import ctypes
import functools
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile


ELF_MAGIC = b"\x7fELF"

# (e_machine, ELF class, little endian or None for either) -> wheel platform arch name.
ARCHES: dict[tuple[str, int, bool | None], str] = {
    ("EM_X86_64", 64, None): "x86_64",
    ("EM_386", 32, None): "i686",
    ("EM_AARCH64", 64, None): "aarch64",
    ("EM_PPC64", 64, True): "ppc64le",
    ("EM_PPC64", 64, False): "ppc64",
    ("EM_S390", 64, None): "s390x",
    ("EM_ARM", 32, None): "armv7l",
    ("EM_RISCV", 64, None): "riscv64",
    ("EM_LOONGARCH", 64, None): "loongarch64",
}


class NotElfError(ValueError):
    """The file is not an ELF object pyelftools can read."""


@dataclass(frozen=True)
class ElfSymbol:
    """One non-local entry of ``.dynsym``."""

    name: str
    defined: bool
    version: str | None  # e.g. "GLIBC_2.32" for an undefined symbol bound to a version
    library: str | None  # the DT_NEEDED file the version belongs to, e.g. "libc.so.6"


@dataclass(frozen=True)
class ElfInfo:
    machine: str  # raw e_machine, e.g. "EM_X86_64"
    arch: str | None  # wheel platform arch name, None if unknown
    soname: str | None
    needed: tuple[str, ...]
    sections: tuple[str, ...]  # every section's name, in file order
    symbols: tuple[ElfSymbol, ...]
    # Every (library, version) pair in .gnu.version_r, the same set auditwheel judges.
    version_needs: tuple[tuple[str, str], ...]
    exec_stack: bool


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(path: str | os.PathLike[str], data: bytes | None = None) -> ElfInfo:
    """Read what the ABI rules need, from ``data`` when given (``path`` then only names it).
    Raises NotElfError for a file that is not ELF."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    p = Path(path)
    with io.BytesIO(data) if data is not None else p.open("rb") as stream:
        try:
            return _read(ELFFile(stream))
        except ELFError as exc:
            raise NotElfError(f"{p}: not a readable ELF file ({exc})") from exc


def _read(elf: ELFFile) -> ElfInfo:
    from elftools.elf.constants import P_FLAGS
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
    from elftools.elf.sections import SymbolTableSection

    needed: list[str] = []
    soname: str | None = None
    dynsym: SymbolTableSection | None = None
    versym: GNUVerSymSection | None = None
    verneed: GNUVerNeedSection | None = None
    sections: list[str] = []
    for section in elf.iter_sections():
        sections.append(section.name)
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(str(getattr(tag, "needed")))  # noqa: B009 - set dynamically
                elif tag.entry.d_tag == "DT_SONAME":
                    soname = str(getattr(tag, "soname"))  # noqa: B009
        elif isinstance(section, SymbolTableSection) and section["sh_type"] == "SHT_DYNSYM":
            dynsym = section
        elif isinstance(section, GNUVerSymSection):
            versym = section
        elif isinstance(section, GNUVerNeedSection):
            verneed = section

    # .gnu.version_r as (vna_other, library, version name)
    needs: list[tuple[int, str, str]] = []
    if verneed is not None:
        for need, auxes in verneed.iter_versions():
            needs += [(int(aux["vna_other"]), str(need.name), str(aux.name)) for aux in auxes]
    versions = {other: (version, library) for other, library, version in needs}

    symbols: list[ElfSymbol] = []
    if dynsym is not None:
        for index, sym in enumerate(dynsym.iter_symbols()):
            if index == 0 or not sym.name or sym["st_info"]["bind"] == "STB_LOCAL":
                continue
            defined = sym["st_shndx"] != "SHN_UNDEF"
            ndx = versym.get_symbol(index)["ndx"] if versym is not None and not defined else None
            # a reserved index (VER_NDX_LOCAL/GLOBAL) reads as a name: no version
            found = versions.get(ndx & 0x7FFF) if isinstance(ndx, int) else None
            symbols.append(ElfSymbol(str(sym.name), defined, *(found or (None, None))))

    exec_stack = True  # without PT_GNU_STACK the loader assumes an executable stack
    for segment in elf.iter_segments():
        if segment["p_type"] == "PT_GNU_STACK":
            exec_stack = bool(segment["p_flags"] & P_FLAGS.PF_X)
            break

    machine, bits = str(elf["e_machine"]), elf.elfclass
    return ElfInfo(
        machine=machine,
        arch=ARCHES.get((machine, bits, None)) or ARCHES.get((machine, bits, elf.little_endian)),
        soname=soname,
        needed=tuple(needed),
        sections=tuple(sections),
        symbols=tuple(symbols),
        version_needs=tuple((library, version) for _, library, version in needs),
        exec_stack=exec_stack,
    )


@functools.cache
def _demangler() -> tuple[Any, Any] | None:
    """libstdc++'s ``__cxa_demangle`` and libc's ``free`` for its result; None where missing."""
    try:
        func = ctypes.CDLL("libstdc++.so.6").__cxa_demangle
        free = ctypes.CDLL(None).free
    except (OSError, AttributeError):
        return None
    func.restype = ctypes.c_void_p
    free.restype = None
    func.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int),
    ]
    free.argtypes = [ctypes.c_void_p]
    return func, free


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """Demangle an Itanium C++ name with libstdc++'s own demangler; the name itself otherwise."""
    if not name.startswith("_Z"):
        return name
    loaded = _demangler()
    if loaded is None:
        return name
    func, free = loaded
    status = ctypes.c_int(0)
    result = func(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not result:
        return name
    try:
        text: str = ctypes.string_at(result).decode(errors="replace")
    finally:
        free(result)
    return text
