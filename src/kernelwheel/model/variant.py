"""Build variants and their two spellings, each with its one parser and formatter here: the Hub
name (``torch210-cxx11-cu130-x86_64-linux``) and the wheels' PEP 440 local label
(``torch2.10.cu130.cxx11``, dotted so 2.10 sorts above 2.9; the platform tag has arch and OS)."""

from __future__ import annotations

import functools
import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from functools import total_ordering
from typing import TypeVar

from packaging.version import InvalidVersion, Version

from kernelwheel.errors import VariantError

from .wheelname import parse_wheel_name

_E = TypeVar("_E", bound=Enum)
_T = TypeVar("_T", bound="TorchVersion")
EXAMPLE_NAME = "torch27-cxx11-cu128-x86_64-linux"
EXAMPLE_LOCAL = "torch2.7.cu128.cxx11"


class BackendKind(str, Enum):
    """A compute backend, named as build.toml's ``general.backends`` names it."""

    CUDA = "cuda"
    ROCM = "rocm"
    XPU = "xpu"
    CPU = "cpu"
    METAL = "metal"
    NEURON = "neuron"
    TPU = "tpu"
    CANN = "cann"

    @property
    def display_name(self) -> str:
        """The backend as prose names it: ``ROCm``, ``Metal``, ``CANN``."""
        return {"rocm": "ROCm", "metal": "Metal", "neuron": "Neuron"}.get(
            self.value, self.value.upper()
        )


class LocalVersionStyle(str, Enum):
    """A local label's spelling: dotted (ordered right by PEP 440) or kernel-builder's compact."""

    DOTTED = "dotted"
    COMPACT = "compact"


class CxxAbi(str, Enum):
    CXX11 = "cxx11"
    CXX98 = "cxx98"

    @classmethod
    def in_local_version(cls, local: str | None) -> CxxAbi | None:
        """The C++ ABI a wheel's local version names: a variant label's, else a foreign build's
        (flash-attention's ``…cxx11abiTRUE``/``FALSE``, or a segment ending in the ABI)."""
        if not local:
            return None
        try:
            return Variant.from_local_version(local, arch=Arch.X86_64, os=OS.LINUX).cxxabi
        except VariantError:
            pass
        for segment in reversed(re.split(r"[-_.]", local.lower())):
            if segment.endswith("cxx11abitrue"):
                return cls.CXX11
            if segment.endswith("cxx11abifalse"):
                return cls.CXX98
            for abi in cls:
                if segment.endswith(abi.value):
                    return abi
        return None


class Arch(str, Enum):
    X86_64 = "x86_64"
    AARCH64 = "aarch64"

    @classmethod
    def host(cls) -> Arch:
        """This machine's arch; a VariantError on one kernelwheel has no variants for."""
        machine = machine_arch()
        try:
            return cls(machine)
        except ValueError:
            raise VariantError(
                f"this machine's arch {machine!r} has no kernel variants",
                hint="pass --arch with one of: " + ", ".join(a.value for a in cls),
            ) from None

    @classmethod
    def from_synonym(cls, name: str) -> Arch | None:
        """The arch ``name`` spells (``amd64``, ``arm64`` too, any case), or None (``i686``)."""
        canonical = _ARCH_SYNONYMS.get(name.lower(), name.lower())
        return cls(canonical) if canonical in cls._value2member_map_ else None


# Other names of an arch: platform.machine() on macOS and Windows, macOS and Windows wheel tags.
_ARCH_SYNONYMS = {"amd64": "x86_64", "arm64": "aarch64"}


def machine_arch() -> str:
    machine = platform.machine().lower()
    return _ARCH_SYNONYMS.get(machine, machine)


class OS(str, Enum):
    LINUX = "linux"
    DARWIN = "darwin"
    WINDOWS = "windows"


# A wheel platform tag's OS, by its prefix (PEP 425/600/656 and macOS/Windows tags).
_TAG_OS = (
    (("manylinux", "musllinux", "linux"), OS.LINUX),
    (("macosx",), OS.DARWIN),
    (("win",), OS.WINDOWS),
)


