"""The GPU architectures a shared object carries code for, from the entry headers of the fatbin
containers in its ``.nv_fatbin`` section (payloads may be compressed, headers never are): only
headers are read, so this is cheap for any size."""

from __future__ import annotations

import shutil
import struct
import tempfile
from collections.abc import Callable
from typing import IO

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ARCH_AT = 28
_PTX, _CUBIN = 1, 2
_SECTION = ".nv_fatbin"


def _walk(read: Callable[[int, int], bytes], size: int) -> tuple[frozenset[int], frozenset[int]]:
    """Walk the containers of a ``.nv_fatbin`` section of ``size`` bytes, reading only headers
    through ``read(offset, length)``; a container that does not parse ends the walk."""
    real: set[int] = set()
    virtual: set[int] = set()
    at = 0
    while at + _CONTAINER.size <= size:
        magic, _version, header, length = _CONTAINER.unpack(read(at, _CONTAINER.size))
        if magic != _MAGIC or header < _CONTAINER.size:
            break
        entry, end = at + header, min(at + header + length, size)
        while entry + _ARCH_AT + 4 <= end:
            head = read(entry, _ARCH_AT + 4)
            kind, _v, entry_header, payload = _ENTRY.unpack_from(head)
            if entry_header < _ARCH_AT + 4:
                break
            (arch,) = struct.unpack_from("<I", head, _ARCH_AT)
            if kind == _CUBIN:
                real.add(arch)
            elif kind == _PTX:
                virtual.add(arch)
            entry += entry_header + payload
        at += header + length
        at += -at % 8  # containers are 8-byte aligned in the section
    return frozenset(real), frozenset(virtual)


def sm_archs(stream: IO[bytes]) -> tuple[frozenset[int], frozenset[int]]:
    """(cubin, PTX) SM numbers of the ELF object in ``stream``, empty for a non-ELF file or one
    without device code; spooled to a temporary file, as ELF is read by seeking."""
    with tempfile.TemporaryFile() as tmp:
        shutil.copyfileobj(stream, tmp, 1 << 20)
        tmp.seek(0)
        if tmp.read(4) != b"\x7fELF":
            return frozenset(), frozenset()
        tmp.seek(0)
        try:
            section = ELFFile(tmp).get_section_by_name(_SECTION)
            if section is None or section["sh_type"] == "SHT_NOBITS":
                return frozenset(), frozenset()
            base, size = section["sh_offset"], section["sh_size"]

            def read(at: int, n: int) -> bytes:
                tmp.seek(base + at)
                return tmp.read(n).ljust(n, b"\0")

            return _walk(read, size)
        except (ELFError, struct.error, ValueError):
            return frozenset(), frozenset()
