"""Each compile unit's expected seconds, for a longest-first schedule (issue 39): ninja starts
the units in build.ninja's order, and a long one started last runs alone while the other cores
idle. Kept with each unit's peak memory (compile/_peak_rss) for compile/memory."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._util import atomic_write, read_json_object

FOLDER = "unit-costs"  # in kernelwheel's cache: one JSON file per project folder

# A compiler-cache hit takes a fraction of a compile: a unit's record is its last time, or half
# its earlier one where that is more, so one hit does not make a long unit look short.
DECAY = 0.5
# The file in a compile's build folder where compile/_peak_rss appends ``OBJECT<TAB>KiB`` rows.
PEAK_LOG = ".peak_rss"


def store_path(cache_dir: Path, project_root: Path) -> Path:
    """The project's record of unit seconds (one per project folder, shared by its variants)."""
    digest = hashlib.sha256(str(project_root.resolve()).encode()).hexdigest()[:16]
    return cache_dir / FOLDER / f"{digest}.json"


def read_costs(path: Path) -> dict[str, float]:
    """The recorded seconds per unit (project-relative path); empty when absent or unreadable
    (a record only orders the compile: a damaged one is ignored, never an error)."""
    return {
        str(k): float(v)
        for k, v in read_json_object(path).items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    }


def record_costs(path: Path, seconds: Mapping[str, float], *, decay: float = DECAY) -> None:
    """Merge a build's unit seconds into the record at ``path``: a unit's new value is the
    larger of this build's and ``decay`` times its record (peaks: ``decay=1``, a record
    only grows, so a compiler-cache hit or a lighter variant never makes a unit look light)."""
    if not seconds:
        return
    merged = read_costs(path)
    for unit, took in seconds.items():
        merged[unit] = round(max(took, decay * merged.get(unit, 0.0)), 3)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(merged, indent=1, sort_keys=True) + "\n")


def longest_first(
    sources: Sequence[str],
    recorded: Mapping[str, float],
    *,
    root: Path,
    capabilities: int,
    first: Sequence[str] = (),
    last: Sequence[str] = (),
) -> list[str]:
    """``sources`` in the order to start them: the longest expected first. ``recorded``: seconds
    per project-relative path. ``first`` (the binding: torch's headers make it the longest host
    unit) leads while it has no record; ``last`` (the remedies' compat source, the cheapest)
    always ends the list. Ties keep the sources' order. A unit never timed is estimated from its
    size, scaled to seconds by the units that were."""
    resolved_root = root.resolve()
    rel = {src: relative(src, resolved_root) for src in sources}
    estimate = {src: _estimate(src, capabilities) for src in sources}
    ratios = [recorded[rel[s]] / estimate[s] for s in sources if rel[s] in recorded and estimate[s]]
    scale = statistics.median(ratios) if ratios else None

    def key(src: str) -> tuple[int, float]:
        if src in last:
            return (3, 0.0)
        took = recorded.get(rel[src])
        if took is not None:
            return (1, -took)
        if scale is not None:  # estimates in the timed units' seconds
            return (1, -estimate[src] * scale)
        if src in first:
            return (0, 0.0)
        return (1 if src.endswith(".cu") else 2, -estimate[src])

    return sorted(sources, key=key)


def relative(source: str, root: Path) -> str:
    """``source``'s path under ``root`` (resolved), else ``source`` as given."""
    try:
        return Path(source).resolve().relative_to(root).as_posix()
    except ValueError:
        return source


def _estimate(source: str, capabilities: int) -> float:
    """A unit's cost in arbitrary units: its size, times its capabilities for a ``.cu``."""
    try:
        size = max(os.path.getsize(source), 1024)
    except OSError:
        size = 1024
    return float(size * (max(capabilities, 1) if source.endswith(".cu") else 1))


def unit_seconds(build_temp: Path, source_of: Mapping[str, str] | None = None) -> dict[str, float]:
    """Seconds per source of the last ninja run in ``build_temp``: build.ninja's compile lines
    (else ``source_of``: object -> source) joined with ``.ninja_log``'s ``start end mtime OBJ
    hash`` rows (milliseconds; an output's last row is its latest compile)."""
    source_of = source_of or sources_of(build_temp)
    took: dict[str, float] = {}
    for row in _lines(build_temp / ".ninja_log"):
        fields = row.split("\t")
        if row.startswith("#") or len(fields) < 5 or not fields[0].isdigit():
            continue
        found = source_of.get(fields[3]) or source_of.get(str(build_temp / fields[3]))
        if found is not None and fields[1].isdigit():
            took[found] = max(int(fields[1]) - int(fields[0]), 0) / 1000
    return took


def unit_peaks(
    build_temp: Path, floor: float = 0.0, source_of: Mapping[str, str] | None = None
) -> dict[str, float]:
    """MiB per source, as :func:`unit_seconds` from :data:`PEAK_LOG`'s rows (KiB); rows under
    ``floor`` MiB are left out (a compiler-cache hit, not a compile)."""
    source_of = source_of or sources_of(build_temp)
    peaks: dict[str, float] = {}
    for row in _lines(build_temp / PEAK_LOG):
        obj, _, kib = row.rpartition("\t")
        found = source_of.get(obj) or source_of.get(os.path.join(build_temp, obj))
        if found is not None and kib.isdigit() and int(kib) / 1024 >= floor:
            peaks[found] = int(kib) / 1024
    return peaks


def _lines(path: Path) -> list[str]:
    """The lines of ``path``; none where it cannot be read."""
    try:
        return path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def sources_of(build_temp: Path) -> dict[str, str]:
    """Object -> source of build.ninja's compile statements; empty when it cannot be read."""
    source_of: dict[str, str] = {}
    for line in _lines(build_temp / "build.ninja"):
        if not line.startswith("build ") or ": " not in line:
            continue
        head, _, rest = line[len("build ") :].partition(": ")
        rule, _, source = rest.partition(" ")
        if rule in ("compile", "cuda_compile") and source:
            source_of[_unescape(head)] = _unescape(source.split(" | ")[0])
    return source_of


def _unescape(path: str) -> str:
    return path.replace("$ ", " ").replace("$:", ":").replace("$$", "$")
