"""The ABI rules (:class:`~kernelwheel.abi.report.Rule`, each described there) applied to one
shared object, or to every ELF file of a wheel."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename

from ..errors import UsageError, VariantError, WheelError
from ..model.variant import OS, Arch, CxxAbi, Variant
from ..model.wheelname import parse_wheel_name
from ..wheels.reader import (
    IntegrityProblem,
    bomb_cause,
    dist_info_entries,
    integrity_problems,
    is_symlink_entry,
    parse_metadata,
    wheel_rule_problems,
)
from ._elf import ElfInfo, NotElfError, demangle, is_elf, read_elf
from .policy import (
    DEFAULT_POLICY,
    KernelLibraries,
    ManylinuxPolicy,
    load_kernel_libraries,
    load_policy,
    newest,
    normalize_policy,
    parse_platform_tag,
    policy_for,
    split_version,
)
from .report import Rule, SoReport, Violation, WheelReport
from .stable_abi import is_python_symbol, load_stable_abi, parse_python_version
from .torch_floor import declared_floor, measure_floor, shim_imports

# Passed as python_abi/cxxabi to check_wheel: take the value from the wheel's file name.
FROM_TAG = "tag"

CXX_ABIS = tuple(abi.value for abi in CxxAbi)

# Demangled spellings of old-ABI (cxx98) library types. In the C++11 ABI these types live in
# std::__cxx11 and demangle as "std::__cxx11::basic_string<...>", never as these.
_OLD_ABI_TYPES = re.compile(
    r"\bstd::(?:string|wstring|basic_string<|basic_[io]?stringstream<|basic_stringbuf<"
    r"|[io]?stringstream\b|stringbuf\b|list<)"
)


@dataclass(frozen=True)
class WheelTags:
    """What a wheel's file name says about the ABI it promises."""

    python_abi: str | None  # "3.9" for cp39-abi3 (the lowest if several); None if not abi3
    cxxabi: str | None  # from the local version: "cxx11" / "cxx98"; None if absent
    arch: str | None  # from the platform tag; None for "any"
    claimed_policy: str | None  # strictest manylinux policy the platform tags name, if any
    platforms: tuple[str, ...]
    torch_stable_abi: bool = False  # the local version names a stable-ABI build (.stable)


def read_wheel_tags(filename: str) -> WheelTags:
    """Parse a wheel file name (PEP 427). Raises WheelError for one that is not valid."""
    try:
        _, version, _, tags, _ = parse_wheel_name(filename)
    except InvalidWheelFilename as exc:
        raise WheelError(
            f"{filename}: not a valid wheel file name ({exc})",
            hint="wheel names look like NAME-VERSION-cp39-abi3-linux_x86_64.whl",
        ) from exc
    abi3 = sorted(
        parse_python_version(t.interpreter)
        for t in tags
        if t.abi == "abi3" and re.fullmatch(r"cp3\d+", t.interpreter)
    )
    python_abi = f"{abi3[0][0]}.{abi3[0][1]}" if abi3 else None
    platforms = tuple(sorted({t.platform for t in tags}))
    parsed = [parse_platform_tag(platform) for platform in platforms]
    arches = {arch for _, arch in parsed if arch is not None}
    claimed = [load_policy(b, a) for b, a in parsed if b is not None and a is not None]
    if len(arches) > 1:
        raise WheelError(
            f"{filename}: platform tags name several architectures ({', '.join(sorted(arches))})",
            hint="build one wheel per architecture",
        )
    strictest = max(claimed, key=lambda p: p.priority).name if claimed else None
    return WheelTags(
        python_abi=python_abi,
        cxxabi=cxx.value if (cxx := CxxAbi.in_local_version(version.local)) else None,
        arch=next(iter(arches), None),
        claimed_policy=strictest,
        platforms=platforms,
        torch_stable_abi=_names_stable_abi(version.local),
    )


def _names_stable_abi(local: str | None) -> bool:
    """Whether a local version is a stable-ABI variant's label (``torch2.10.stable.cu130``)."""
    if not local:
        return False
    try:
        return Variant.from_local_version(local, arch=Arch.X86_64, os=OS.LINUX).stable_abi
    except VariantError:
        return False