@dataclass(frozen=True)
class WheelPlatform:
    """The arch and OS a wheel's platform tag names (both None for ``any``)."""

    arch: Arch | None
    os: OS | None

    @classmethod
    def parse(cls, tag: str) -> WheelPlatform | None:
        """``macosx_11_0_arm64`` → aarch64 macOS; None for a platform without variants (win32)."""
        if tag == "any":
            return cls(None, None)
        system = next((os_ for prefixes, os_ in _TAG_OS if tag.startswith(prefixes)), None)
        # The arch is the tag's tail after the OS part; x86_64 holds an underscore itself.
        tail = "x86_64" if tag.endswith("_x86_64") else tag.rsplit("_", 1)[-1]
        arch = Arch.from_synonym(tail) if "_" in tag else None
        return None if system is None or arch is None else cls(arch, system)

    @classmethod
    def of_tags(cls, platforms: Iterable[str]) -> WheelPlatform | None:
        """The one platform a wheel's tags name; None when they name none or several."""
        parsed = {cls.parse(tag) for tag in platforms}
        return None if len(parsed) != 1 or None in parsed else next(iter(parsed))


def _choices(enum: type[Enum]) -> str:
    return ", ".join(str(member.value) for member in enum)


def _member(enum: type[_E], token: str, what: str) -> _E:
    try:
        return enum(token)
    except ValueError:
        raise VariantError(f"unknown {what} {token!r} (expected {_choices(enum)})") from None


def _check_int(
    value: object, what: str, *, low: int, high: int | None = None, hint: str | None = None
) -> None:
    # bool is an int subclass; True as a version number is always a bug.
    if not isinstance(value, int) or isinstance(value, bool):
        raise VariantError(f"{what} must be an int, got {value!r}", hint=hint)
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise VariantError(f"{what} must be {bound}, got {value}", hint=hint)


def _check_type(
    value: object, kind: type, what: str, *, optional: bool, hint: str | None = None
) -> None:
    # A plain "cuda" compares equal to BackendKind.CUDA but formats differently; refuse it early.
    if value is None and optional:
        return
    if not isinstance(value, kind):
        if hint is None and issubclass(kind, Enum):
            hint = f"use a member such as {kind.__name__}.{next(iter(kind)).name}"
        raise VariantError(
            f"{what} must be a {kind.__name__}{' or None' if optional else ''}, got {value!r}",
            hint=hint,
        )


# -- Torch version ----------------------------------------------------------------------------


_COMPACT_TORCH = re.compile(r"([0-9])(0|[1-9][0-9]*)")


@dataclass(frozen=True, order=True)
class TorchVersion:
    """A torch release series; the major is one digit so ``210`` is 2.10, never 21.0."""

    major: int
    minor: int

    def __post_init__(self) -> None:
        hint = "e.g. TorchVersion(2, 10)"
        _check_int(self.major, "torch major version (one digit)", low=0, high=9, hint=hint)
        _check_int(self.minor, "torch minor version", low=0, hint=hint)

    @classmethod
    def parse(cls, text: str) -> TorchVersion:
        """Parse a dotted version (``"2.10"``, ``"2.10.0+cu130"``), keeping major and minor."""
        try:
            release = Version(text).release
        except InvalidVersion:
            release = ()
        if len(release) < 2 or "." not in text:
            hint = "e.g. '2.10' or '2.10.1'"
            if text.isdigit():
                hint += f"; for the compact Hub form use TorchVersion.from_compact({text!r})"
            raise VariantError(f"invalid torch version {text!r}: expected MAJOR.MINOR", hint=hint)
        try:
            return cls(release[0], release[1])
        except VariantError as exc:
            raise VariantError(
                f"invalid torch version {text!r}: {exc.message}", hint="e.g. '2.10'"
            ) from None

    @classmethod
    def from_compact(cls: type[_T], text: str) -> _T:
        match = _COMPACT_TORCH.fullmatch(text)
        if match is None:
            raise VariantError(
                f"invalid compact torch version {text!r}: expected one major digit followed by "
                "the minor without leading zeros",
                hint="e.g. '27' (2.7) or '210' (2.10)",
            )
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def compact(self) -> str:
        return f"{self.major}{self.minor}"

    @property
    def target_version(self) -> str:
        """torch's ``TORCH_TARGET_VERSION`` for a stable-ABI build against this release."""
        return f"0x{(self.major << 56) | (self.minor << 48):016x}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, order=True)
