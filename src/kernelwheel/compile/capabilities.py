"""CUDA capabilities per kernel, chosen the way kernel-builder chooses them.

A variant's default list is the recipe's for its CUDA version (recipes/cuda.toml). A kernel with
its own ``cuda-capabilities`` gets the *loose intersection* of its list with those defaults: for
every default target, the highest capability the kernel lists that is not above the target and
has the same major (SASS runs only within one major; a ``+PTX`` entry may serve any later major).
An ``a``/``f`` form (``9.0a``, ``10.0f``) is kept as written when its base is a target, and then
serves that target alone. A capability that serves no target is *dropped*; kernelwheel reports
each one (kernel-builder drops them silently). Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ..model.capability import CudaCapability

__all__ = [
    "KernelCapabilities",
    "gencode_flags",
    "loose_intersection",
    "sort_capabilities",
    "targets_of",
    "unsupported",
]


@dataclass(frozen=True)
class KernelCapabilities:
    """The capabilities one kernel compiles for, and those of its list this toolkit builds for
    no target (reported, not silently dropped)."""

    kernel: str
    capabilities: tuple[str, ...]
    dropped: tuple[str, ...] = ()


def _values(texts: Iterable[str]) -> list[CudaCapability]:
    """Each capability once, parsed: the suffixes are the value's from here on."""
    return [CudaCapability.parse(text) for text in dict.fromkeys(texts)]


def _sorted(capabilities: Iterable[CudaCapability]) -> tuple[str, ...]:
    unique = dict.fromkeys(capabilities)
    return tuple(str(c) for c in sorted(unique, key=lambda c: c.sort_key))


def sort_capabilities(capabilities: Iterable[str]) -> tuple[str, ...]:
    """Deduplicated, in ascending order (``9.0`` < ``9.0a`` < ``10.0``)."""
    return _sorted(_values(capabilities))


def targets_of(defaults: Sequence[str]) -> tuple[str, ...]:
    """The targets a kernel's list is intersected with: the defaults without ``+PTX``."""
    return _sorted(replace(c, ptx=False) for c in _values(defaults))


def _best_for(
    target: CudaCapability, plain: Sequence[CudaCapability], ptx: set[CudaCapability]
) -> CudaCapability | None:
    """The highest of ``plain`` (sorted) at or below ``target`` that runs on it."""
    best = None
    for cap in plain:
        if (cap.major, cap.minor) > (target.major, target.minor):
            break
        if cap.major == target.major or cap in ptx:
            best = cap
    return best


def loose_intersection(wanted: Sequence[str], targets: Sequence[str]) -> tuple[str, ...]:
    """kernel-builder's loose intersection of a kernel's list with the variant's targets."""
    listed = _values(wanted)
    ptx = {replace(c, ptx=False) for c in listed if c.ptx}
    bases = list(dict.fromkeys(replace(c, ptx=False) for c in listed))
    goals = [CudaCapability.parse(target) for target in targets]
    remaining = list(goals)
    chosen: list[CudaCapability] = []
    for cap in (c for c in bases if c.suffix):
        base = replace(cap, suffix="")
        if base in goals:
            chosen.append(cap)
            if base in remaining:
                remaining.remove(base)
    plain = sorted((c for c in bases if not c.suffix), key=lambda c: c.sort_key)
    for target in remaining:
        best = _best_for(target, plain, ptx)
        if best is not None:
            chosen.append(best)
    return _sorted(replace(c, ptx=c in ptx) for c in chosen)


def for_kernel(kernel: str, wanted: Sequence[str], defaults: Sequence[str]) -> KernelCapabilities:
    """One kernel's capabilities: the defaults when it lists none, else the loose intersection
    (empty when nothing of its list fits this toolkit: the caller refuses that)."""
    if not wanted:
        return KernelCapabilities(kernel, tuple(defaults))
    chosen = loose_intersection(wanted, targets_of(defaults))
    kept = {c.target for c in _values(chosen)}
    dropped = tuple(str(c) for c in _values(wanted) if c.target not in kept)
    return KernelCapabilities(kernel, chosen, dropped)


def unsupported(capabilities: Iterable[str], supported: Sequence[str]) -> tuple[str, ...]:
    """Those of ``capabilities`` whose base (``9.0`` of ``9.0a+PTX``) is not in ``supported``
    (what nvcc --list-gpu-arch names)."""
    return tuple(c for c in capabilities if CudaCapability.parse(c).base not in supported)


def gencode_flags(capabilities: Iterable[str]) -> list[str]:
    """nvcc -gencode flags; a trailing '+PTX' also embeds PTX for forward compatibility."""
    flags: list[str] = []
    for text in capabilities:
        cap = CudaCapability.parse(text)
        arch = cap.digits
        flags.append(f"-gencode=arch=compute_{arch},code=sm_{arch}")
        if cap.ptx:
            flags.append(f"-gencode=arch=compute_{arch},code=compute_{arch}")
    return flags