def _python_floor(python_abi: str | None, cxxabi: str | None) -> tuple[int, int] | None:
    """The abi3 floor as (major, minor), once both rule arguments are checked."""
    if cxxabi is not None and cxxabi not in CXX_ABIS:
        raise UsageError(
            f"unknown C++ ABI {cxxabi!r}", hint=f"use one of {', '.join(CXX_ABIS)} (or none)"
        )
    if python_abi is None:
        return None
    try:
        return parse_python_version(python_abi)
    except ValueError as exc:
        raise UsageError(str(exc), hint="pass the abi3 floor as X.Y, e.g. '3.9'") from exc


def check_shared_object(
    path: str | os.PathLike[str],
    *,
    policy: str = DEFAULT_POLICY,
    python_abi: str | None = "3.9",
    cxxabi: str | None = "cxx11",
    arch: str | None = None,
    torch_stable_abi: bool = False,
) -> SoReport:
    """Check one shared object. ``python_abi``: the abi3 floor ("3.9" for cp39-abi3); ``cxxabi``:
    "cxx11"/"cxx98"; None skips either rule. ``arch``: the wheel's (None: the ELF's own).
    ``torch_stable_abi``: a build against libtorch's stable ABI (the torch-abi rule)."""
    floor = _python_floor(python_abi, cxxabi)
    try:
        info = read_elf(path)
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file", hint="pass the path of a .so or a wheel") from exc
    except IsADirectoryError:
        raise UsageError(
            f"{path}: is a folder, not a wheel or shared object",
            hint="pass the files in it, e.g. 'kernelwheel check wheelhouse/*.whl'",
        ) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except NotElfError as exc:
        raise UsageError(str(exc), hint="pass a shared object (.so) or a wheel") from exc
    base, _ = normalize_policy(policy)
    return _check_elf(info, str(path), _Rules(base, floor, cxxabi, arch, torch_stable_abi))


@dataclass(frozen=True)
class _Rules:
    """What every shared object of one check is judged against."""

    policy: str  # its name without an arch (normalize_policy)
    python_floor: tuple[int, int] | None
    cxxabi: str | None
    arch: str | None  # the wheel's (None: the ELF's own)
    torch_stable_abi: bool


def _check_elf(
    info: ElfInfo, name: str, rules: _Rules, provided: frozenset[str] = frozenset()
) -> SoReport:
    base, arch, floor = rules.policy, rules.arch, rules.python_floor
    libs = load_kernel_libraries()
    violations: list[Violation] = []
    checked: list[Rule] = [Rule.ELF]

    def elf(subject: str, message: str, fix: str) -> None:
        violations.append(Violation(Rule.ELF, name, subject, None, message, fix))

    target_arch = arch or info.arch
    if info.arch is None:
        elf(
            info.machine,
            f"unsupported machine type {info.machine}: no manylinux policy covers it",
            "build the extension for x86_64 or aarch64",
        )
    elif arch is not None and info.arch != arch:
        elf(
            info.machine,
            f"the object is {info.arch} but the wheel is tagged {arch}",
            f"build it for {arch} (cross compiler as nvcc -ccbin) or tag the wheel {info.arch}",
        )
    if info.exec_stack:
        elf(
            "PT_GNU_STACK",
            "the object asks for an executable stack (PT_GNU_STACK is executable or missing): "
            "glibc >= 2.41 refuses to dlopen it",
            "link with -Wl,-z,noexecstack (nvcc: -Xlinker -z,noexecstack); an assembly or "
            "object file without a .note.GNU-stack section causes it",
        )

    target: ManylinuxPolicy | None = None
    if target_arch is not None:
        target = load_policy(base, target_arch)
        checked.append(Rule.SYMBOL_VERSIONS)
        violations += _symbol_versions(info, name, target, libs)
    checked.append(Rule.NEEDED_LIBS)
    violations += _needed_libs(info, name, base, target, provided, libs)
    if floor is not None:
        checked.append(Rule.PYTHON_ABI)
        violations += _python_abi(info, name, floor)
    if rules.cxxabi is not None:
        checked.append(Rule.CXX_ABI)
        violations += _cxx_abi(info, name, rules.cxxabi)
    if rules.torch_stable_abi:
        checked.append(Rule.TORCH_ABI)
        violations += _torch_abi(info, name, libs)

    by_prefix: dict[str, list[str]] = {}
    for _, version_name in info.version_needs:
        prefix, version = split_version(version_name)
        if target is None or prefix in target.symbol_versions:
            by_prefix.setdefault(prefix, []).append(version)

    order = {rule: i for i, rule in enumerate(Rule)}
    violations.sort(key=lambda v: (order[v.rule], v.version or "", v.subject))
    return SoReport(
        file=name,
        arch=target_arch,
        policy=f"{base}_{target_arch}" if target_arch else base,
        python_abi=f"{floor[0]}.{floor[1]}" if floor else None,
        cxxabi=rules.cxxabi,
        checked=tuple(r for r in Rule if r in checked),
        violations=tuple(violations),
        needed=info.needed,
        requires=tuple((p, v) for p, vs in sorted(by_prefix.items()) if (v := newest(vs))),
        torch_floor=measure_floor(shim_imports(info)),
    )