class TvmFfiVersion(TorchVersion):
    """An apache-tvm-ffi release series (the ABI a tvm-ffi kernel is built for), ``01`` for 0.1."""


# -- Backend ----------------------------------------------------------------------------------

_VERSIONED = (BackendKind.CUDA, BackendKind.ROCM, BackendKind.XPU, BackendKind.CANN)
# Backends whose binary variants exist only for linux (metal's own rule is darwin-only).
_LINUX_ONLY = (BackendKind.ROCM, BackendKind.NEURON, BackendKind.TPU, BackendKind.CANN)

# Hub spellings. CUDA, ROCm and CANN: the last digit is the minor, the rest the major (cu128 =
# 12.8, cu130 = 13.0, cann83 = 8.3). XPU: a four-digit year, the rest the release (xpu20251 =
# 2025.1). The dotted forms are accepted on input (rocm6.3) but never written.
_TOKEN_PREFIX = {
    BackendKind.CUDA: "cu",
    BackendKind.ROCM: "rocm",
    BackendKind.XPU: "xpu",
    BackendKind.CANN: "cann",
}
_XPU_DIGITS = r"([1-9][0-9]{3})(0|[1-9][0-9]*)"
_TOKEN_PATTERNS: dict[BackendKind, tuple[re.Pattern[str], ...]] = {
    kind: (
        re.compile(prefix + (_XPU_DIGITS if kind is BackendKind.XPU else r"([1-9][0-9]*)([0-9])")),
        re.compile(prefix + r"([0-9]+)\.([0-9]+)"),
    )
    for kind, prefix in _TOKEN_PREFIX.items()
}
# A versionless backend (a noarch variant's) is spelled as its kind, except CANN: the Hub and
# the kernels loader call its noarch variant torch-npu (the device torch_npu registers).
_NOARCH_TOKEN = {BackendKind.CANN: "npu"}
_NOARCH_KINDS = {
    **{kind.value: kind for kind in BackendKind},
    **{token: kind for kind, token in _NOARCH_TOKEN.items()},
}
_KIND_EXAMPLE_NAME = {
    BackendKind.CUDA: "torch27-cxx11-cu128-x86_64-linux",
    BackendKind.ROCM: "torch27-cxx11-rocm63-x86_64-linux",
    BackendKind.XPU: "torch28-cxx11-xpu20251-x86_64-linux",
    BackendKind.CPU: "torch213-cxx11-cpu-x86_64-linux",
    BackendKind.METAL: "torch28-metal-aarch64-darwin",
    BackendKind.NEURON: "torch29-cxx11-neuron-x86_64-linux",
    BackendKind.TPU: "torch211-cxx11-tpu-x86_64-linux",
    BackendKind.CANN: "torch29-cxx11-cann83-aarch64-linux",
}
# The backend token of each example name: cu128, rocm63, xpu20251, cpu, metal...
_TOKEN_EXAMPLE = {kind: name.split("-")[-3] for kind, name in _KIND_EXAMPLE_NAME.items()}
_TOKEN_HINT = "e.g. 'cu128', 'rocm63', 'xpu20251', 'cann83', 'cpu', 'metal', 'neuron' or 'tpu'"


def _noarch_choices() -> str:
    return ", ".join(_NOARCH_TOKEN.get(kind, kind.value) for kind in BackendKind)


