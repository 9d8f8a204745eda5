"""Policy data: manylinux caps from auditwheel's installed policy JSON, plus kernelwheel's own
library lists (``data/abi_policy.toml``: torch/CUDA libraries that are provided, never grafted).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import functools
import importlib.resources
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._toml import Located, read_toml
from ..errors import LocatedError, UsageError
from ._elf import ARCHES

DEFAULT_POLICY = "manylinux_2_28"

# Longest first, so "ppc64le" is not read as "ppc64" + "le".
KNOWN_ARCHES = tuple(sorted(set(ARCHES.values()), key=len, reverse=True))


class AbiDataError(LocatedError, UsageError):
    """The ABI data kernelwheel reads is invalid; the message names the file and the key."""


_VERSION_NUM = re.compile(r"^\d+(?:\.\d+)*$")


def version_key(version: str) -> tuple[int, ...] | None:
    """Numeric sort key of "2.17" / "3.4.21"; None for labels such as "TM_1" or "FLOAT128"."""
    return tuple(map(int, version.split("."))) if _VERSION_NUM.match(version) else None


def newest(versions: Iterable[str]) -> str | None:
    """The highest numeric version of ``versions`` ("2.28" of "2.17", "2.28"), None without one."""
    keyed = [(key, v) for v in versions if (key := version_key(v)) is not None]
    return max(keyed)[1] if keyed else None


def split_version(name: str) -> tuple[str, str]:
    """Split "GLIBC_2.32" -> ("GLIBC", "2.32"); "CXXABI_TM_1" -> ("CXXABI", "TM_1")."""
    prefix, _, version = name.partition("_")
    return prefix, version


@dataclass(frozen=True)
class ManylinuxPolicy:
    """One auditwheel policy for one architecture, e.g. manylinux_2_28 on x86_64."""

    name: str  # "manylinux_2_28"
    arch: str  # "x86_64"
    priority: int  # auditwheel's: higher is stricter (older glibc)
    symbol_versions: Mapping[str, frozenset[str]]  # "GLIBC" -> {"2.2.5", ..., "2.28"}
    whitelist: frozenset[str]  # system libraries every compliant distribution provides

    @property
    def tag(self) -> str:
        return f"{self.name}_{self.arch}"

    def allows(self, version_name: str) -> bool:
        """Whether an import bound to ``version_name`` ("GLIBC_2.32") complies; versions of a
        library the policy does not cap (a torch library's own) always do, as in auditwheel."""
        prefix, version = split_version(version_name)
        allowed = self.symbol_versions.get(prefix)
        return allowed is None or version in allowed

    def cap(self, prefix: str) -> str | None:
        """Highest numeric version the policy allows for ``prefix`` ("GLIBC" -> "2.28")."""
        return newest(self.symbol_versions.get(prefix, ()))


@functools.cache
def _manylinux_json() -> tuple[dict[str, Any], ...]:
    resource = importlib.resources.files("auditwheel") / "policy" / "manylinux-policy.json"
    try:
        data = json.loads(resource.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # pragma: no cover - broken installation
        raise UsageError(
            f"cannot read auditwheel's policy data ({resource}): {exc}",
            hint="reinstall auditwheel (pip install --force-reinstall 'auditwheel>=6.4,<7')",
        ) from exc
    if not isinstance(data, list) or not all(
        isinstance(p, dict) and {"name", "priority", "symbol_versions", "lib_whitelist"} <= set(p)
        for p in data
    ):  # pragma: no cover - auditwheel changed its format
        raise UsageError(
            f"auditwheel's policy data ({resource}) has an unexpected format",
            hint="install an auditwheel version kernelwheel supports: 'auditwheel>=6.4,<7'",
        )
    return tuple(data)


def normalize_policy(name: str) -> tuple[str, str | None]:
    """Policy name and arch of "manylinux_2_28", "manylinux_2_28_x86_64", "manylinux2014"... Raises
    UsageError naming the known policies."""
    text = name.strip()
    arch = next((a for a in KNOWN_ARCHES if text.endswith("_" + a)), None)
    if arch is not None:
        text = text[: -len(arch) - 1]
    # Loosest first; the plain "linux" policy (priority 0) is not a target.
    targets = sorted((p for p in _manylinux_json() if p["priority"]), key=lambda p: p["priority"])
    for p in targets:
        if text == p["name"] or text in p.get("aliases", ()):
            return str(p["name"]), arch
    raise UsageError(
        f"unknown manylinux policy {name!r}",
        hint=f"use one of: {', '.join(p['name'] for p in targets)} (auditwheel's policy names)",
    )


def policy_for(
    name: str, arch: str | None, what: str, hint: str = "the policy without an arch suffix, e.g. "
) -> tuple[str, str | None]:
    """:func:`normalize_policy`, refusing an arch suffix other than ``arch`` (that of ``what``)."""
    base, name_arch = normalize_policy(name)
    if name_arch is not None and arch is not None and name_arch != arch:
        raise UsageError(
            f"policy {name!r} is for {name_arch}, but {what} is {arch}", hint=f"pass {hint}{base!r}"
        )
    return base, name_arch


@functools.cache
def load_policy(name: str = DEFAULT_POLICY, arch: str = "x86_64") -> ManylinuxPolicy:
    """The auditwheel policy ``name`` (any spelling normalize_policy accepts) for ``arch``."""
    base, _ = policy_for(name, arch, "the object")
    p = next(p for p in _manylinux_json() if p["name"] == base)  # normalize_policy found it
    versions = p["symbol_versions"].get(arch)
    if versions is None:
        raise UsageError(
            f"auditwheel's policy {base} has no symbol-version caps for {arch}",
            hint=f"{base} covers {', '.join(sorted(p['symbol_versions']))}",
        )
    return ManylinuxPolicy(
        name=base,
        arch=arch,
        priority=int(p["priority"]),
        symbol_versions={str(k): frozenset(str(x) for x in v) for k, v in versions.items()},
        whitelist=frozenset(str(x) for x in p["lib_whitelist"]),
    )


def parse_platform_tag(tag: str) -> tuple[str | None, str | None]:
    """A wheel platform tag -> (manylinux policy name or None, arch or None).
    "manylinux_2_28_x86_64" -> ("manylinux_2_28", "x86_64"); "manylinux2014_aarch64" ->
    ("manylinux_2_17", "aarch64"); "linux_x86_64" -> (None, "x86_64"); "any" -> (None, None)."""
    arch = next((a for a in KNOWN_ARCHES if tag.endswith("_" + a)), None)
    if arch is None:
        return None, None
    if tag.startswith("manylinux"):
        with contextlib.suppress(UsageError):
            return normalize_policy(tag)[0], arch
    return None, arch


# --- kernelwheel's data: libraries that are provided by torch / CUDA, or forbidden ------------


@dataclass(frozen=True)
class GpuRuntime:
    """What only one GPU runtime's builds carry (``[gpu-runtime.<backend>]``): DT_NEEDED
    library globs and ELF section names; ``cuda_runtime`` the library whose soname ends in the
    toolkit major it was linked against."""

    libraries: tuple[str, ...]
    sections: tuple[str, ...]
    cuda_runtime: str | None = None

    def needs(self, soname: str) -> bool:
        return any(fnmatch.fnmatchcase(soname, p) for p in self.libraries)


@dataclass(frozen=True)
class KernelLibraries:
    """The contents of ``data/abi_policy.toml``."""

    provided: Mapping[str, tuple[str, ...]]  # group ("torch", "cuda", ...) -> soname patterns
    forbidden: tuple[tuple[str, str], ...]  # (soname pattern, reason)
    toolchain: Mapping[str, Mapping[str, str]]  # "GLIBCXX" -> {"3.4.29": "gcc 11.1"}
    source: Path
    # [torch-stable-abi]: torch's C++ namespaces, and those of them that are the stable API
    torch_namespaces: tuple[str, ...] = ()
    torch_stable_namespaces: tuple[str, ...] = ()
    # [gpu-runtime.<backend kind>]: how an extension shows the GPU runtime it was built for
    gpu_runtimes: Mapping[str, GpuRuntime] = dataclasses.field(default_factory=dict)

    def exclude_patterns(self) -> tuple[str, ...]:
        """Every provided pattern: never grafted by repair (``auditwheel --exclude``)."""
        return tuple(p for group in self.provided.values() for p in group)

    def provided_by(self, soname: str) -> str | None:
        """The group ("torch", "cuda", ...) whose pattern matches ``soname``."""
        for group, patterns in self.provided.items():
            if any(fnmatch.fnmatchcase(soname, p) for p in patterns):
                return group
        return None

    def forbidden_reason(self, soname: str) -> str | None:
        return next((why for p, why in self.forbidden if fnmatch.fnmatchcase(soname, p)), None)

    def first_release(self, version_name: str) -> str | None:
        """The first release shipping a version ("GLIBCXX_3.4.29" -> "gcc 11.1"), if known."""
        prefix, version = split_version(version_name)
        return self.toolchain.get(prefix, {}).get(version)


def data_file(name: str) -> Path:
    return Path(__file__).resolve().parent.parent / "data" / name


@functools.cache
def load_kernel_libraries(path: Path | None = None) -> KernelLibraries:
    """Load and validate ``data/abi_policy.toml`` (or ``path``)."""
    source = path or data_file("abi_policy.toml")
    doc = Located(read_toml(source, error=AbiDataError), file=source, error=AbiDataError)
    doc.check_keys(("provided", "forbidden", "toolchain", "torch-stable-abi", "gpu-runtime"))
    provided: dict[str, tuple[str, ...]] = {}
    if (table := doc.table("provided")) is not None:
        provided = {group: table.string_list(group) or () for group in table.keys()}
    toolchain: dict[str, dict[str, str]] = {}
    if (table := doc.table("toolchain")) is not None:
        toolchain = {prefix: table.string_table(prefix) or {} for prefix in table.keys()}
    namespaces: tuple[str, ...] = ()
    stable: tuple[str, ...] = ()
    if (table := doc.table("torch-stable-abi")) is not None:
        table.check_keys(("namespaces", "stable"))
        namespaces = table.string_list("namespaces") or ()
        stable = table.string_list("stable") or ()
    runtimes: dict[str, GpuRuntime] = {}
    if (table := doc.table("gpu-runtime")) is not None:
        for kind in table.keys():
            entry = table.table(kind)
            assert entry is not None
            entry.check_keys(("libraries", "sections", "cuda-runtime"))
            runtimes[kind] = GpuRuntime(
                libraries=entry.string_list("libraries") or (),
                sections=entry.string_list("sections") or (),
                cuda_runtime=entry.string("cuda-runtime", nonempty=True),
            )
    return KernelLibraries(
        gpu_runtimes=runtimes,
        provided=provided,
        forbidden=tuple((doc.string_table("forbidden") or {}).items()),
        toolchain=toolchain,
        source=source,
        torch_namespaces=namespaces,
        torch_stable_namespaces=stable,
    )
