"""Known remedies that keep a .so built with a new toolchain within manylinux_2_28.

Building on Debian 12 (gcc 12, glibc 2.36), libstdc++'s *headers* make a kernel import a few
symbols only new glibc/libstdc++ versions export, and auditwheel then refuses manylinux_2_28.
Each remedy below removes such imports without changing behaviour; ``remedy_flags()`` returns the
compiler flags and the source file (``data/kernelwheel_compat.cpp``) the build adds to every
extension. A guaranteed-compliant build still needs an older toolchain (the manylinux_2_28 image):
other header code can pull GLIBCXX_3.4.26+ symbols no remedy covers, and ``kernelwheel check``
reports those.

Use::

    rs = remedy_flags()
    extra_compile_args = {"cxx": [*flags, *rs.cxx_flags], "nvcc": [*nvcc, *rs.nvcc_flags]}
    sources = [*sources, *map(str, rs.sources)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "REMEDIES",
    "SINGLE_THREADED_VARIABLE",
    "Remedy",
    "RemedySet",
    "remedy_flags",
    "remedy_for_symbol",
]

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

    def removes(self, symbol: str) -> bool:
        return any(name == symbol for name, _ in self.symbols)


# Mangled names of the <sstream> members kernelwheel_compat.cpp instantiates (C++11 ABI; the
# default constructors also exist for the old ABI).
_SSTREAM_CLASSES = {
    "basic_stringbuf": "15basic_stringbufIcSt11char_traitsIcESaIcEE",
    "basic_istringstream": "19basic_istringstreamIcSt11char_traitsIcESaIcEE",
    "basic_ostringstream": "19basic_ostringstreamIcSt11char_traitsIcESaIcEE",
    "basic_stringstream": "18basic_stringstreamIcSt11char_traitsIcESaIcEE",
}
_OLD_ABI_CLASSES = {
    "basic_stringbuf": "St15basic_stringbufIcSt11char_traitsIcESaIcEE",
    "basic_istringstream": "St19basic_istringstreamIcSt11char_traitsIcESaIcEE",
    "basic_ostringstream": "St19basic_ostringstreamIcSt11char_traitsIcESaIcEE",
    "basic_stringstream": "St18basic_stringstreamIcSt11char_traitsIcESaIcEE",
}


def _sstream_symbols() -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for mangled in _SSTREAM_CLASSES.values():
        cls = f"St7__cxx11{mangled}"
        out.append((f"_ZN{cls}C1Ev", "GLIBCXX_3.4.26"))
        out.append((f"_ZN{cls}C2Ev", "GLIBCXX_3.4.26"))
        out.append((f"_ZNKR{cls}3strEv", "GLIBCXX_3.4.29"))
        out.append((f"_ZNO{cls}3strEv", "GLIBCXX_3.4.29"))
        out.append((f"_ZNK{cls}4viewEv", "GLIBCXX_3.4.29"))
        rvalue_ctor = "C1EONS_12basic_stringIcS2_S3_EESt13_Ios_Openmode"
        out.append((f"_ZN{cls}{rvalue_ctor}", "GLIBCXX_3.4.29"))
        out.append((f"_ZN{cls}{rvalue_ctor.replace('C1', 'C2', 1)}", "GLIBCXX_3.4.29"))
    for cls in _OLD_ABI_CLASSES.values():
        out.append((f"_ZN{cls}C1Ev", "GLIBCXX_3.4.26"))
        out.append((f"_ZN{cls}C2Ev", "GLIBCXX_3.4.26"))
    return tuple(out)


REMEDIES: tuple[Remedy, ...] = (
    Remedy(
        name="libc-single-threaded",
        symbols=(("__libc_single_threaded", "GLIBC_2.32"),),
        origin=(
            "gcc >= 11 libstdc++ headers (ext/atomicity.h), which read it to skip atomic "
            "reference counting (shared_ptr, std::string, locale) in single-threaded processes"
        ),
        how=(
            f"-D__libc_single_threaded={SINGLE_THREADED_VARIABLE} for g++ and nvcc; the "
            f"variable is defined once per .so in {COMPAT_SOURCE}, hidden, with value 0"
        ),
        why_safe=(
            "0 means 'another thread may exist', so the headers always use atomic operations, "
            "as they did before glibc 2.32; it only costs the single-thread shortcut. The "
            "variable is hidden, so it never interposes on glibc's or another library's symbol"
        ),
    ),
    Remedy(
        name="throw-bad-array-new-length",
        symbols=(("_ZSt28__throw_bad_array_new_lengthv", "GLIBCXX_3.4.29"),),
        origin=(
            "gcc >= 11 libstdc++ headers: std::allocator<T>::allocate(n) calls it when "
            "n * sizeof(T) overflows (std::vector, std::string, make_shared, ...)"
        ),
        how=f"a hidden definition in {COMPAT_SOURCE} that throws std::bad_array_new_length",
        why_safe=(
            "the library function does nothing else; the thrown type's type_info and vtable "
            "still come from libstdc++ (CXXABI_1.3.8), so every catch clause matches as before"
        ),
    ),
    Remedy(
        name="sstream-header-members",
        symbols=_sstream_symbols(),
        origin=(
            "gcc >= 9 <sstream>, which defines these members inline but declares the classes "
            "extern templates, so calls the optimizer does not inline (at -O0, or C++20 "
            "str()/view() in torch >= 2.13 builds) import libstdc++'s exported copies"
        ),
        how=f"hidden explicit instantiations of exactly these members in {COMPAT_SOURCE}",
        why_safe=(
            "they are the same header code the compiler inlines at -O2; object layout, vtables "
            "and every out-of-line member still come from libstdc++.so, and the copies are "
            "hidden, so no symbol is exported or interposed"
        ),
    ),
    Remedy(
        name="dlsym-glibc-2-34",
        symbols=(("dlsym", "GLIBC_2.34"),),
        origin=(
            "torch's stable-ABI headers (torch/csrc/stable/macros.h), which look up optional "
            "shim functions with dlsym; glibc >= 2.34 exports dlsym from libc.so.6 under a new "
            "version"
        ),
        how=(
            f"-D{DLSYM_DEFINE} for g++ and nvcc; that hidden function, in {COMPAT_SOURCE}, "
            "calls dlsym bound to its old version (GLIBC_2.2.5 on x86_64, GLIBC_2.17 on aarch64)"
        ),
        why_safe=(
            "both versions are the same glibc function (glibc 2.34 kept the old one as an "
            "alias); older glibc exports it from libdl.so.2, which libtorch loads. The wrapper "
            "is hidden, so it never interposes on glibc's or another library's dlsym"
        ),
    ),
)


@dataclass(frozen=True)
class RemedySet:
    """What the build adds: flags for g++ and nvcc, and sources compiled into the extension.

    ``sources`` must be compiled with the extension's own C++ flags (same -std and
    -D_GLIBCXX_USE_CXX11_ABI), exactly once per shared object.
    """

    cxx_flags: tuple[str, ...]
    nvcc_flags: tuple[str, ...]
    sources: tuple[Path, ...]
    remedies: tuple[Remedy, ...] = field(default=REMEDIES, repr=False)


def _data_path(name: str) -> Path:
    path = Path(__file__).resolve().parent.parent / "data" / name
    if not path.is_file():  # pragma: no cover - broken installation
        raise FileNotFoundError(
            f"kernelwheel's package data {name} is missing at {path}: reinstall kernelwheel"
        )
    return path


def remedy_flags() -> RemedySet:
    """The flags and sources that apply every remedy in :data:`REMEDIES`."""
    defines = (f"-D__libc_single_threaded={SINGLE_THREADED_VARIABLE}", f"-D{DLSYM_DEFINE}")
    return RemedySet(
        cxx_flags=defines,
        # nvcc passes -D to both the device pass and the host compiler.
        nvcc_flags=defines,
        sources=(_data_path(COMPAT_SOURCE),),
    )


def remedy_for_symbol(symbol: str) -> Remedy | None:
    """The remedy that removes an import of ``symbol``, if kernelwheel has one."""
    return next((r for r in REMEDIES if r.removes(symbol)), None)