@total_ordering
@dataclass(frozen=True)
class Backend:
    """A compute backend and, for CUDA/ROCm/XPU/CANN binaries, its toolkit version."""

    kind: BackendKind
    version: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _check_type(self.kind, BackendKind, "backend kind", optional=False)
        if self.version is None:
            return
        if self.kind not in _VERSIONED:
            raise VariantError(
                f"the {self.kind.value} backend has no version, got {self.version!r}",
                hint=f"use Backend(BackendKind.{self.kind.name})",
            )
        hint = f"e.g. Backend.parse_token({_TOKEN_EXAMPLE[self.kind]!r})"
        if not isinstance(self.version, tuple) or len(self.version) != 2:
            raise VariantError(
                f"{self.kind.value} version must be a (major, minor) tuple, got {self.version!r}",
                hint=hint,
            )
        major, minor = self.version
        what = f"{self.kind.value} version {self.version!r}"
        if self.kind is BackendKind.XPU:
            _check_int(major, f"{what}: year", low=1000, high=9999, hint=hint)
            _check_int(minor, f"{what}: release", low=0, hint=hint)
        else:
            # The Hub token gives the minor one digit; 12.10 would read back as 121.0.
            _check_int(major, f"{what}: major", low=1, hint=hint)
            _check_int(
                minor, f"{what}: minor (one digit in the Hub token)", low=0, high=9, hint=hint
            )

    @classmethod
    def parse_token(cls, token: str) -> Backend:
        """Parse a Hub backend token (``cu128``, ``rocm6.3``); a bare kind is versionless."""
        if token in _NOARCH_KINDS:
            return cls(_NOARCH_KINDS[token])
        for kind, patterns in _TOKEN_PATTERNS.items():
            for pattern in patterns:
                match = pattern.fullmatch(token)
                if match is not None:
                    try:
                        return cls(kind, (int(match.group(1)), int(match.group(2))))
                    except VariantError as exc:
                        raise VariantError(
                            f"invalid backend {token!r}: {exc.message}", hint=_TOKEN_HINT
                        ) from exc
        raise VariantError(f"unknown backend {token!r}", hint=_TOKEN_HINT)

    @property
    def token(self) -> str:
        """The Hub spelling (``cu128``); a versionless backend is its kind (CANN's ``npu``)."""
        if self.version is None:
            return _NOARCH_TOKEN.get(self.kind, self.kind.value)
        major, minor = self.version
        return f"{_TOKEN_PREFIX[self.kind]}{major}{minor}"

    @property
    def pytorch_label(self) -> str:
        """PyTorch's name for its torch build of this backend (local version, index folder): ROCm
        is dotted, XPU has one index per torch release whatever its oneAPI."""
        if self.kind is BackendKind.ROCM and self.version is not None:
            return f"rocm{self.version[0]}.{self.version[1]}"
        return "xpu" if self.kind is BackendKind.XPU else self.token

    @property
    def cuda_version(self) -> str:
        if self.kind is not BackendKind.CUDA or self.version is None:
            raise VariantError(
                f"backend {self.token!r} has no CUDA version",
                hint="only versioned CUDA backends such as 'cu128' have one",
            )
        return ".".join(str(part) for part in self.version)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Backend):
            return NotImplemented
        return (self.kind.value, self.version or ()) < (other.kind.value, other.version or ())

    def __str__(self) -> str:
        return self.token


# -- Variant ----------------------------------------------------------------------------------

# Modern local label: torch{MAJ}.{MIN}[.stable].{backend}[.{cxxabi}]. The backend here is the
# undotted Hub token; a dotted rocm6.3 would blur with the label's own separators.
_LOCAL = re.compile(
    r"torch(?P<major>[0-9])\.(?P<minor>0|[1-9][0-9]*)(?P<stable>\.stable)?"
    r"\.(?P<backend>[a-z]+[0-9]*)(?:\.(?P<abi>cxx[0-9]+))?"
)
# The compact label (the design's form and the seed's wheels): torch27cu128cxx11, one-digit
# major; dots between the parts are tolerated.
_COMPACT_LOCAL = re.compile(
    r"torch(?P<torch>[0-9]+)\.?(?P<stable>stable\.?)?"
    r"(?P<backend>(?:cu|rocm|xpu|cann)[0-9]+|cpu|metal|neuron|tpu)(?:\.?(?P<abi>cxx[0-9]+))?"
)
_UNIVERSAL = "universal"
_TVM_FFI_PREFIX = "tvm-ffi"
# tvm-ffi local label: tvmffi{MAJ}.{MIN}.{backend}, compact tvmffi{MAJ}{MIN}{backend}.
_TVM_LOCAL = re.compile(
    r"tvmffi(?:(?P<major>[0-9])\.(?P<minor>0|[1-9][0-9]*)\.|(?P<compact>[0-9]+))"
    r"(?P<backend>[a-z]+[0-9]*)"
)

