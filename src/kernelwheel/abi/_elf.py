"""Thin ELF helpers: DT_NEEDED, DT_SONAME, the dynamic symbols with their GNU versions and
PT_GNU_STACK of one shared object. A well-formed object of a known machine is read with
:mod:`struct` (~20x quicker, and spares the ~40 ms import of pyelftools); anything else goes to
pyelftools, the reference the fast path is tested against."""

from __future__ import annotations

import ctypes
import functools
import io
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile


ELF_MAGIC = b"\x7fELF"

# e_machine (its number and pyelftools' name), ELF class, little endian (None: either) -> the
# wheel platform arch name.
_MACHINE_TABLE: tuple[tuple[int, str, int, bool | None, str], ...] = (
    (62, "EM_X86_64", 64, None, "x86_64"),
    (3, "EM_386", 32, None, "i686"),
    (183, "EM_AARCH64", 64, None, "aarch64"),
    (21, "EM_PPC64", 64, True, "ppc64le"),
    (21, "EM_PPC64", 64, False, "ppc64"),
    (22, "EM_S390", 64, None, "s390x"),
    (40, "EM_ARM", 32, None, "armv7l"),
    (243, "EM_RISCV", 64, None, "riscv64"),
    (258, "EM_LOONGARCH", 64, None, "loongarch64"),
)
ARCHES = {(name, bits, little): arch for _, name, bits, little, arch in _MACHINE_TABLE}
_MACHINES = {number: name for number, name, *_ in _MACHINE_TABLE}


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
    symbols: tuple[ElfSymbol, ...]
    # Every (library, version) pair in .gnu.version_r, the same set auditwheel judges.
    version_needs: tuple[tuple[str, str], ...]
    exec_stack: bool


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(path: str | os.PathLike[str], data: bytes | None = None) -> ElfInfo:
    """Read ``path``, or ``data`` when given (``path`` then only names it). Raises NotElfError."""
    p = Path(path)
    if data is not None:
        try:
            return _read_fast(data)
        except _Unusual:
            return _read_reference(p, io.BytesIO(data))
    with p.open("rb") as f:
        try:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return _read_fast(mapped)
        except (_Unusual, ValueError, OSError):  # ValueError: an empty file cannot be mapped
            f.seek(0)
            return _read_reference(p, f)


def _read_reference(p: Path, stream: BinaryIO) -> ElfInfo:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        return _read(ELFFile(stream))
    except ELFError as exc:
        raise NotElfError(f"{p}: not a readable ELF file ({exc})") from exc


class _Unusual(Exception):
    """Something the fast reader leaves to pyelftools (which reads it or says why not)."""


_ELFOSABI_SOLARIS = 6
_SHT_STRTAB, _SHT_DYNAMIC, _SHT_DYNSYM = 3, 6, 11
_SHT_GNU_VERNEED, _SHT_GNU_VERSYM = 0x6FFFFFFE, 0x6FFFFFFF
_PT_GNU_STACK = 0x6474E551
_PF_X = 1
_DT_NULL, _DT_NEEDED, _DT_SONAME = 0, 1, 14
_STB_LOCAL = 0
_VERSYM_RESERVED = (0, 1, 0xFF00, 0xFF01)  # VER_NDX_LOCAL/GLOBAL/LORESERVE/ELIMINATE: no version


def _read_fast(data: bytes | mmap.mmap) -> ElfInfo:
    try:
        return _parse(data)
    except (struct.error, IndexError, ValueError, ZeroDivisionError):
        raise _Unusual from None