def _symbol_versions(
    info: ElfInfo, name: str, policy: ManylinuxPolicy, libs: KernelLibraries
) -> list[Violation]:
    out: list[Violation] = []
    by_version: dict[tuple[str, str], list[str]] = {}
    for sym in info.symbols:
        if not sym.defined and sym.version is not None and sym.library is not None:
            by_version.setdefault((sym.library, sym.version), []).append(sym.name)
    for library, version_name in dict.fromkeys(info.version_needs):
        if policy.allows(version_name):
            continue
        symbols = by_version.get((library, version_name)) or ["(version requirement only)"]
        for symbol in symbols:
            cause, fix = _explain_version(symbol, library, version_name, policy, libs)
            out.append(Violation(Rule.SYMBOL_VERSIONS, name, symbol, version_name, cause, fix))
    return out


def _explain_version(
    symbol: str, library: str, version_name: str, policy: ManylinuxPolicy, libs: KernelLibraries
) -> tuple[str, str]:
    prefix, version = split_version(version_name)
    cap = policy.cap(prefix)
    limit = f"{policy.tag} allows {prefix} <= {cap}" if cap else f"{policy.tag} forbids it"
    shown = demangle(symbol)
    image = f"the {policy.name} build image"
    from .remedies import remedy_for_symbol  # its data is read only when a violation needs it

    remedy = remedy_for_symbol(symbol)
    if remedy is not None:
        cause = f"{version_name} symbol {shown} comes from {remedy.origin}; {limit}"
        fix = (
            f"rebuild with 'kernelwheel build', which applies its remedy {remedy.name!r}, using "
            f"a compiler that links libstdc++ as a shared library (the system g++: CXX=g++ "
            f"CC=gcc); or build with an older toolchain, e.g. in {image}"
        )
        return cause, fix
    if prefix == "GLIBC":
        cause = (
            f"{shown} needs glibc {version} from {library}, newer than the policy's; {limit}. "
            f"The object was built against a newer glibc"
        )
        fix = (
            f"build against an older glibc, e.g. in {image}, or stop calling {shown}; "
            f"'kernelwheel build' (its ABI remedies on) binds a libc/libm function to an older "
            f"version where the build's glibc still exports one the policy allows "
            f"(docs/portability.md): a function without one needs the older glibc"
        )
    else:
        first = libs.first_release(version_name)
        origin = f" (first shipped with {first})" if first else ""
        cause = f"{shown} needs {library} {version_name}{origin}; {limit}"
        fix = (
            f"build with an older toolchain, e.g. in {image} (its gcc links newer helpers "
            f"statically), or avoid the API; kernelwheel's remedies cover only the helpers "
            f"listed in its data/abi_remedies.toml (docs/portability.md)"
        )
    return cause, fix