_PLATFORM_TAGS = {
    (OS.DARWIN, Arch.AARCH64): "macosx_11_0_arm64",
    (OS.DARWIN, Arch.X86_64): "macosx_10_15_x86_64",
    (OS.WINDOWS, Arch.X86_64): "win_amd64",
    (OS.WINDOWS, Arch.AARCH64): "win_arm64",
}
_LINUX_POLICY = re.compile(r"(?:many|musl)linux(?:_[0-9]+_[0-9]+|1|2010|2014)")


@dataclass(frozen=True)
class Variant:
    """One build target: ``torch is None`` is noarch, unless built against ``tvm_ffi``."""

    torch: TorchVersion | None
    backend: Backend | None
    cxxabi: CxxAbi | None
    arch: Arch | None
    os: OS | None
    stable_abi: bool = False
    tvm_ffi: TvmFfiVersion | None = None

    def __post_init__(self) -> None:
        hint = "e.g. TorchVersion(2, 10) or TorchVersion.parse('2.10')"
        _check_type(self.torch, TorchVersion, "torch", optional=True, hint=hint)
        hint = "e.g. Backend.parse_token('cu128')"
        _check_type(self.backend, Backend, "backend", optional=True, hint=hint)
        _check_type(self.cxxabi, CxxAbi, "cxxabi", optional=True)
        _check_type(self.arch, Arch, "arch", optional=True)
        _check_type(self.os, OS, "os", optional=True)
        if not isinstance(self.stable_abi, bool):
            raise VariantError(f"stable_abi must be a bool, got {self.stable_abi!r}")
        if self.tvm_ffi is not None:
            self._check_tvm_ffi()
        elif self.torch is None:
            self._check_noarch()
        else:
            self._check_binary()

    def _check_tvm_ffi(self) -> None:
        hint = "e.g. TvmFfiVersion(0, 1)"
        _check_type(self.tvm_ffi, TvmFfiVersion, "tvm_ffi", optional=True, hint=hint)
        _refuse_fields(
            "a tvm-ffi variant",
            "e.g. 'tvm-ffi01-cu130-x86_64-linux'",
            torch=None if self.torch is None else str(self.torch),
            cxxabi=self.cxxabi,
            stable_abi="True" if self.stable_abi else None,
        )
        self._check_binary()

    def _check_noarch(self) -> None:
        _refuse_fields(
            "a noarch variant (torch=None)",
            f"noarch variants are 'torch-universal' or 'torch-{{{_noarch_choices()}}}'",
            cxxabi=self.cxxabi,
            arch=self.arch,
            os=self.os,
            stable_abi=self.stable_abi or None,
        )
        if self.backend is not None and self.backend.version is not None:
            raise VariantError(
                f"a noarch variant's backend has no version, got {self.backend.token!r}",
                hint=f"use 'torch-{Backend(self.backend.kind).token}'",
            )

    def _check_binary(self) -> None:
        if self.backend is None:
            raise VariantError(
                "a binary variant needs a backend; only the noarch 'torch-universal' has none",
                hint=f"e.g. {EXAMPLE_NAME!r}",
            )
        if self.arch is None or self.os is None:
            missing = "arch" if self.arch is None else "os"
            raise VariantError(
                f"a binary variant needs an {missing}", hint=f"e.g. {EXAMPLE_NAME!r}"
            )
        kind, os_ = self.backend.kind, self.os
        example = kind  # the backend kind whose example name fixes the problem
        problem = None
        if kind in _VERSIONED and self.backend.version is None:
            problem = (
                f"a binary variant needs a versioned {kind.value} backend such as "
                f"{_TOKEN_EXAMPLE[kind]!r}, got the versionless {kind.value!r}"
            )
        elif kind is BackendKind.METAL and os_ is not OS.DARWIN:
            problem = f"the metal backend exists only on darwin, got {os_.value!r}"
        elif os_ is OS.DARWIN and kind not in (BackendKind.METAL, BackendKind.CPU):
            problem = f"darwin variants use the metal or cpu backend, got {self.backend.token!r}"
            example = BackendKind.METAL
        elif kind in _LINUX_ONLY and os_ is not OS.LINUX:
            problem = f"the {kind.value} backend is built only for linux, got {os_.value!r}"
        if problem is not None:
            raise VariantError(problem, hint=f"e.g. {_KIND_EXAMPLE_NAME[example]!r}")
        # The cxx11/cxx98 split is libstdc++'s; MSVC and libc++ builds name no ABI.
        if self.cxxabi is not None and os_ is not OS.LINUX:
            raise VariantError(
                f"a C++ ABI part ({self.cxxabi.value!r}) applies only to linux, got {os_.value!r}",
                hint="drop it, e.g. 'torch211-cu128-x86_64-windows'",
            )

    # -- derived facts ------------------------------------------------------------------------

    @property
    def noarch(self) -> bool:
        return self.torch is None and self.tvm_ffi is None

    def torch_requirement(self) -> str:
        """The Requires-Dist for torch: a series pin, a floor for stable-ABI builds, or none."""
        if self.torch is None:
            return "torch"
        return f"torch>={self.torch}" if self.stable_abi else f"torch=={self.torch}.*"

    def platform_tag(self, manylinux: str | None = "manylinux_2_28") -> str:
        """The wheel platform tag; ``manylinux=None`` gives the plain ``linux_{arch}`` tag."""
        if self.arch is None or self.os is None:
            return "any"
        if self.os is OS.LINUX:
            if manylinux is None:
                return f"linux_{self.arch.value}"
            if not isinstance(manylinux, str) or not _LINUX_POLICY.fullmatch(manylinux):
                raise VariantError(
                    f"invalid linux platform policy {manylinux!r}",
                    hint="e.g. 'manylinux_2_28', 'manylinux2014' or None for 'linux_{arch}'",
                )
            return f"{manylinux}_{self.arch.value}"
        return _PLATFORM_TAGS[(self.os, self.arch)]

    def __str__(self) -> str:
        return self.name

    # -- Hub names ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        if self.noarch:
            return "torch-universal" if self.backend is None else f"torch-{self.backend.token}"
        assert self.backend is not None and self.arch is not None and self.os is not None
        if self.tvm_ffi is not None:
            head = _TVM_FFI_PREFIX + self.tvm_ffi.compact
        else:
            assert self.torch is not None
            head = ("torch-stable-abi" if self.stable_abi else "torch") + self.torch.compact
        abi = [self.cxxabi.value] if self.cxxabi is not None else []
        return "-".join([head, *abi, self.backend.token, self.arch.value, self.os.value])

    @classmethod
    def parse(cls, name: str) -> Variant:
        """Parse a Hub variant name (the forms: docs/to-wheel.md, "What a variant becomes")."""
        if not isinstance(name, str):
            raise VariantError(
                f"variant name must be a str, got {name!r}", hint=f"e.g. {EXAMPLE_NAME!r}"
            )

        bad = functools.partial(_invalid, "variant name", name, example=EXAMPLE_NAME)

        if not name:
            raise bad("the name is empty")
        if name.startswith(_TVM_FFI_PREFIX):
            return cls._parse_tvm_ffi(name)
        parts = name.split("-")
        stable = False
        if parts[0] == "torch":
            if len(parts) == 2 and parts[1] == _UNIVERSAL:
                return cls(None, None, None, None, None)
            if len(parts) == 2 and parts[1] in _NOARCH_KINDS:
                return cls(None, Backend(_NOARCH_KINDS[parts[1]]), None, None, None)
            if len(parts) < 3 or parts[1] != "stable" or not parts[2].startswith("abi"):
                raise bad(
                    f"unknown noarch part {'-'.join(parts[1:])!r} (expected universal, "
                    f"{_noarch_choices()}, or stable-abi{{MAJ}}{{MIN}})",
                    example="torch-cuda",
                )
            stable = True
            torch_part, compact, tail = f"torch-stable-{parts[2]}", parts[2][3:], parts[3:]
        elif parts[0].startswith("torch"):
            torch_part, compact, tail = parts[0], parts[0][5:], parts[1:]
        else:
            raise bad(f"it must start with 'torch', got {parts[0]!r}")

        try:
            torch = TorchVersion.from_compact(compact)
        except VariantError:
            raise bad(
                f"bad torch part {torch_part!r}: expected one major digit then the minor, "
                "as in torch27 (2.7) or torch210 (2.10)"
            ) from None

        cxxabi: CxxAbi | None = None
        if tail and tail[0].startswith("cxx"):
            try:
                cxxabi = _member(CxxAbi, tail[0], "C++ ABI")
            except VariantError as exc:
                raise bad(exc.message) from None
            tail = tail[1:]

        if len(tail) != 3:
            raise bad(cls._describe_tail(tail))
        backend_token, arch_token, os_token = tail
        try:
            backend = Backend.parse_token(backend_token)
            arch, os_ = _member(Arch, arch_token, "arch"), _member(OS, os_token, "OS")
        except VariantError as exc:
            raise bad(exc.message) from None
        try:
            return cls(torch, backend, cxxabi, arch, os_, stable)
        except VariantError as exc:
            raise VariantError(
                f"invalid variant name {name!r}: {exc.message}", hint=exc.hint
            ) from None

    @classmethod
    def _parse_tvm_ffi(cls, name: str) -> Variant:
        bad = functools.partial(
            _invalid, "variant name", name, example="tvm-ffi01-cu130-x86_64-linux"
        )

        head, _, rest = name[len(_TVM_FFI_PREFIX) :].partition("-")
        try:
            version = TvmFfiVersion.from_compact(head)
        except VariantError:
            raise bad(
                f"bad tvm-ffi part {_TVM_FFI_PREFIX + head!r}: expected the major digit then the "
                "minor, as in tvm-ffi01 (0.1)"
            ) from None
        tail = rest.split("-") if rest else []
        if len(tail) != 3:
            raise bad(cls._describe_tail(tail))
        try:
            backend = Backend.parse_token(tail[0])
            arch, os_ = Arch(tail[1]), OS(tail[2])
            return cls(None, backend, None, arch, os_, tvm_ffi=version)
        except VariantError as exc:
            raise bad(exc.message) from None
        except ValueError:  # Arch() or OS(): the variant's checks raise VariantError
            raise bad(
                f"unknown arch or OS in {'-'.join(tail[1:])!r} (expected {_choices(Arch)}, "
                f"then {_choices(OS)})"
            ) from None

    @staticmethod
    def _describe_tail(tail: list[str]) -> str:
        expected = "{backend}-{arch}-{os}"
        if len(tail) > 3:
            return f"unexpected extra part(s) {'-'.join(tail[3:])!r} after {expected}"
        if not tail:
            return f"missing the {expected} parts"
        if tail[-1] in {member.value for member in OS}:
            return f"missing the arch part (expected {_choices(Arch)} before the OS)"
        if len(tail) == 2:
            return f"missing the OS part after {tail[-1]!r} (expected {_choices(OS)})"
        return f"missing the arch and OS parts after {tail[0]!r}"

    # -- local version labels ------------------------------------------------------------------

    @property
    def local_version(self) -> str:
        """The PEP 440 local label, e.g. ``torch2.10.cu130.cxx11``."""
        return self.local_version_in(LocalVersionStyle.DOTTED)

    def local_version_in(self, style: LocalVersionStyle) -> str:
        if self.noarch:
            return _UNIVERSAL if self.backend is None else self.backend.token
        version = self.torch if self.tvm_ffi is None else self.tvm_ffi
        assert version is not None and self.backend is not None
        head = "torch" if self.tvm_ffi is None else "tvmffi"
        stable = ["stable"] if self.stable_abi else []
        abi = [self.cxxabi.value] if self.cxxabi is not None else []
        parts = [f"{head}{version.major}", str(version.minor), *stable, self.backend.token, *abi]
        return ("." if style is LocalVersionStyle.DOTTED else "").join(parts)

    @classmethod
    def from_local_version(cls, local: str, *, arch: Arch | None, os: OS | None) -> Variant:
        """Parse a local label in any style and PEP 440 spelling; labels carry no platform, so
        ``arch`` and ``os`` come from the caller (None for noarch labels)."""
        # PEP 440 local normalisation: any case, -/_ as dots, numeric segments without zeros.
        text = ".".join(
            str(int(seg)) if seg.isdigit() else seg for seg in re.split(r"[-_.]", local.lower())
        )

        bad = functools.partial(_invalid, "local version", local, example=EXAMPLE_LOCAL)
        invalid = f"invalid local version {local!r} for arch={_show(arch)}, os={_show(os)}"

        if (tvm := _TVM_LOCAL.fullmatch(text)) is not None:
            try:
                if tvm["compact"] is not None:
                    version = TvmFfiVersion.from_compact(tvm["compact"])
                else:
                    version = TvmFfiVersion(int(tvm["major"]), int(tvm["minor"]))
                return cls(
                    None, Backend.parse_token(tvm["backend"]), None, arch, os, tvm_ffi=version
                )
            except VariantError as exc:
                raise VariantError(
                    f"{invalid}: {exc.message}",
                    hint="e.g. 'tvmffi0.1.cu130' with arch= and os= from the wheel's platform tag",
                ) from None
        torch: TorchVersion | None = None
        backend: Backend | None = None
        cxxabi: CxxAbi | None = None
        stable = False
        if text in _NOARCH_KINDS:
            backend = Backend(_NOARCH_KINDS[text])
        elif text != _UNIVERSAL:
            match = _LOCAL.fullmatch(text) or _COMPACT_LOCAL.fullmatch(text)
            if match is None:
                raise bad(
                    "expected torch{MAJ}.{MIN}[.stable].{backend}[.{cxxabi}], a noarch label "
                    f"(universal, {_noarch_choices()}) or the legacy "
                    "torch{MAJ}{MIN}{backend}[{cxxabi}]"
                )
            groups = match.groupdict()
            try:
                if groups.get("torch") is not None:  # compact form
                    torch = TorchVersion.from_compact(groups["torch"])
                else:
                    torch = TorchVersion(int(groups["major"]), int(groups["minor"]))
                stable = groups["stable"] is not None
                backend = Backend.parse_token(groups["backend"])
                if groups["abi"] is not None:
                    cxxabi = _member(CxxAbi, groups["abi"], "C++ ABI")
            except VariantError as exc:
                raise bad(exc.message) from None
        # Labels carry no platform, so a mismatch here is the caller's, not the label's.
        if torch is None and (arch is not None or os is not None):
            raise bad(
                f"a noarch label takes arch=None and os=None, got arch={_show(arch)}, "
                f"os={_show(os)}",
                example="cuda",
            )
        if torch is not None and (arch is None or os is None):
            raise VariantError(
                f"invalid local version {local!r}: a binary label needs arch= and os= from the "
                f"caller, got arch={_show(arch)}, os={_show(os)}",
                hint=f"e.g. Variant.from_local_version({EXAMPLE_LOCAL!r}, arch=Arch.X86_64, "
                "os=OS.LINUX)",
            )
        try:
            return cls(torch, backend, cxxabi, arch, os, stable)
        except VariantError as exc:
            raise VariantError(f"{invalid}: {exc.message}", hint=exc.hint) from None


def variant_of_wheel(filename: str) -> Variant | None:
    """The variant a wheel file name names (None: no local version), else VariantError."""
    _, version, _, tags, _ = parse_wheel_name(filename)
    local = version.local
    if local is None:
        return None
    platform = WheelPlatform.of_tags(t.platform for t in tags)
    if platform is None:
        shown = ".".join(sorted(t.platform for t in tags))
        raise VariantError(f"{filename}: platform tag {shown} names no kernel variant's platform")
    return Variant.from_local_version(local, arch=platform.arch, os=platform.os)


def _refuse_fields(variant: str, hint: str, **fields: object) -> None:
    """Refuse the first of ``fields`` that is set: ``variant`` has no such field."""
    for field, value in fields.items():
        if value is not None:
            shown = value.value if isinstance(value, Enum) else value
            raise VariantError(f"{variant} has no {field}, got {shown!r}", hint=hint)


def _invalid(what: str, text: str, detail: str, *, example: str) -> VariantError:
    return VariantError(f"invalid {what} {text!r}: {detail}", hint=f"e.g. {example!r}")


def _show(value: Enum | None) -> str:
    return "None" if value is None else repr(value.value)