def _parse(data: bytes | mmap.mmap) -> ElfInfo:
    if len(data) < 52 or data[:4] != ELF_MAGIC or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise _Unusual
    if data[7] == _ELFOSABI_SOLARIS:
        raise _Unusual
    is64, e = data[4] == 2, "<" if data[5] == 1 else ">"
    header = e + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH")
    (_, e_machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = (
        struct.unpack_from(header, data, 16)
    )
    machine = _MACHINES.get(e_machine)
    if machine is None or shoff == 0 or shnum == 0 or phnum >= 0xFFFF:
        raise _Unusual
    # (sh_type, sh_offset, sh_size, sh_link, sh_info, sh_entsize) of each section
    sh = struct.Struct(e + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
    sections = [
        (t, off, size, link, info, ent)
        for _, t, _, _, off, size, link, info, _, ent in (
            sh.unpack_from(data, shoff + i * shentsize) for i in range(shnum)
        )
    ]

    def string(table: int, offset: int) -> str:
        t, base, size, *_ = sections[table]
        if t != _SHT_STRTAB or offset >= size or base + size > len(data):
            raise _Unusual
        start = base + offset
        end = data.find(b"\0", start)
        raw = data[start : end if end >= 0 else len(data)]
        return raw.decode("utf-8", errors="replace") if raw else ""

    needed: list[str] = []
    soname: str | None = None
    dyn = struct.Struct(e + ("qQ" if is64 else "iI"))
    for _, pos, _, link, _, _ in (s for s in sections if s[0] == _SHT_DYNAMIC):
        while True:
            tag, value = dyn.unpack_from(data, pos)
            pos += dyn.size
            if tag == _DT_NEEDED:
                needed.append(string(link, value))
            elif tag == _DT_SONAME:
                soname = string(link, value)
            elif tag == _DT_NULL:
                break
    last = {section[0]: section for section in sections}  # the last of each type, as _read keeps
    dynsym, versym, verneed = (
        last.get(t) for t in (_SHT_DYNSYM, _SHT_GNU_VERSYM, _SHT_GNU_VERNEED)
    )

    needs: list[tuple[int, str, str]] = []
    if verneed is not None:
        _, offset, _, link, count, _ = verneed
        for _ in range(count):
            _, cnt, file_, aux, next_ = struct.unpack_from(e + "HHIII", data, offset)
            if cnt <= 0:
                raise _Unusual
            need_file = string(link, file_)
            aux_offset = offset + aux
            for _ in range(cnt):
                _, _, other, name, aux_next = struct.unpack_from(e + "IHHII", data, aux_offset)
                needs.append((other, need_file, string(link, name)))
                aux_offset += aux_next
            offset += next_

    symbols: list[tuple[str, bool, int | None]] = []
    if dynsym is not None:
        _, offset, size, link, _, entsize = dynsym
        sym = struct.Struct(e + ("IBBHQQ" if is64 else "IIIBBH"))
        info_at, shndx_at = (1, 3) if is64 else (3, 5)  # st_name is first in both layouts
        for index in range(1, size // entsize):
            fields = sym.unpack_from(data, offset + index * entsize)
            name = string(link, fields[0])
            if not name or fields[info_at] >> 4 == _STB_LOCAL:
                continue
            defined = fields[shndx_at] != 0
            ndx = None
            if versym is not None and not defined:
                (ndx,) = struct.unpack_from(e + "H", data, versym[1] + index * versym[5])
            symbols.append((name, defined, None if ndx in _VERSYM_RESERVED else ndx))

    ph = struct.Struct(e + ("II" if is64 else "I20xI"))  # (p_type, p_flags)
    segments = (ph.unpack_from(data, phoff + i * phentsize) for i in range(phnum))
    # Without PT_GNU_STACK the loader assumes an executable stack.
    exec_stack = bool(next((f for t, f in segments if t == _PT_GNU_STACK), _PF_X) & _PF_X)

    bits, little = 64 if is64 else 32, data[5] == 1
    return _info(machine, bits, little, soname, needed, needs, symbols, exec_stack)


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
    for section in elf.iter_sections():
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

    needs: list[tuple[int, str, str]] = []
    if verneed is not None:
        for need, auxes in verneed.iter_versions():
            needs += [(int(aux["vna_other"]), str(need.name), str(aux.name)) for aux in auxes]

    symbols: list[tuple[str, bool, int | None]] = []
    if dynsym is not None:
        for index, sym in enumerate(dynsym.iter_symbols()):
            if index == 0 or not sym.name or sym["st_info"]["bind"] == "STB_LOCAL":
                continue
            defined = sym["st_shndx"] != "SHN_UNDEF"
            ndx = versym.get_symbol(index)["ndx"] if versym is not None and not defined else None
            symbols.append((str(sym.name), defined, ndx if isinstance(ndx, int) else None))

    stack = (s["p_flags"] for s in elf.iter_segments() if s["p_type"] == "PT_GNU_STACK")
    exec_stack = bool(next(stack, P_FLAGS.PF_X) & P_FLAGS.PF_X)  # none: the loader's default

    machine, bits, little = str(elf["e_machine"]), elf.elfclass, elf.little_endian
    return _info(machine, bits, little, soname, needed, needs, symbols, exec_stack)


def _info(
    machine: str,
    bits: int,
    little_endian: bool,
    soname: str | None,
    needed: list[str],
    needs: list[tuple[int, str, str]],
    symbols: list[tuple[str, bool, int | None]],
    exec_stack: bool,
) -> ElfInfo:
    """What both readers found, as an ElfInfo: ``needs`` is .gnu.version_r as (vna_other,
    library, version name), ``symbols`` each (name, defined, .gnu.version index or None)."""
    versions = {other: (version, library) for other, library, version in needs}
    return ElfInfo(
        machine=machine,
        arch=ARCHES.get((machine, bits, None)) or ARCHES.get((machine, bits, little_endian)),
        soname=soname,
        needed=tuple(needed),
        symbols=tuple(
            ElfSymbol(name, defined, *versions.get(ndx & 0x7FFF, (None, None)))
            if ndx is not None
            else ElfSymbol(name, defined, None, None)
            for name, defined, ndx in symbols
        ),
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
