"""Remedies that keep a .so built with a new toolchain within its manylinux policy, where a new
distribution's headers import symbols only new glibc/libstdc++ export (docs/portability.md):
``data/abi_remedies.toml``, a forced-include header and the compat source's hidden definitions."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._toml import Located, read_toml
from .policy import AbiDataError, ManylinuxPolicy, data_file
from .symver import ForcedHeader, SymverRules, VersionTable, forced_header

# The hidden variable (defined in data/kernelwheel_compat.cpp) that replaces glibc's
# __libc_single_threaded. A plain, non-reserved name so it clashes with nothing in glibc or torch.
SINGLE_THREADED_VARIABLE = "kernelwheel_libc_single_threaded"

COMPAT_SOURCE = "kernelwheel_compat.cpp"

# dlsym renamed to the hidden wrapper in data/kernelwheel_compat.cpp (remedy dlsym-glibc-2-34).
DLSYM_DEFINE = "dlsym=kernelwheel_dlsym"


@dataclass(frozen=True)
class Remedy:
    """One documented remedy: the imports it removes, where they come from, why it is safe."""

    name: str
    symbols: tuple[tuple[str, str], ...]  # (mangled symbol, the version it would import)
    origin: str  # what makes a .so import the symbols
    how: str  # what kernelwheel does about it
    why_safe: str
    since_gcc: int = 0  # the first gcc whose headers emit the symbols (0: not gcc's)

    def removes(self, symbol: str) -> bool:
        return any(name == symbol for name, _ in self.symbols)


@dataclass(frozen=True)
class RemedyData:
    """``data/abi_remedies.toml``: the compat source's remedies and the header's rules."""

    remedies: tuple[Remedy, ...]
    rules: SymverRules
    libraries: tuple[str, ...]  # the target libraries the header is made from


def _data_path(name: str) -> Path:
    path = data_file(name)
    if not path.is_file():  # pragma: no cover - broken installation
        raise FileNotFoundError(
            f"kernelwheel's package data {name} is missing at {path}: reinstall kernelwheel"
        )
    return path


def _remedy(entry: Located) -> Remedy:
    entry.check_keys(("name", "since-gcc", "symbols", "origin", "how", "why-safe"))
    fix = "list [symbol, version] pairs"
    symbols: list[tuple[str, str]] = []
    for pair in entry.array("symbols") or []:
        pair_ok = isinstance(pair, list) and len(pair) == 2
        if not (pair_ok and all(isinstance(x, str) for x in pair)):
            message = f"symbols entry {pair!r} is not a [symbol, version] pair"
            raise entry.error(message, "symbols", fix)
        symbols.append((pair[0], pair[1]))
    return Remedy(
        name=entry.required_string("name", "name the remedy", nonempty=True),
        symbols=tuple(symbols),
        origin=entry.required_string("origin", "say what makes a .so import the symbols"),
        how=entry.required_string("how", "say what kernelwheel does about it"),
        why_safe=entry.required_string("why-safe", "say why it changes no behaviour"),
        since_gcc=entry.integer("since-gcc", low=0, hint="the first gcc release emitting them")
        or 0,
    )


@functools.cache
def load_remedy_data() -> RemedyData:
    """Read and validate ``data/abi_remedies.toml``."""
    source = _data_path("abi_remedies.toml")
    doc = Located(read_toml(source, error=AbiDataError), file=source, error=AbiDataError)
    doc.check_keys(("symver", "c23-strtol", "remedy"))
    symver = doc.required_table("symver", "add the [symver] table")
    symver.check_keys(("libraries", "keep", "handled"))
    c23 = doc.required_table("c23-strtol", "add the [c23-strtol] table")
    c23.check_keys(("macros", "markers", "origin", "why-safe"))
    rules = SymverRules(
        keep=symver.string_table("keep") or {},
        handled=symver.string_table("handled") or {},
        c23_macros=c23.string_list("macros") or (),
        c23_markers=c23.string_list("markers") or (),
    )
    remedies = tuple(_remedy(e) for e in doc.table_array("remedy") or ())
    libraries = symver.string_list("libraries") or ()
    c23.required_string("origin", "say what redirects")  # read by people, checked here
    c23.required_string("why-safe", "say why undoing it is safe")
    return RemedyData(remedies, rules, libraries)


REMEDIES: tuple[Remedy, ...] = load_remedy_data().remedies


def symver_libraries() -> tuple[str, ...]:
    """The target libraries the forced-include header is made from (``libc.so.6``...)."""
    return load_remedy_data().libraries


def abi_header(libraries: Mapping[str, VersionTable], policy: ManylinuxPolicy) -> ForcedHeader:
    """The forced-include header for a target whose libraries are ``libraries`` (path -> its
    version table, read with :func:`kernelwheel.abi.symver.read_version_table`)."""
    return forced_header(libraries, policy, load_remedy_data().rules)


@dataclass(frozen=True)
class RemedySet:
    """What the build adds: flags for g++ and nvcc, and sources compiled into the extension
    with its own C++ flags (same -std and -D_GLIBCXX_USE_CXX11_ABI), exactly once per shared
    object. ``header``: the forced-include header the flags name, None when there is none."""

    cxx_flags: tuple[str, ...]
    nvcc_flags: tuple[str, ...]
    sources: tuple[Path, ...]
    header: Path | None = None

    @property
    def data_dir(self) -> Path:
        """Where the compat source lives (mapped out of debug info by the build)."""
        return _data_path(COMPAT_SOURCE).parent


NO_REMEDIES = RemedySet(cxx_flags=(), nvcc_flags=(), sources=())


def remedy_flags(header: Path | None = None) -> RemedySet:
    """The flags and sources that apply every remedy in :data:`REMEDIES` and, with ``header``
    (a written :class:`~kernelwheel.abi.symver.ForcedHeader`), force that header into every C,
    C++ and CUDA translation unit (g++ and nvcc both take ``-include``; nvcc preprocesses the
    host code with it, and the header keeps its directives out of the device passes)."""
    defines = (f"-D__libc_single_threaded={SINGLE_THREADED_VARIABLE}", f"-D{DLSYM_DEFINE}")
    flags = (*defines, *(("-include", str(header)) if header is not None else ()))
    return RemedySet(
        cxx_flags=flags,
        nvcc_flags=flags,  # nvcc passes -D to both the device pass and the host compiler
        sources=(_data_path(COMPAT_SOURCE),),
        header=header,
    )


def remedy_for_symbol(symbol: str) -> Remedy | None:
    return next((r for r in REMEDIES if r.removes(symbol)), None)