def _needed_libs(
    info: ElfInfo,
    name: str,
    base: str,
    policy: ManylinuxPolicy | None,
    provided: frozenset[str],
    libs: KernelLibraries,
) -> list[Violation]:
    out: list[Violation] = []
    for lib in info.needed:
        if lib.startswith("ld-linux") or lib in ("ld64.so.1", "ld64.so.2"):
            continue  # the dynamic loader itself
        forbidden = libs.forbidden_reason(lib)
        if forbidden is not None:
            message, fix = f"{lib} must not be needed by a kernel wheel", forbidden
        elif policy is not None and lib in policy.whitelist:
            continue
        elif libs.provided_by(lib) is not None or lib in provided:
            continue
        else:
            message = (
                f"{lib} is not a {base} system library, not a torch/CUDA library, "
                f"and the wheel does not ship it"
            )
            fix = (
                "repair the wheel (auditwheel grafts it into <pkg>.libs/), link it statically, "
                "or drop the dependency; if torch or CUDA provides it, add its soname pattern "
                "to [provided] in kernelwheel's data/abi_policy.toml"
            )
        out.append(Violation(Rule.NEEDED_LIBS, name, lib, None, message, fix))
    return out


def _python_abi(info: ElfInfo, name: str, floor: tuple[int, int]) -> list[Violation]:
    stable = load_stable_abi()
    out: list[Violation] = []
    for sym in info.symbols:
        if sym.defined or not is_python_symbol(sym.name):
            continue
        item = stable.get(sym.name)
        if item is None:
            since, message, fix = (
                None,
                f"{sym.name} is not part of CPython's stable ABI, so the cp{floor[0]}"
                f"{floor[1]}-abi3 wheel would fail to import on other Python versions",
                f"compile with -DPy_LIMITED_API=0x{floor[0]:02X}{floor[1]:02X}0000 and use "
                f"only limited-API calls (torch ops need none: register them with "
                f"TORCH_LIBRARY), or ship per-Python (cp3X-cp3X) wheels",
            )
        elif not item.on_linux():
            since, message, fix = (
                item.added_str,
                f"{sym.name} is in the stable ABI only where {item.ifdef} is defined, "
                f"which a Linux release build of CPython is not",
                f"stop using {sym.name}",
            )
        elif item.added > floor:
            since, message, fix = (
                item.added_str,
                f"{sym.name} joined the stable ABI in Python {item.added_str}, but the "
                f"wheel's abi3 tag promises Python {floor[0]}.{floor[1]}",
                f"tag the wheel cp{item.added[0]}{item.added[1]}-abi3 (build with "
                f"Py_LIMITED_API=0x{item.added[0]:02X}{item.added[1]:02X}0000), or avoid "
                f"{sym.name}",
            )
        else:
            continue
        out.append(Violation(Rule.PYTHON_ABI, name, sym.name, since, message, fix))
    return out


def _cxx_abi(info: ElfInfo, name: str, cxxabi: str) -> list[Violation]:
    out: list[Violation] = []

    def found(symbol: str, message: str, fix: str) -> None:
        out.append(Violation(Rule.CXX_ABI, name, symbol, None, message, fix))

    if cxxabi == "cxx98":
        for sym in info.symbols:
            if "__cxx11" in sym.name:
                found(
                    sym.name,
                    f"{demangle(sym.name)} uses the C++11 std::string ABI (__cxx11), but "
                    f"the variant is cxx98 (torch built with _GLIBCXX_USE_CXX11_ABI=0)",
                    "compile with -D_GLIBCXX_USE_CXX11_ABI=0 like the cxx98 torch, or "
                    "label the variant cxx11",
                )
        return out
    # cxx11: the old-ABI spellings in imports that libstdc++ does not provide (unversioned, so
    # from torch or another library) mean the .so was compiled with _GLIBCXX_USE_CXX11_ABI=0 and
    # will not find them in a cxx11 torch.
    for sym in info.symbols:
        if sym.defined or not sym.name.startswith("_Z"):
            continue
        if sym.version is not None and sym.version.startswith(("GLIBCXX_", "CXXABI_")):
            continue
        shown = demangle(sym.name)
        if shown != sym.name and _OLD_ABI_TYPES.search(shown):
            found(
                sym.name,
                f"{shown} uses the pre-C++11 std::string ABI, but the variant is cxx11 "
                f"(torch built with _GLIBCXX_USE_CXX11_ABI=1): it will be an undefined "
                f"symbol at import",
                "compile with -D_GLIBCXX_USE_CXX11_ABI=1 like the cxx11 torch, or label "
                "the variant cxx98",
            )
    return out


