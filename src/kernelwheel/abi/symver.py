"""The forced-include header that keeps a build's libc/libm imports within a manylinux policy:
each re-versioned function bound with ``.symver`` to the newest version the policy allows, read
from the target libraries' own version tables; glibc >= 2.38's C23 redirections undone."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .policy import ManylinuxPolicy, split_version, version_key

HEADER_NAME = "kernelwheel_abi.h"
_HIDDEN = 0x8000  # .gnu.version: the version is not the symbol's default (name@VER, not @@)
# Functions, and GNU indirect functions (STT_GNU_IFUNC, which pyelftools names by its value,
# STT_LOOS): glibc exports log2, strlen... as those.
_FUNCTION_TYPES = ("STT_FUNC", "STT_GNU_IFUNC", "STT_LOOS")


@dataclass(frozen=True)
class Export:
    """One versioned function a library defines: ``log2@GLIBC_2.2.5`` or ``log2@@GLIBC_2.29``."""

    name: str
    version: str  # "GLIBC_2.29"
    default: bool  # the version a new link binds to (@@)


@dataclass(frozen=True)
class VersionTable:
    """The versioned functions one library exports: its dynamic symbols with their versions."""

    library: str  # the file name, e.g. "libm.so.6"
    exports: tuple[Export, ...]

    def names(self) -> frozenset[str]:
        return frozenset(e.name for e in self.exports)

    def to_json(self) -> str:
        rows = [[e.name, e.version, e.default] for e in self.exports]
        return json.dumps({"library": self.library, "exports": rows})

    @classmethod
    def from_json(cls, text: str) -> VersionTable:
        """What :meth:`to_json` wrote; ValueError, KeyError or TypeError for anything else."""
        data = json.loads(text)
        exports = tuple(Export(str(n), str(v), bool(d)) for n, v, d in data["exports"])
        return cls(str(data["library"]), exports)


@dataclass(frozen=True)
class Binding:
    """``name`` bound from its default version to the newest older one the policy allows."""

    name: str
    library: str
    default: str  # "GLIBC_2.29"
    bound: str  # "GLIBC_2.2.5"
    target: str = ""  # the function bound to, when not ``name`` itself (a C23 alias)

    def directive(self) -> str:
        return f'__asm__(".symver {self.name},{self.target or self.name}@{self.bound}");'


@dataclass(frozen=True)
class SymverRules:
    """What ``data/abi_remedies.toml`` says about binding: the functions never rebound (glob ->
    why), those another remedy handles (name -> remedy), the C23 switches and their markers."""

    keep: Mapping[str, str]
    handled: Mapping[str, str]
    c23_macros: tuple[str, ...]
    c23_markers: tuple[str, ...]

    def kept(self, name: str) -> str | None:
        return next((why for pat, why in self.keep.items() if fnmatch.fnmatchcase(name, pat)), None)


@dataclass(frozen=True)
class ForcedHeader:
    """The generated header: its text and what went into it."""

    text: str
    bindings: tuple[Binding, ...]
    c23_undone: bool  # the target's glibc redirects to __isoc23_*, and the header undoes it
    policy: str  # "manylinux_2_28_x86_64"
    libraries: tuple[str, ...]  # the libraries read, as paths

    name = HEADER_NAME

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def read_version_table(path: str | os.PathLike[str]) -> VersionTable:
    """The versioned functions ``path`` (a shared library) defines. Raises OSError for a file
    that cannot be read and ValueError for one that is no ELF library with version tables."""
    # pyelftools costs tens of milliseconds to import: only a run that reads a library's version
    # tables (the symver header) pays for it, not every command that imports this module.
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerSymSection
    from elftools.elf.sections import SymbolTableSection

    p = Path(path)
    with p.open("rb") as stream:
        try:
            elf = ELFFile(stream)
        except ELFError as exc:
            raise ValueError(f"{p}: not an ELF file ({exc})") from None
        dynsym = elf.get_section_by_name(".dynsym")
        versym = elf.get_section_by_name(".gnu.version")
        verdef = elf.get_section_by_name(".gnu.version_d")
        if not (
            isinstance(dynsym, SymbolTableSection)
            and isinstance(versym, GNUVerSymSection)
            and isinstance(verdef, GNUVerDefSection)
        ):
            raise ValueError(f"{p}: has no symbol version definitions (.gnu.version_d)")
        names: dict[int, str] = {}
        for definition, auxes in verdef.iter_versions():
            if int(definition["vd_flags"]) & 1:  # VER_FLG_BASE: the library's own name
                continue
            names[int(definition["vd_ndx"])] = str(next(iter(auxes)).name)
        exports: list[Export] = []
        for index, sym in enumerate(dynsym.iter_symbols()):
            if sym["st_shndx"] == "SHN_UNDEF" or sym["st_info"]["type"] not in _FUNCTION_TYPES:
                continue
            ndx = versym.get_symbol(index)["ndx"]
            if not isinstance(ndx, int):
                continue  # VER_NDX_LOCAL / VER_NDX_GLOBAL: no version
            version = names.get(ndx & 0x7FFF)
            if version is not None:
                exports.append(Export(str(sym.name), version, not ndx & _HIDDEN))
    return VersionTable(p.name, tuple(exports))


def _newest(versions: Iterable[str]) -> str | None:
    keyed = [(key, v) for v in versions if (key := version_key(split_version(v)[1])) is not None]
    return max(keyed)[1] if keyed else None


def plan_bindings(
    tables: Sequence[VersionTable], policy: ManylinuxPolicy, rules: SymverRules
) -> tuple[Binding, ...]:
    """Every function whose default version ``policy`` forbids but which an older, allowed
    version of the same library still provides, bound to the newest such version; sorted by
    name. Functions the rules keep or hand to another remedy are left out."""
    out: dict[str, Binding] = {}
    for table in tables:
        by_name: dict[str, list[Export]] = {}
        for export in table.exports:
            by_name.setdefault(export.name, []).append(export)
        for name, exports in by_name.items():
            default = next((e.version for e in exports if e.default), None)
            if default is None or policy.allows(default) or name in out:
                continue
            if rules.kept(name) is not None or name in rules.handled:
                continue
            allowed = [e.version for e in exports if not e.default and policy.allows(e.version)]
            prefix = split_version(default)[0]
            bound = _newest(v for v in allowed if split_version(v)[0] == prefix)
            if bound is not None:
                out[name] = Binding(name, table.library, default, bound)
    return tuple(out[name] for name in sorted(out))


C23_PREFIX = "__isoc23_"


def plan_c23_aliases(
    tables: Sequence[VersionTable], policy: ManylinuxPolicy
) -> tuple[Binding, ...]:
    """Each ``__isoc23_X`` the target's glibc exports, bound to the classic function its
    headers called before glibc 2.38 (``__isoc99_X`` where that exists, as for the scanf
    family, else ``X``), at the newest version the policy allows. The header's C23 switch
    cannot reach every unit: nvcc puts cuda_runtime.h, and with it <stdlib.h>, before a
    forced include, so a .cu's host code still calls __isoc23_strtol; this binding catches
    those references whatever the include order (and binds nothing in units without any)."""
    out: dict[str, Binding] = {}
    for table in tables:
        versions: dict[str, list[str]] = {}
        for export in table.exports:
            versions.setdefault(export.name, []).append(export.version)
        for name in sorted(n for n in versions if n.startswith(C23_PREFIX)):
            base = name[len(C23_PREFIX) :]
            for target in (f"__isoc99_{base}", base):
                bound = _newest(v for v in versions.get(target, ()) if policy.allows(v))
                if bound is not None and name not in out:
                    default = _newest(versions[name]) or versions[name][0]
                    out[name] = Binding(name, table.library, default, bound, target)
                    break
    return tuple(out[name] for name in sorted(out))


def _c23_block(macros: Sequence[str]) -> list[str]:
    """C++ only: <features.h> first, then the switch off. In C, a source may still define
    _GNU_SOURCE or _POSIX_C_SOURCE before its first include, which an early <features.h> would
    ignore; g++ always predefines _GNU_SOURCE, so in C++ nothing changes but the switch."""
    lines = [
        "/* glibc >= 2.38 redirects strtol, sscanf, wcstol... to C23 variants (__isoc23_*) that",
        "   no older glibc has. Switch the redirection off: the calls go to the classic functions",
        "   (a '0b' prefix is then not read as binary, as before glibc 2.38). */",
        "#if defined(__cplusplus) && defined(__has_include)",
        "#if __has_include(<features.h>)",
        "#include <features.h>",
    ]
    for macro in macros:
        lines += [f"#ifdef {macro}", f"#undef {macro}", f"#define {macro} 0", "#endif"]
    return [*lines, "#endif", "#endif", ""]


def forced_header(
    libraries: Mapping[str, VersionTable], policy: ManylinuxPolicy, rules: SymverRules
) -> ForcedHeader:
    """The header for a target whose libraries are ``libraries`` (path -> its table):
    deterministic for the same bindings, switches, policy and libraries."""
    tables = list(libraries.values())
    bindings = plan_bindings(tables, policy, rules) + plan_c23_aliases(tables, policy)
    c23 = any(marker in t.names() for t in tables for marker in rules.c23_markers)
    sources = ", ".join(t.library for t in tables)
    lines = [
        f"/* {HEADER_NAME}: generated by kernelwheel for {policy.tag} from the target's",
        f"   {sources}; forced into every C, C++ and CUDA translation unit of the",
        "   build (docs/portability.md). Do not edit. */",
        "#ifndef KERNELWHEEL_ABI_H",
        "#define KERNELWHEEL_ABI_H",
        "",
    ]
    if c23 and rules.c23_macros:
        lines += _c23_block(rules.c23_macros)
    if bindings:
        lines += [
            "/* Functions whose default version is newer than the policy allows, bound to the",
            "   newest version it allows (still exported by the target's library). Host code",
            "   only: CUDA's device passes define __CUDA_ARCH__. */",
            "#if !defined(__CUDA_ARCH__)",
        ]
        lines += [f"{b.directive()} /* {b.library}: {b.default} */" for b in bindings]
        lines += ["#endif", ""]
    lines += ["#endif /* KERNELWHEEL_ABI_H */", ""]
    return ForcedHeader("\n".join(lines), bindings, c23, policy.tag, tuple(libraries))
