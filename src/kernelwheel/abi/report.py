"""Frozen ABI reports: one per shared object, one per wheel. The CLI renders them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from ..model.variant import TorchVersion
from .torch_floor import ShimFloor, floor_warning, load_shim_table, measure_floor


class Rule(str, Enum):
    """The rules ``kernelwheel check`` applies to every shared object."""

    SYMBOL_VERSIONS = "symbol-versions"  # versioned imports vs the manylinux policy's caps
    PYTHON_ABI = "python-abi"  # Python C-API imports vs the stable ABI of the cp3X-abi3 tag
    NEEDED_LIBS = "needed-libs"  # DT_NEEDED vs policy whitelist + torch/CUDA + the wheel's own
    CXX_ABI = "cxx-abi"  # __cxx11 mangling vs the variant's C++ ABI (cxx11/cxx98)
    TORCH_ABI = "torch-abi"  # a stable-ABI build imports no libtorch C++ API (only its C shim)
    ELF = "elf"  # ELF at all; architecture matches the wheel; no executable stack
    RECORD = "record"  # the wheel as a whole: RECORD lists every entry, hashes match, no ../
    WHEEL = "wheel"  # the wheel installs its own package only; METADATA agrees with its name

    @property
    def per_object(self) -> bool:
        """Whether the rule judges each shared object (a column of ``check``'s table); RECORD
        and WHEEL judge the wheel."""
        return self not in (Rule.RECORD, Rule.WHEEL)

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    Rule.SYMBOL_VERSIONS: "versioned glibc/libstdc++/libgcc imports within the policy's caps",
    Rule.PYTHON_ABI: "Python C-API imports within the stable ABI of the wheel's abi3 tag",
    Rule.NEEDED_LIBS: "needed libraries are system, torch/CUDA, or shipped in the wheel",
    Rule.CXX_ABI: "std::string mangling matches the variant's C++ ABI",
    Rule.TORCH_ABI: "a stable-ABI build (+torchX.Y.stable...) imports no libtorch C++ API, "
    "only its stable C shim",
    Rule.ELF: "files named .so are ELF objects of the wheel's architecture; no executable stack",
    Rule.RECORD: "RECORD lists every file once with a matching hash; no duplicate, '../' or "
    "symlink entries (what pip relies on)",
    Rule.WHEEL: "every file lies under the wheel's own package or .dist-info; no .pth, "
    "sitecustomize or .data/scripts; METADATA's Name, Version and torch agree with the file name",
}


@dataclass(frozen=True)
class Violation:
    rule: Rule
    file: str  # the .so, as a path inside the wheel (or the path given)
    subject: str  # the symbol or library
    version: str | None  # e.g. "GLIBC_2.32", "3.10" (stable-ABI addition), or None
    cause: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rule": self.rule.value}

    def one_line(self) -> str:
        version = f" ({self.version})" if self.version else ""
        return f"[{self.rule.value}] {self.file}: {self.subject}{version}: {self.cause}"


@dataclass(frozen=True)
class SoReport:
    """The verdict on one shared object."""

    file: str
    arch: str | None
    policy: str  # the target platform tag, e.g. "manylinux_2_28_x86_64"
    python_abi: str | None  # "3.9" for cp39-abi3; None when not checked
    cxxabi: str | None  # "cxx11" / "cxx98"; None when not checked
    checked: tuple[Rule, ...]
    violations: tuple[Violation, ...]
    needed: tuple[str, ...]
    requires: tuple[tuple[str, str], ...]  # highest version needed per prefix: ("GLIBC", "2.17")
    torch_floor: ShimFloor | None = None  # the torch its libtorch shim imports need

    @property
    def ok(self) -> bool:
        return not self.violations

    def status(self, rule: Rule) -> bool | None:
        """True: passed; False: violated; None: not checked."""
        return not any(v.rule is rule for v in self.violations) if rule in self.checked else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "arch": self.arch,
            "policy": self.policy,
            "python_abi": self.python_abi,
            "cxxabi": self.cxxabi,
            "ok": self.ok,
            "rules": {r.value: self.status(r) for r in Rule if r.per_object},
            "needed": list(self.needed),
            "requires": dict(self.requires),
            "violations": [v.to_dict() for v in self.violations],
            "torch_floor": self.torch_floor.to_dict() if self.torch_floor else None,
        }


@dataclass(frozen=True)
class WheelReport:
    """The verdict on every ELF file of one wheel."""

    wheel: str  # file name
    policy: str  # the target platform tag, e.g. "manylinux_2_28_x86_64"
    arch: str | None
    python_abi: str | None
    cxxabi: str | None
    objects: tuple[SoReport, ...]
    integrity: tuple[Violation, ...] = ()  # RECORD and WHEEL violations of the wheel as a whole
    integrity_checked: bool = False
    # METADATA's torch requirement as written (None: it has none) and the lowest torch series
    # it admits (None: no lower bound).
    declared_torch: str | None = None
    declared_floor: TorchVersion | None = None

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.objects) and not self.integrity

    @property
    def measured_torch(self) -> ShimFloor:
        """The torch floor the shim imports of all its objects set together."""
        return measure_floor(
            n for o in self.objects if o.torch_floor for n in o.torch_floor.imports
        )

    @property
    def torch_floor_warning(self) -> str:
        """Why the declared torch floor is lower than the measured one ('' when it is not)."""
        return floor_warning(self.declared_floor, self.measured_torch, load_shim_table())

    @property
    def violations(self) -> tuple[Violation, ...]:
        return (*self.integrity, *(v for o in self.objects for v in o.violations))

    def status(self, rule: Rule) -> bool | None:
        if not rule.per_object:
            checked = self.integrity_checked
            return not any(v.rule is rule for v in self.integrity) if checked else None
        states = [o.status(rule) for o in self.objects]
        return None if all(s is None for s in states) else all(s is not False for s in states)

    def summary(self, *, limit: int = 8) -> str:
        """A few lines naming the violations, for error messages."""
        if self.ok:
            return f"{self.wheel}: complies with {self.policy}"
        vs = self.violations
        lines = [f"{self.wheel}: {len(vs)} ABI violation(s) against {self.policy}:"]
        lines += [f"  {v.one_line()}" for v in vs[:limit]]
        if len(vs) > limit:
            lines.append(f"  ... and {len(vs) - limit} more (run 'kernelwheel check' to see all)")
        fixes = list(dict.fromkeys(v.fix for v in vs))[:3]
        lines += [f"  fix: {f}" for f in fixes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "wheel": self.wheel,
            "policy": self.policy,
            "arch": self.arch,
            "python_abi": self.python_abi,
            "cxxabi": self.cxxabi,
            "ok": self.ok,
            "rules": {r.value: self.status(r) for r in Rule},
            "integrity": [v.to_dict() for v in self.integrity],
            "objects": [o.to_dict() for o in self.objects],
            "torch_floor": {
                "declared": self.declared_torch,
                "declared_floor": str(self.declared_floor) if self.declared_floor else None,
                "measured": self.measured_torch.to_dict(),
                "warning": self.torch_floor_warning or None,
            },
        }