def _torch_abi(info: ElfInfo, name: str, libs: KernelLibraries) -> list[Violation]:
    """A stable-ABI build's imports of libtorch's C++ API (data/abi_policy.toml explains why
    these are the unstable ones). libtorch versions no symbol, so a versioned import is some
    other library's (libstdc++'s std:: names, glibc's)."""
    out: list[Violation] = []
    for sym in info.symbols:
        if sym.defined or sym.version is not None or not sym.name.startswith("_Z"):
            continue
        namespace = _torch_namespace(sym.name, libs)
        if namespace is None:
            continue
        cause = (
            f"{demangle(sym.name)} is libtorch's C++ API ({namespace}::), which changes "
            "with every torch release; a stable-ABI build may import from libtorch only "
            "its stable C shim (aoti_torch_*, torch_*), or it fails to load in other torch "
            "versions"
        )
        fix = (
            "use only the stable API (torch/csrc/stable: torch::stable::Tensor, "
            "STABLE_TORCH_LIBRARY; torch/headeronly) where this symbol is used, or remove "
            "the backend from build.toml's torch.stable-abi to build one wheel per torch"
        )
        out.append(Violation(Rule.TORCH_ABI, name, sym.name, None, cause, fix))
    return out


def _torch_namespace(symbol: str, libs: KernelLibraries) -> str | None:
    """The first unstable torch namespace a mangled ``symbol`` names (as its scope or in its
    signature), or None."""
    stable = tuple(f"{s}::" for s in libs.torch_stable_namespaces)
    text = demangle(symbol)
    if text == symbol:  # no demangler here: judge the outermost scope of the mangled name
        match = _mangled_scope(libs.torch_namespaces).match(symbol)
        if match is None or match.group("scope").startswith(_mangled(stable)):
            return None
        scope = match.group("scope")
        return next(n for n in libs.torch_namespaces if scope.startswith(_mangled((n,))))
    for match in _namespace_use(libs.torch_namespaces).finditer(text):
        if not text.startswith(stable, match.start()):
            return match.group(1)
    return None


def _mangled(names: tuple[str, ...]) -> tuple[str, ...]:
    """``("torch::stable::",)`` -> ``("5torch6stable",)``: scopes as mangled names spell them."""
    return tuple(
        "".join(f"{len(part)}{part}" for part in name.split("::") if part) for name in names
    )


@functools.cache
def _namespace_use(namespaces: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(n) for n in namespaces) or "(?!)"
    return re.compile(rf"(?<![\w:])({names})::")


@functools.cache
def _mangled_scope(namespaces: tuple[str, ...]) -> re.Pattern[str]:
    scopes = "|".join(re.escape(m) for m in _mangled(namespaces)) or "(?!)"
    # _Z, special-name prefixes (vtable, typeinfo, thunks, guard variables), a local name (Z),
    # then a nested name (N, its qualifiers) whose first source name is the outermost scope.
    return re.compile(
        r"_Z(?:T[VTIS]|Th-?\d+_|Tv-?\d+_-?\d+_|G[VR]|T[WH])*Z?N[rVK]*[RO]?"
        rf"(?P<scope>(?:{scopes})\w*)"
    )


_SHARED_OBJECT = re.compile(r"\.so(\.[0-9]+)*$")
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError)


