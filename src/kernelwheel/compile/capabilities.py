"""CUDA capabilities per kernel, as kernel-builder chooses them (docs/compile.md): the *loose
intersection* of a kernel's ``cuda-capabilities`` with the recipe's defaults. A capability that
serves no target is *dropped*, and reported (kernel-builder drops them silently). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ..model.capability import CudaCapability


@dataclass(frozen=True)
class KernelCapabilities:
    """The capabilities one kernel compiles for, and those of its list this toolkit builds for
    no target (reported, not silently dropped)."""

    kernel: str
    capabilities: tuple[CudaCapability, ...]
    dropped: tuple[CudaCapability, ...] = ()


def sort_capabilities(capabilities: Iterable[CudaCapability]) -> tuple[CudaCapability, ...]:
    """Deduplicated, in ascending order (``9.0`` < ``9.0a`` < ``10.0``)."""
    return tuple(sorted(dict.fromkeys(capabilities), key=lambda c: c.sort_key))


def targets_of(defaults: Iterable[CudaCapability]) -> tuple[CudaCapability, ...]:
    """The targets a kernel's list is intersected with: the defaults without ``+PTX``."""
    return sort_capabilities(replace(c, ptx=False) for c in defaults)


def _best_for(
    target: CudaCapability, plain: Sequence[CudaCapability], ptx: set[CudaCapability]
) -> CudaCapability | None:
    """The highest of ``plain`` (sorted) at or below ``target`` that runs on it: SASS runs only
    within one major, a ``+PTX`` entry on later ones too."""
    best = None
    for cap in plain:
        if (cap.major, cap.minor) > (target.major, target.minor):
            break
        if cap.major == target.major or cap in ptx:
            best = cap
    return best


def loose_intersection(
    wanted: Sequence[CudaCapability], targets: Sequence[CudaCapability]
) -> tuple[CudaCapability, ...]:
    """kernel-builder's loose intersection of a kernel's list with the variant's targets."""
    ptx = {replace(c, ptx=False) for c in wanted if c.ptx}
    bases = list(dict.fromkeys(replace(c, ptx=False) for c in wanted))
    remaining = list(targets)
    chosen: list[CudaCapability] = []
    for cap in (c for c in bases if c.suffix):
        base = replace(cap, suffix="")
        if base in targets:
            chosen.append(cap)
            if base in remaining:
                remaining.remove(base)
    plain = sorted((c for c in bases if not c.suffix), key=lambda c: c.sort_key)
    chosen += [best for t in remaining if (best := _best_for(t, plain, ptx)) is not None]
    return sort_capabilities(replace(c, ptx=c in ptx) for c in chosen)


def for_kernel(
    kernel: str, wanted: Sequence[CudaCapability], defaults: Sequence[CudaCapability]
) -> KernelCapabilities:
    """One kernel's capabilities: the defaults when it lists none, else the loose intersection
    (empty when nothing of its list fits this toolkit: the caller refuses that)."""
    if not wanted:
        return KernelCapabilities(kernel, tuple(defaults))
    chosen = loose_intersection(wanted, targets_of(defaults))
    kept = {c.target for c in chosen}
    dropped = tuple(c for c in dict.fromkeys(wanted) if c.target not in kept)
    return KernelCapabilities(kernel, chosen, dropped)


def unsupported(
    capabilities: Iterable[CudaCapability], supported: Sequence[str]
) -> tuple[CudaCapability, ...]:
    """Those whose base (``9.0`` of ``9.0a+PTX``) is not in ``supported`` (nvcc --list-gpu-arch)."""
    return tuple(c for c in capabilities if c.base not in supported)


def gencode_flags(capabilities: Iterable[CudaCapability]) -> list[str]:
    """nvcc -gencode flags; a trailing '+PTX' also embeds PTX for forward compatibility."""
    return [
        f"-gencode=arch=compute_{cap.digits},code={code}_{cap.digits}"
        for cap in capabilities
        for code in (("sm", "compute") if cap.ptx else ("sm",))
    ]
