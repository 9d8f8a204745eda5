"""Which kernel build may load into which torch: the compatibility rules, written down once.

Two consumers share this one implementation (rules in prose: docs/install.md):

- ``kernelwheel install`` runs :func:`torch_facts` inside the target interpreter (its probe
  embeds this file) and keeps the candidate builds :func:`problems` has nothing against, ranked by
  :func:`preference`;
- the import guard generated into every wheel (compat/guard.py) embeds this
  file's source and refuses, with :func:`refusal`, a build :func:`problems` objects to.

Hence: standard library only, and syntax Python 3.9 accepts (wheels are ``cp39-abi3`` and up).

CUDA builds are also matched to the machine's driver (:func:`cuda_driver`): a ``cuXY`` build
runs where the driver supports CUDA X.Y or newer, and among the builds that fit the newest is
preferred. The CUDA major must still be torch's own (what torch's cpp_extension requires).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

# The backend kinds of variant names (model/variant.py's BackendKind values).
CUDA, ROCM, XPU, CPU, METAL = "cuda", "rocm", "xpu", "cpu", "metal"
_TOKEN_PREFIX = {CUDA: "cu", ROCM: "rocm", XPU: "xpu"}
# Say which CUDA the driver supports instead of asking it ("12.6", or "none": no driver). The
# second is the NVIDIA wheel-variant provider's own override, so one setting fakes the driver for
# uv's variant selection and for kernelwheel alike.
DRIVER_VARIABLES = ("KERNELWHEEL_CUDA_DRIVER", "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION")


@dataclass(frozen=True)
class Build:
    """What a wheel was built for. ``torch is None``: a noarch build (``kind`` is then the
    backend of ``+cuda``-style labels, or "" for ``+universal`` and unlabelled wheels), or, with
    ``tvm_ffi`` set, a build against apache-tvm-ffi that needs no torch at all."""

    torch: tuple[int, int] | None
    kind: str
    version: tuple[int, int] | None = None  # CUDA/ROCm (major, minor), XPU (year, release)
    cxx11: bool | None = None  # None: the build names no C++ ABI
    stable_abi: bool = False  # torch.torch is a floor, not a series
    tvm_ffi: tuple[int, int] | None = None  # the apache-tvm-ffi series (0, 1) it was built for

    @property
    def token(self) -> str:
        """The backend as variant names spell it: cu130, rocm63, xpu20251, cpu, metal."""
        if self.version is None:
            return self.kind
        return f"{_TOKEN_PREFIX[self.kind]}{self.version[0]}{self.version[1]}"


@dataclass(frozen=True)
class Torch:
    """The running torch, as :func:`torch_facts` reads it."""

    version: str  # torch.__version__, local part included: "2.13.0+cpu"
    kind: str  # cuda, rocm, xpu, metal or cpu
    backend: tuple[int, int] | None  # (major, minor) of CUDA/ROCm, (year, release) of XPU
    cxx11: bool
    # The newest CUDA the machine's driver supports (CUDA torch only); None: no driver found,
    # then CUDA builds are matched to torch's CUDA alone.
    driver: tuple[int, int] | None = None

    @property
    def release(self) -> tuple[int, int]:
        parts = self.version.split("+")[0].split(".")
        try:
            return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
        except (IndexError, ValueError):
            return (0, 0)

    @property
    def token(self) -> str:
        if self.backend is None:
            return self.kind
        return f"{_TOKEN_PREFIX[self.kind]}{self.backend[0]}{self.backend[1]}"

    def describe(self) -> str:
        """``torch 2.13.0+cpu (CPU, cxx11 ABI)``."""
        flavour = {CPU: "CPU", METAL: "Metal/MPS"}.get(self.kind, self.token)
        if self.kind == CUDA and self.backend is not None:
            flavour = "CUDA " + dotted(self.backend)
        elif self.kind == ROCM and self.backend is not None:
            flavour = "ROCm " + dotted(self.backend)
        return f"torch {self.version} ({flavour}, {_abi(self.cxx11)} ABI)"

    def describe_driver(self) -> str:
        """``CUDA driver: 13.1`` (or ``none found``) for a CUDA torch, else empty."""
        if self.kind != CUDA:
            return ""
        return "CUDA driver: " + (dotted(self.driver) if self.driver is not None else "none found")


def dotted(pair: tuple[int, int]) -> str:
    return f"{pair[0]}.{pair[1]}"


def driver_loads(cuda: tuple[int, int], driver: tuple[int, int]) -> bool:
    """Whether a driver that supports CUDA ``driver`` loads a build made with CUDA ``cuda``:
    drivers run every CUDA up to their own, none newer."""
    return cuda <= driver


def _abi(cxx11: bool) -> str:
    return "cxx11" if cxx11 else "cxx98"


def _two_numbers(text: str | None) -> tuple[int, int] | None:
    """``"13.0"`` -> (13, 0); ``"6.3.42131-fa1d09cbd"`` -> (6, 3)."""
    if not text:
        return None
    parts = text.replace("-", ".").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


class DriverSettingError(ValueError):
    """One of :data:`DRIVER_VARIABLES` holds a value that is no CUDA version; ``str()`` names
    the variable, the value and the accepted form."""

    def __init__(self, name: str, value: str) -> None:
        super().__init__(
            f"{name}={value!r} is not a CUDA version: give MAJOR.MINOR (e.g. 13.0; 13 means "
            "13.0) or none (no driver)"
        )
        self.name = name
        self.value = value


def driver_setting(environ: Any = None) -> tuple[str, tuple[int, int] | None] | None:
    """The driver variable that is set (the first of :data:`DRIVER_VARIABLES`) and its value:
    ``("KERNELWHEEL_CUDA_DRIVER", (13, 0))``, ``(name, None)`` for ``none``; None when neither
    is set. A value that is not ASCII ``MAJOR[.MINOR[.PATCH]]`` or ``none`` (``13,0``, ``abc``,
    ``13.``) raises :class:`DriverSettingError`: read as unknown, it would bring back builds the
    driver cannot load."""
    env = os.environ if environ is None else environ
    for name in DRIVER_VARIABLES:
        value = env.get(name, "").strip()
        if not value:
            continue
        if value.lower() == "none":
            return name, None
        parts = value.split(".")
        if len(parts) > 3 or not all(p and p.isascii() and p.isdigit() for p in parts):
            raise DriverSettingError(name, value)
        return name, (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
    return None


def cuda_driver() -> tuple[int, int] | None:
    """The newest CUDA the machine's driver supports, ``(13, 2)``: one of
    :data:`DRIVER_VARIABLES` when set (``"none"``: no driver; a value that is no version:
    :class:`DriverSettingError`), else the driver's own answer (``cuDriverGetVersion`` of
    libcuda, which needs no GPU context); None when there is no driver or it cannot say."""
    setting = driver_setting()
    if setting is not None:
        return setting[1]
    try:
        import ctypes

        library = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        cuda = ctypes.CDLL(library)
        found = ctypes.c_int(0)
        if cuda.cuDriverGetVersion(ctypes.byref(found)) != 0 or found.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    # encoded as major * 1000 + minor * 10: 13020 is CUDA 13.2
    return found.value // 1000, (found.value % 1000) // 10


def torch_facts(torch: Any) -> Torch:
    """Read the facts the rules need from an imported torch module (and, for a CUDA torch,
    the machine's :func:`cuda_driver`)."""
    version = getattr(torch, "version", None)
    cuda = getattr(version, "cuda", None)
    hip = getattr(version, "hip", None)
    xpu = getattr(version, "xpu", None)
    cxx11 = bool(getattr(getattr(torch, "_C", None), "_GLIBCXX_USE_CXX11_ABI", True))
    if cuda:
        kind, backend = CUDA, _two_numbers(cuda)
    elif hip:
        kind, backend = ROCM, _two_numbers(hip)
    elif xpu:
        # torch.version.xpu is the oneAPI bundle date, "20250101": year 2025, release 1.
        digits = "".join(c for c in str(xpu) if c.isdigit())
        kind = XPU
        backend = (int(digits[:4]), int(digits[4:6])) if len(digits) >= 6 else None
    elif sys.platform == "darwin":
        kind, backend = METAL, None
    else:
        kind, backend = CPU, None
    driver = cuda_driver() if kind == CUDA else None
    return Torch(str(torch.__version__), kind, backend, cxx11, driver)


def problems(build: Build, torch: Torch) -> list[str]:
    """Why ``build`` cannot run under ``torch``; empty when it can. Platform and Python are the
    wheel tags' business (pip checks them), not these rules'."""
    found = []
    if build.torch is not None:
        built, running = build.torch, torch.release
        if build.stable_abi and running < built:
            found.append(f"torch version (built for torch >= {dotted(built)})")
        elif not build.stable_abi and running != built:
            found.append(f"torch version (built for torch {dotted(built)})")
    if build.cxx11 is not None and build.cxx11 != torch.cxx11:
        found.append(f"C++ ABI (built {_abi(build.cxx11)})")
    backend = _backend_problem(build, torch)
    if backend:
        found.append(backend)
    return found


def _backend_problem(build: Build, torch: Torch) -> str | None:
    # A CPU build (and a noarch cpu or universal one) runs under every torch: its ops take CPU
    # tensors, which every torch has. Every other backend needs a torch of that backend.
    if build.kind in ("", CPU):
        return None
    if build.kind != torch.kind:
        return f"backend (a {build.token} build; this torch has no {build.kind.upper()})"
    if build.version is None:
        return None
    if build.kind == CUDA and torch.backend is not None and build.version[0] != torch.backend[0]:
        # torch.utils.cpp_extension refuses exactly this: another CUDA major.
        return f"CUDA major version (built with CUDA {dotted(build.version)})"
    if (
        build.kind == CUDA
        and torch.driver is not None
        and not driver_loads(build.version, torch.driver)
    ):
        return (
            f"CUDA driver (built with CUDA {dotted(build.version)}; the driver supports "
            f"CUDA {dotted(torch.driver)})"
        )
    if torch.backend is None:
        return None
    if build.kind == ROCM and build.version != torch.backend:
        return f"ROCm version (built with ROCm {dotted(build.version)})"
    return None


# Kinds of build, best first (the first member of preference()).
PER_TORCH, STABLE_ABI, TVM_FFI, NOARCH, UNIVERSAL, CPU_FALLBACK = range(6)
KIND_NAMES = {
    PER_TORCH: "a build for this torch series",
    STABLE_ABI: "a stable-ABI build",
    TVM_FFI: "a tvm-ffi build",
    NOARCH: "a noarch build of this backend",
    UNIVERSAL: "a universal build",
    CPU_FALLBACK: "a CPU build under a GPU torch",
}


def kind_of(build: Build, torch: Torch) -> int:
    """Which kind of build ``build`` is for ``torch`` (PER_TORCH ... CPU_FALLBACK)."""
    if build.kind == CPU and torch.kind != CPU:
        return CPU_FALLBACK
    if build.tvm_ffi is not None:
        return TVM_FFI
    if build.torch is not None:
        return STABLE_ABI if build.stable_abi else PER_TORCH
    return UNIVERSAL if build.kind == "" else NOARCH


def preference(build: Build, torch: Torch) -> tuple[int, int, int]:
    """Among compatible builds, lower is a better fit: first the kind (:func:`kind_of`: a build
    for this torch series, then a stable-ABI build, then tvm-ffi, then a noarch build of the
    torch's backend, then universal or unlabelled, last a CPU build under a GPU torch: it loads,
    but its ops have no GPU kernels); among stable-ABI builds the newest ABI (the closest to the
    running torch); then, where the CUDA driver is known, the newest CUDA build (all that are
    compatible run on it), else the torch's exact backend before its backend in another
    version."""
    kind = kind_of(build, torch)
    floor = 0
    if kind == STABLE_ABI and build.torch is not None:
        floor = -(build.torch[0] * 1000 + build.torch[1])
    if build.kind == CUDA and build.version is not None and torch.driver is not None:
        return kind, floor, -(build.version[0] * 1000 + build.version[1])
    exact = 0 if build.version is None or build.token == torch.token else 1
    return kind, floor, exact


def label(torch: Torch, *, compact: bool) -> str:
    """The local version label of the build made for ``torch``, dotted (``torch2.13.cpu.cxx11``)
    or compact (``torch213cpucxx11``); mirrors Variant.local_version (a test keeps them in step).
    """
    major, minor = torch.release
    abi = "" if torch.kind == METAL else _abi(torch.cxx11)  # darwin builds name no C++ ABI
    if compact:
        return f"torch{major}{minor}{torch.token}{abi}"
    return ".".join(part for part in (f"torch{major}", str(minor), torch.token, abi) if part)


def refusal(dist: str, version: str, build: Build, torch: Torch, found: list[str]) -> str:
    """The import guard's message: what was built, what runs, and how to get the right build."""
    base, _, local = version.partition("+")
    compact = local.startswith("torch") and local[5:6].isdigit() and "." not in local[5:7]
    wanted = f"{dist}=={base}+{label(torch, compact=compact)}"
    upgrade = ""
    if build.stable_abi and build.torch is not None and torch.release < build.torch:
        upgrade = f"Upgrade torch to {dotted(build.torch)} or newer, or install"
    # Where only the driver objects, the build for this torch is this very label: the fitting
    # one is an older CUDA flavour, which kernelwheel install finds by the driver.
    by_driver = all(problem.startswith("CUDA driver") for problem in found)
    pip = (
        ""
        if by_driver
        else f" ({wanted}), or pip install '{wanted}' from the same wheelhouse or index"
    )
    fit = "this torch and CUDA driver" if by_driver else "this torch"
    return (
        f"{dist} {version} was built for {describe_build(build)}, but this Python runs "
        f"{torch.describe()}; mismatch in: {', '.join(found)}. "
        f"{upgrade or 'Install'} the build for {fit}: "
        f"kernelwheel install '{dist}=={base}' --find-links <your wheelhouse or index> picks it"
        f"{pip}."
    )


def describe_build(build: Build) -> str:
    """``torch 2.14, CUDA 13.0, cxx11 ABI``."""
    if build.tvm_ffi is not None:
        parts = [f"apache-tvm-ffi {dotted(build.tvm_ffi)} (no torch)"]
    elif build.torch is None:
        parts = ["any torch"]
    else:
        parts = [("torch >= " if build.stable_abi else "torch ") + dotted(build.torch)]
    if build.kind == CUDA and build.version is not None:
        parts.append("CUDA " + dotted(build.version))
    elif build.kind == ROCM and build.version is not None:
        parts.append("ROCm " + dotted(build.version))
    elif build.kind:
        parts.append(build.token if build.kind != CPU else "CPU")
    if build.cxx11 is not None:
        parts.append(f"{_abi(build.cxx11)} ABI")
    return ", ".join(parts)