def _not_elf(member: str, head: bytes | None) -> SoReport:
    """The report on a wheel entry named like a shared object that is no ELF file (``head``:
    its first bytes; None: a symlink entry)."""
    if head is None:
        cause = (
            "a symlink entry, not a shared object: pip unpacks it as a small text file holding "
            "the link's target, which cannot be loaded"
        )
    else:
        cause = (
            f"named like a shared object but not an ELF file (it starts with {head!r}), so the "
            "wheel cannot work on Linux"
        )
    fix = (
        "ship the compiled extension itself (an ELF shared object built for the wheel's "
        "platform), or drop the file"
    )
    violation = Violation(Rule.ELF, member, member, None, cause, fix)
    return SoReport(member, None, "", None, None, (Rule.ELF,), (violation,), (), ())


def check_wheel(
    wheel_path: str | os.PathLike[str],
    *,
    policy: str | None = DEFAULT_POLICY,
    python_abi: str | None = FROM_TAG,
    cxxabi: str | None = FROM_TAG,
    integrity: bool = True,
    members: Mapping[str, bytes] | None = None,
    torch_stable_abi: bool | str = FROM_TAG,
) -> WheelReport:
    """Check every ELF file in a wheel, and (``integrity``) its RECORD and entries. ``policy``:
    None means the strictest the platform tags claim (manylinux_2_28 for linux_*).
    ``python_abi``/``cxxabi``/``torch_stable_abi``: by default from the file name (a rule it is
    silent on is skipped); a value overrides, None skips. On a Linux-tagged wheel a ``*.so``
    entry that is not ELF, or is a symlink entry, violates the ELF rule. ``members`` (archive
    name -> bytes): the files to-wheel just wrote, not read back, and no RECORD rule."""
    path = Path(wheel_path)
    tags = read_wheel_tags(path.name)
    target = policy if policy is not None else (tags.claimed_policy or DEFAULT_POLICY)
    base, policy_arch = policy_for(target, tags.arch, path.name)
    arch = tags.arch or policy_arch
    py = tags.python_abi if python_abi == FROM_TAG else python_abi
    abi = tags.cxxabi if cxxabi == FROM_TAG else cxxabi
    stable = tags.torch_stable_abi if torch_stable_abi == FROM_TAG else bool(torch_stable_abi)
    floor = _python_floor(py, abi)

    linux = any(p.startswith(("manylinux", "musllinux", "linux")) for p in tags.platforms)
    problems: list[IntegrityProblem] = []
    if members is not None:
        integrity = False  # no archive to verify: these are the bytes just written
        elves, bad_objects = _elf_members(path, members, linux)
    else:
        if path.is_dir():
            raise UsageError(f"{path}: is a folder, not a wheel", hint="pass the .whl files in it")
        elves, bad_objects, problems = _elf_members_of(path, linux, integrity)
    shipped = frozenset(
        n for member_name, info in elves for n in (info.soname, Path(member_name).name) if n
    )
    rules = _Rules(base, floor, abi, arch, stable)
    reports = [_check_elf(info, member_name, rules, shipped) for member_name, info in elves]
    if tags.arch is None and tags.platforms:
        platform = ".".join(tags.platforms)
        cause = (
            f"the wheel's platform tag ({platform}) says it has no native code, but it ships "
            "this ELF file"
        )
        fix = "tag the wheel linux_<arch> (then repair it to manylinux)"
        for i, report in enumerate(reports):
            extra = Violation(Rule.ELF, report.file, platform, None, cause, fix)
            reports[i] = dataclasses.replace(report, violations=(extra, *report.violations))
    reports += bad_objects
    declared, declared_at = declared_floor(_requires_dist(path, members))
    return WheelReport(
        wheel=path.name,
        policy=f"{base}_{arch}" if arch else base,
        arch=arch,
        python_abi=f"{floor[0]}.{floor[1]}" if floor else None,
        cxxabi=abi,
        objects=tuple(reports),
        integrity=tuple(
            Violation(Rule(p.rule), p.subject, p.subject, None, p.cause, p.fix) for p in problems
        ),
        integrity_checked=integrity,
        declared_torch=declared,
        declared_floor=declared_at,
    )


