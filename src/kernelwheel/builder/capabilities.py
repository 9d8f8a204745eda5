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
from dataclasses import dataclass

from ..model.capability import PTX, CudaCapability

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


def _parts(capability: str) -> tuple[int, int, str]:
    """``"9.0a+PTX"`` -> ``(9, 0, "a")``; what capabilities are ordered by."""
    return CudaCapability.parse(capability).sort_key


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def sort_capabilities(capabilities: Iterable[str]) -> tuple[str, ...]:
    """Deduplicated, in ascending order (``9.0`` < ``9.0a`` < ``10.0``)."""
    return tuple(sorted(_dedupe(capabilities), key=_parts))


def targets_of(defaults: Sequence[str]) -> tuple[str, ...]:
    """The targets a kernel's list is intersected with: the defaults without ``+PTX``."""
    return sort_capabilities(c.removesuffix(PTX) for c in defaults)


def _best_for(target: str, plain: Sequence[str], ptx: set[str]) -> str | None:
    """The highest of ``plain`` (sorted) at or below ``target`` that runs on it."""
    major, minor, _ = _parts(target)
    best = None
    for cap in plain:
        cap_major, cap_minor, _ = _parts(cap)
        if (cap_major, cap_minor) > (major, minor):
            break
        if cap_major == major or cap in ptx:
            best = cap
    return best


def loose_intersection(wanted: Sequence[str], targets: Sequence[str]) -> tuple[str, ...]:
    """kernel-builder's loose intersection of a kernel's list with the variant's targets."""
    ptx = {c.removesuffix(PTX) for c in wanted if c.endswith(PTX)}
    bases = _dedupe(c.removesuffix(PTX) for c in wanted)
    remaining = list(targets)
    chosen: list[str] = []
    for cap in (c for c in bases if _parts(c)[2]):
        base = cap[:-1]
        if base in targets:
            chosen.append(cap)
            if base in remaining:
                remaining.remove(base)
    plain = sorted((c for c in bases if not _parts(c)[2]), key=_parts)
    for target in remaining:
        best = _best_for(target, plain, ptx)
        if best is not None:
            chosen.append(best)
    return sort_capabilities(c + PTX if c in ptx else c for c in chosen)


def for_kernel(kernel: str, wanted: Sequence[str], defaults: Sequence[str]) -> KernelCapabilities:
    """One kernel's capabilities: the defaults when it lists none, else the loose intersection
    (empty when nothing of its list fits this toolkit: the caller refuses that)."""
    if not wanted:
        return KernelCapabilities(kernel, tuple(defaults))
    chosen = loose_intersection(wanted, targets_of(defaults))
    kept = {c.removesuffix(PTX) for c in chosen}
    dropped = tuple(c for c in _dedupe(wanted) if c.removesuffix(PTX) not in kept)
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
