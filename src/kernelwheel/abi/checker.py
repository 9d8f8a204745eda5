"""The ABI rules: one shared object, or every ELF file of a wheel, against a manylinux policy,
the CPython stable ABI of the wheel's abi3 tag, the allowed libraries, and the variant's C++ ABI.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..errors import UsageError, WheelError
from ..model.variant import CxxAbi
from ._elf import ElfInfo, NotElfError, demangle, is_elf, read_elf
from .policy import (
    DEFAULT_POLICY,
    KernelLibraries,
    ManylinuxPolicy,
    load_kernel_libraries,
    load_policy,
    normalize_policy,
    parse_platform_tag,
    split_version,
    version_key,
)
from .remedies import remedy_for_symbol
from .report import Rule, SoReport, Violation, WheelReport
from .stable_abi import is_python_symbol, load_stable_abi, parse_python_version

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




def read_wheel_tags(filename: str) -> WheelTags:
    """Parse a wheel file name (PEP 427). Raises WheelError for one that is not valid."""
    try:
        _, version, _, tags = parse_wheel_filename(filename)
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
    arches: set[str] = set()
    claimed: list[ManylinuxPolicy] = []
    for platform in platforms:
        base, arch = parse_platform_tag(platform)
        if arch is not None:
            arches.add(arch)
        if base is not None and arch is not None:
            claimed.append(load_policy(base, arch))
    if len(arches) > 1:
        raise WheelError(
            f"{filename}: platform tags name several architectures ({', '.join(sorted(arches))})",
            hint="build one wheel per architecture",
        )
    strictest = max(claimed, key=lambda p: p.priority).name if claimed else None
    return WheelTags(
        python_abi=python_abi,
        cxxabi=_abi_name(CxxAbi.in_local_version(version.local)),
        arch=next(iter(arches), None),
        claimed_policy=strictest,
        platforms=platforms,
    )


def _abi_name(abi: CxxAbi | None) -> str | None:
    return abi.value if abi is not None else None


def _check_cxxabi_value(cxxabi: str | None) -> None:
    if cxxabi is not None and cxxabi not in CXX_ABIS:
        raise UsageError(
            f"unknown C++ ABI {cxxabi!r}", hint=f"use one of {', '.join(CXX_ABIS)} (or none)"
        )


def _parse_python_abi(python_abi: str | None) -> tuple[int, int] | None:
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
    provided: Iterable[str] = (),
    name: str | None = None,
) -> SoReport:
    """Check one shared object.

    ``python_abi``: the abi3 floor ("3.9" for cp39-abi3), None to skip the Python rule.
    ``cxxabi``: "cxx11"/"cxx98", None to skip the C++ ABI rule. ``arch``: the wheel's
    architecture (the ELF's own when None). ``provided``: sonames shipped next to it in the
    same wheel. ``name``: how the report names the file (default: the path).
    """
    _check_cxxabi_value(cxxabi)
    floor = _parse_python_abi(python_abi)
    try:
        info = read_elf(path)
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file", hint="pass the path of a .so or a wheel") from exc
    except NotElfError as exc:
        raise UsageError(str(exc), hint="pass a shared object (.so) or a wheel") from exc
    return _check_elf(
        info,
        name=name or str(path),
        policy=policy,
        python_floor=floor,
        cxxabi=cxxabi,
        arch=arch,
        provided=frozenset(provided),
        libs=load_kernel_libraries(),
    )


def _check_elf(
    info: ElfInfo,
    *,
    name: str,
    policy: str,
    python_floor: tuple[int, int] | None,
    cxxabi: str | None,
    arch: str | None,
    provided: frozenset[str],
    libs: KernelLibraries,
) -> SoReport:
    base, _ = normalize_policy(policy)
    violations: list[Violation] = []
    checked: list[Rule] = [Rule.ELF]

    target_arch = arch or info.arch
    if info.arch is None:
        violations.append(
            Violation(
                Rule.ELF,
                name,
                info.machine,
                None,
                f"unsupported machine type {info.machine}: no manylinux policy covers it",
                "build the extension for x86_64 or aarch64",
            )
        )
    elif arch is not None and info.arch != arch:
        violations.append(
            Violation(
                Rule.ELF,
                name,
                info.machine,
                None,
                f"the object is {info.arch} but the wheel is tagged {arch}",
                f"build it for {arch} (cross compiler as nvcc -ccbin) or tag the wheel {info.arch}",
            )
        )
    if info.exec_stack:
        violations.append(
            Violation(
                Rule.ELF,
                name,
                "PT_GNU_STACK",
                None,
                "the object asks for an executable stack (PT_GNU_STACK is executable or missing): "
                "glibc >= 2.41 refuses to dlopen it",
                "link with -Wl,-z,noexecstack (nvcc: -Xlinker -z,noexecstack); an assembly or "
                "object file without a .note.GNU-stack section causes it",
            )
        )

    target: ManylinuxPolicy | None = None
    if target_arch is not None:
        target = load_policy(base, target_arch)
        checked.append(Rule.SYMBOL_VERSIONS)
        violations += _symbol_versions(info, name, target, libs)
    checked.append(Rule.NEEDED_LIBS)
    violations += _needed_libs(info, name, base, target, provided, libs)
    if python_floor is not None:
        checked.append(Rule.PYTHON_ABI)
        violations += _python_abi(info, name, python_floor)
    if cxxabi is not None:
        checked.append(Rule.CXX_ABI)
        violations += _cxx_abi(info, name, cxxabi)

    requires: dict[str, tuple[tuple[int, ...], str]] = {}
    for _, version_name in info.version_needs:
        prefix, version = split_version(version_name)
        key = version_key(version)
        if key is None or (target is not None and prefix not in target.symbol_versions):
            continue
        if prefix not in requires or key > requires[prefix][0]:
            requires[prefix] = (key, version)

    order = {rule: i for i, rule in enumerate(Rule)}
    violations.sort(key=lambda v: (order[v.rule], v.version or "", v.subject))
    return SoReport(
        file=name,
        arch=target_arch,
        policy=f"{base}_{target_arch}" if target_arch else base,
        python_abi=f"{python_floor[0]}.{python_floor[1]}" if python_floor else None,
        cxxabi=cxxabi,
        checked=tuple(r for r in Rule if r in checked),
        violations=tuple(violations),
        needed=info.needed,
        requires=tuple((p, v) for p, (_, v) in sorted(requires.items())),
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
    remedy = remedy_for_symbol(symbol)
    if remedy is not None:
        cause = f"{version_name} symbol {shown} comes from {remedy.origin}; {limit}"
        fix = (
            f"build with kernelwheel's remedies (kernelwheel.abi.remedies.remedy_flags(), remedy "
            f"{remedy.name!r}) or with an older toolchain, e.g. in {image}"
        )
        return cause, fix
    if prefix == "GLIBC":
        cause = (
            f"{shown} needs glibc {version} from {library}, newer than the policy's; {limit}. "
            f"The object was built against a newer glibc"
        )
        fix = f"build against an older glibc, e.g. in {image}, or stop calling {shown}"
    else:
        first = libs.first_release(version_name)
        origin = f" (first shipped with {first})" if first else ""
        cause = f"{shown} needs {library} {version_name}{origin}; {limit}"
        fix = (
            f"build with an older toolchain, e.g. in {image} (its gcc links newer helpers "
            f"statically), or avoid the API; kernelwheel's remedies cover only the helpers "
            f"listed in kernelwheel.abi.remedies"
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
        reason = libs.forbidden_reason(lib)
        if reason is not None:
            out.append(
                Violation(
                    Rule.NEEDED_LIBS,
                    name,
                    lib,
                    None,
                    f"{lib} must not be needed by a kernel wheel",
                    reason,
                )
            )
            continue
        if policy is not None and lib in policy.whitelist:
            continue
        if libs.provided_by(lib) is not None or lib in provided:
            continue
        out.append(
            Violation(
                Rule.NEEDED_LIBS,
                name,
                lib,
                None,
                f"{lib} is not a {base} system library, not a torch/CUDA library, "
                f"and the wheel does not ship it",
                "repair the wheel (auditwheel grafts it into <pkg>.libs/), link it statically, "
                "or drop the dependency; if torch or CUDA provides it, add its soname pattern "
                "to [provided] in kernelwheel's data/abi_policy.toml",
            )
        )
    return out


def _python_abi(info: ElfInfo, name: str, floor: tuple[int, int]) -> list[Violation]:
    stable = load_stable_abi()
    floor_str = f"{floor[0]}.{floor[1]}"
    out: list[Violation] = []
    for sym in info.symbols:
        if sym.defined or not is_python_symbol(sym.name):
            continue
        item = stable.get(sym.name)
        if item is None:
            out.append(
                Violation(
                    Rule.PYTHON_ABI,
                    name,
                    sym.name,
                    None,
                    f"{sym.name} is not part of CPython's stable ABI, so the cp{floor[0]}"
                    f"{floor[1]}-abi3 wheel would fail to import on other Python versions",
                    f"compile with -DPy_LIMITED_API=0x{floor[0]:02X}{floor[1]:02X}0000 and use "
                    f"only limited-API calls (torch ops need none: register them with "
                    f"TORCH_LIBRARY), or ship per-Python (cp3X-cp3X) wheels",
                )
            )
        elif not item.on_linux():
            out.append(
                Violation(
                    Rule.PYTHON_ABI,
                    name,
                    sym.name,
                    item.added_str,
                    f"{sym.name} is in the stable ABI only where {item.ifdef} is defined, "
                    f"which a Linux release build of CPython is not",
                    f"stop using {sym.name}",
                )
            )
        elif item.added > floor:
            out.append(
                Violation(
                    Rule.PYTHON_ABI,
                    name,
                    sym.name,
                    item.added_str,
                    f"{sym.name} joined the stable ABI in Python {item.added_str}, but the "
                    f"wheel's abi3 tag promises Python {floor_str}",
                    f"tag the wheel cp{item.added[0]}{item.added[1]}-abi3 (build with "
                    f"Py_LIMITED_API=0x{item.added[0]:02X}{item.added[1]:02X}0000), or avoid "
                    f"{sym.name}",
                )
            )
    return out


def _cxx_abi(info: ElfInfo, name: str, cxxabi: str) -> list[Violation]:
    out: list[Violation] = []
    if cxxabi == "cxx98":
        for sym in info.symbols:
            if "__cxx11" in sym.name:
                out.append(
                    Violation(
                        Rule.CXX_ABI,
                        name,
                        sym.name,
                        None,
                        f"{demangle(sym.name)} uses the C++11 std::string ABI (__cxx11), but "
                        f"the variant is cxx98 (torch built with _GLIBCXX_USE_CXX11_ABI=0)",
                        "compile with -D_GLIBCXX_USE_CXX11_ABI=0 like the cxx98 torch, or "
                        "label the variant cxx11",
                    )
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
            out.append(
                Violation(
                    Rule.CXX_ABI,
                    name,
                    sym.name,
                    None,
                    f"{shown} uses the pre-C++11 std::string ABI, but the variant is cxx11 "
                    f"(torch built with _GLIBCXX_USE_CXX11_ABI=1): it will be an undefined "
                    f"symbol at import",
                    "compile with -D_GLIBCXX_USE_CXX11_ABI=1 like the cxx11 torch, or label "
                    "the variant cxx98",
                )
            )
    return out


def check_wheel(
    wheel_path: str | os.PathLike[str],
    *,
    policy: str | None = DEFAULT_POLICY,
    python_abi: str | None = FROM_TAG,
    cxxabi: str | None = FROM_TAG,
    members: Mapping[str, bytes] | None = None,
) -> WheelReport:
    """Check every ELF file in a wheel.

    ``policy``: the target manylinux policy; None means the strictest one the wheel's platform
    tags claim (manylinux_2_28 for a linux_* wheel). ``python_abi``/``cxxabi``: taken from the
    file name by default (cp3X-abi3 tag; cxx11/cxx98 in the local version), where absent the
    rule is skipped; pass a value to override or None to skip. ``members`` (archive name ->
    bytes): the wheel's files, when the caller still holds what it just wrote; the archive is
    then not read back (``wheel_path`` still gives the name and its tags).
    """
    path = Path(wheel_path)
    tags = read_wheel_tags(path.name)
    target = policy if policy is not None else (tags.claimed_policy or DEFAULT_POLICY)
    base, policy_arch = normalize_policy(target)
    if policy_arch is not None and tags.arch is not None and policy_arch != tags.arch:
        raise UsageError(
            f"policy {target!r} is for {policy_arch}, but {path.name} is {tags.arch}",
            hint=f"pass the policy without an arch suffix, e.g. {base!r}",
        )
    arch = tags.arch or policy_arch
    py = tags.python_abi if python_abi == FROM_TAG else python_abi
    abi = tags.cxxabi if cxxabi == FROM_TAG else cxxabi
    _check_cxxabi_value(abi)
    floor = _parse_python_abi(py)
    libs = load_kernel_libraries()

    if members is not None:
        elves = _elf_members(path, members)
    else:
        elves = _elf_members_of(path)
    shipped = frozenset(
        n for member_name, info in elves for n in (info.soname, Path(member_name).name) if n
    )
    reports: list[SoReport] = []
    for member_name, info in elves:
        report = _check_elf(
            info,
            name=member_name,
            policy=base,
            python_floor=floor,
            cxxabi=abi,
            arch=arch,
            provided=shipped,
            libs=libs,
        )
        if tags.arch is None and tags.platforms:
            extra = Violation(
                Rule.ELF,
                member_name,
                ".".join(tags.platforms),
                None,
                f"the wheel's platform tag ({'.'.join(tags.platforms)}) says it has no native "
                f"code, but it ships this ELF file",
                "tag the wheel linux_<arch> (then repair it to manylinux)",
            )
            report = dataclasses.replace(report, violations=(extra, *report.violations))
        reports.append(report)
    return WheelReport(
        wheel=path.name,
        policy=f"{base}_{arch}" if arch else base,
        arch=arch,
        python_abi=f"{floor[0]}.{floor[1]}" if floor else None,
        cxxabi=abi,
        objects=tuple(reports),
    )


def _elf_members(path: Path, members: Mapping[str, bytes]) -> list[tuple[str, ElfInfo]]:
    """The ELF files among a wheel's members held in memory, in archive order."""
    out: list[tuple[str, ElfInfo]] = []
    for name in sorted(members):
        data = members[name]
        if len(data) < 4 or not is_elf(data[:4]):
            continue
        try:
            out.append((name, read_elf(Path(name).name, data)))
        except NotElfError as exc:
            raise WheelError(
                f"{path.name}: {name} looks like ELF but cannot be read: {exc}",
                hint="rebuild the wheel",
            ) from exc
    return out


def _elf_members_of(path: Path) -> list[tuple[str, ElfInfo]]:
    """The ELF files of a wheel on disk, in archive order."""
    try:
        with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory(prefix="kw-check-") as tmp:
            members: list[tuple[str, ElfInfo]] = []
            for index, member in enumerate(zf.infolist()):
                if member.is_dir() or member.file_size < 4:
                    continue
                with zf.open(member) as f:
                    if not is_elf(f.read(4)):
                        continue
                # Extract under a safe local name: the archive name is only for display.
                local = Path(tmp) / f"{index}-{Path(member.filename).name}"
                with zf.open(member) as src, local.open("wb") as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                try:
                    members.append((member.filename, read_elf(local)))
                except NotElfError as exc:
                    raise WheelError(
                        f"{path.name}: {member.filename} looks like ELF but cannot be read: {exc}",
                        hint="rebuild the wheel",
                    ) from exc
    except FileNotFoundError as exc:
        raise WheelError(f"{path}: no such wheel", hint="check the path") from exc
    except zipfile.BadZipFile as exc:
        raise WheelError(f"{path}: not a zip archive ({exc})", hint="rebuild the wheel") from exc
    return members