_METADATA_CAP = 1 << 20  # a METADATA larger than this is not read for its torch requirement


def _requires_dist(path: Path, members: Mapping[str, bytes] | None) -> list[str]:
    """METADATA's Requires-Dist lines (none when there is no single readable METADATA: the
    record and wheel rules name that)."""
    if members is not None:
        found = dist_info_entries(members, "METADATA")
        data = members[found[0]] if len(found) == 1 else b""
    else:
        try:
            with zipfile.ZipFile(path) as zf:
                infos = [zf.getinfo(n) for n in dist_info_entries(zf.namelist(), "METADATA")]
                if len(infos) != 1 or infos[0].file_size > _METADATA_CAP or bomb_cause(infos[0]):
                    return []
                data = zf.read(infos[0])
        except (*_UNREADABLE, OSError):
            return []
    return list(parse_metadata(data).get_all("Requires-Dist") or ())


def _elf_members(
    path: Path, members: Mapping[str, bytes], linux: bool
) -> tuple[list[tuple[str, ElfInfo]], list[SoReport]]:
    """The ELF members held in memory (in name order), and the ``*.so`` ones that are not ELF."""
    out: list[tuple[str, ElfInfo]] = []
    bad: list[SoReport] = []
    for name, data in sorted(members.items()):
        if is_elf(data):
            out.append((name, _read_member(path, name, Path(name).name, data)))
        elif linux and _SHARED_OBJECT.search(name) is not None:
            bad.append(_not_elf(name, data[:4]))
    return out, bad


def _read_member(wheel: Path, name: str, local: str | Path, data: bytes | None = None) -> ElfInfo:
    """:func:`read_elf` of the wheel member ``name`` (its bytes, or extracted to ``local``)."""
    try:
        return read_elf(local, data)
    except NotElfError as exc:
        raise WheelError(
            f"{wheel.name}: {name} looks like ELF but cannot be read: {exc}",
            hint="rebuild the wheel",
        ) from exc


def _elf_members_of(
    path: Path, linux: bool, integrity: bool
) -> tuple[list[tuple[str, ElfInfo]], list[SoReport], list[IntegrityProblem]]:
    """The ELF files of a wheel on disk (in archive order), the entries named like shared
    objects that are not ELF or are symlinks, and (``integrity``) the RECORD problems."""
    problems: list[IntegrityProblem] = []
    bad_objects: list[SoReport] = []
    try:
        with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory(prefix="kw-check-") as tmp:
            if integrity:
                problems = integrity_problems(zf) + wheel_rule_problems(path.name, zf)
            unreadable = {p.subject for p in problems if "decompressed" in p.cause}
            members: list[tuple[str, ElfInfo]] = []
            for index, member in enumerate(zf.infolist()):
                named_so = linux and _SHARED_OBJECT.search(member.filename) is not None
                # A zip bomb is never unpacked (the record rule names it when integrity is on).
                bomb = bomb_cause(member) is not None
                if member.is_dir() or member.filename in unreadable or bomb:
                    continue
                if named_so and is_symlink_entry(member):
                    bad_objects.append(_not_elf(member.filename, None))
                    continue
                try:
                    with zf.open(member) as f:
                        head = f.read(4)
                except _UNREADABLE as exc:
                    raise WheelError(
                        f"{path.name}: {member.filename} cannot be decompressed ({exc})",
                        hint="the wheel is corrupt: rebuild or download it again",
                    ) from None
                if not is_elf(head):
                    if named_so:
                        bad_objects.append(_not_elf(member.filename, head))
                    continue
                # Extract under a safe local name: the archive name is only for display.
                local = Path(tmp) / f"{index}-{Path(member.filename).name}"
                with zf.open(member) as src, local.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                members.append((member.filename, _read_member(path, member.filename, local)))
    except FileNotFoundError as exc:
        raise WheelError(f"{path}: no such wheel", hint="check the path") from exc
    except zipfile.BadZipFile as exc:
        raise WheelError(f"{path}: not a zip archive ({exc})", hint="rebuild the wheel") from exc
    return members, bad_objects, problems
