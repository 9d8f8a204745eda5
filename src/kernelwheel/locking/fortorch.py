"""``download --torch``: of a kernel's locked variants, the builds ``kernelwheel install`` would
choose for one torch, by the same rules and preference (:mod:`kernelwheel.compat.rules`), one
per platform the locked variants name (docs/lockfile.md, "kernelwheel download", step 3)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from ..compat import rules as compat
from ..compat.builds import build_of, parse_variant
from ..errors import UsageError
from ..model.variant import Variant
from .lockfile import LockedVariant

_TORCH = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?(?:[a-z]+\d*)?\+([a-z0-9.]+)")
_FLAVOURS = "+cpu, +cu130 (CUDA 13.0), +rocm6.3 or +xpu"


def parse_torch(text: str) -> compat.Torch:
    """``2.14.1+cu130`` -> the rules' view of that torch (C++11 ABI, the only one since 2.7)."""
    match = _TORCH.fullmatch(text.strip())
    hint = f"give the version with its flavour, as torch.__version__ says it: {_FLAVOURS}"
    if match is None:
        raise UsageError(f"--torch {text!r} is not a torch version with a flavour", hint=hint)
    flavour = match.group(3)
    backend: tuple[int, int] | None = None
    if flavour == "cpu":
        kind = compat.CPU
    elif flavour == "xpu":
        kind = compat.XPU
    elif re.fullmatch(r"cu\d{3,4}", flavour):
        kind, backend = compat.CUDA, (int(flavour[2:-1]), int(flavour[-1]))
    elif re.fullmatch(r"rocm\d+\.\d+(\.\d+)?", flavour):
        major, minor = flavour[4:].split(".")[:2]
        kind, backend = compat.ROCM, (int(major), int(minor))
    else:
        raise UsageError(f"--torch {text!r}: unknown flavour +{flavour}", hint=hint)
    return compat.Torch(text.strip(), kind, backend, True)


@dataclass(frozen=True)
class TorchChoice:
    chosen: tuple[LockedVariant, ...]
    passed_over: tuple[tuple[LockedVariant, str], ...]  # each other variant, and why


@dataclass(frozen=True)
class _Judged:
    variant: LockedVariant
    platform: tuple[str, str] | None  # (arch, os); None: any platform (noarch)
    release: Version
    preference: tuple[int, int, int]


def _platform(variant: Variant | None) -> tuple[str, str] | None:
    if variant is None or variant.arch is None or variant.os is None:
        return None
    return variant.arch.value, variant.os.value


def _runs_on(torch: compat.Torch, os: str) -> bool:
    """Whether a torch of this backend exists for ``os``: a CPU torch everywhere, Metal only on
    darwin, CUDA, ROCm and XPU never there."""
    return torch.kind == compat.CPU or (os == "darwin") == (torch.kind == compat.METAL)


def _judge(locked: LockedVariant, torch: compat.Torch) -> _Judged | str:
    """The variant judged for ``torch``, or why it cannot run under it."""
    if (variant := parse_variant(locked.name)) is None:
        return "its name is no kernel variant"
    build = build_of(variant)
    if found := compat.problems(build, torch):
        return f"built for {compat.describe_build(build)}: mismatch in {', '.join(found)}"
    release = Version(parse_wheel_filename(locked.wheel)[1].public)
    return _Judged(locked, _platform(variant), release, compat.preference(build, torch))


def _best(pool: list[_Judged]) -> _Judged:
    pool = [j for j in pool if j.preference[0] != compat.CPU_FALLBACK] or pool
    top = max(j.release for j in pool)
    return min((j for j in pool if j.release == top), key=lambda j: (j.preference, j.variant.name))


def _why_not(judged: _Judged, winner: _Judged) -> str:
    if judged.release != winner.release:
        return f"compatible, but {winner.release} is newer"
    mine, theirs = judged.preference[0], winner.preference[0]
    if mine != theirs:
        return (
            f"compatible ({compat.KIND_NAMES[mine]}), but {compat.KIND_NAMES[theirs]} "
            f"({winner.variant.name}) is preferred"
        )
    if mine == compat.STABLE_ABI and judged.preference[1] != winner.preference[1]:
        return f"compatible, but the stable-ABI build for a newer torch ({winner.variant.name})"
    return f"compatible, but {winner.variant.name} fits better"


def choose_for_torch(variants: Sequence[LockedVariant], torch: compat.Torch) -> TorchChoice:
    """The variants ``install`` would choose for ``torch`` (one per platform), and why each
    other one was not; ``chosen`` is empty when none can run under that torch."""
    outcomes = [(locked, _judge(locked, torch)) for locked in variants]
    judged = [j for _, j in outcomes if isinstance(j, _Judged)]
    refused = [(locked, j) for locked, j in outcomes if isinstance(j, str)]
    if not judged:
        return TorchChoice((), tuple(refused))
    # Every platform a locked variant names, refused ones too: a noarch build may serve it; but
    # not one this torch cannot run on (a Metal build's darwin for a CUDA torch, or the reverse).
    platforms_of = (_platform(parse_variant(v.name)) for v in variants)
    named = {p for p in platforms_of if p is not None and _runs_on(torch, p[1])}
    platforms: list[tuple[str, str] | None] = [*sorted(named)] or [None]
    winners: dict[tuple[str, str] | None, _Judged] = {}
    for platform in platforms:
        if pool := [j for j in judged if j.platform in (platform, None)]:
            winners[platform] = _best(pool)
    chosen = {w.variant.name: w for w in winners.values()}
    first = next(iter(winners.values()))
    passed = [
        (j.variant, _why_not(j, winners.get(j.platform) or first))
        for j in judged
        if j.variant.name not in chosen
    ]
    order = {v.name: i for i, v in enumerate(variants)}
    return TorchChoice(
        chosen=tuple(sorted((w.variant for w in chosen.values()), key=lambda v: order[v.name])),
        passed_over=tuple(sorted(passed + refused, key=lambda p: order[p[0].name])),
    )
