"""The memory a compile may use (issue 39, docs/compile.md): the least of MemAvailable and each
memory cgroup's room, read under ``root`` (tests give fake files); the CPU split is cut, jobs first,
then nvcc threads, until the largest units at once fit, never below a serial build."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from .._toml import Located, parse_toml
from ..errors import LocatedError, ToolchainError

DATA_FILE = "compile_memory.toml"
_MIB = 1 << 20
# cgroup v1 writes "no limit" as the largest page-aligned long (2**63 - 4096); anything this
# large is no limit of a real machine.
_NO_LIMIT = 1 << 62
_FILES = {
    "v1": ("memory.limit_in_bytes", "memory.usage_in_bytes"),
    "v2": ("memory.max", "memory.current"),
}


@dataclass(frozen=True)
class MemoryLimit:
    """MiB the compilers may use, and where that figure came from (for the log)."""

    mib: int
    source: str


class Share(NamedTuple):
    """One variant's part of a run's budget."""

    jobs: int
    cpus: int
    memory: MemoryLimit | None


@dataclass(frozen=True)
class Budget:
    """A run's CPUs and memory, read once (builder.service), and the variants sharing them."""

    jobs: int  # the compile jobs asked for (the jobs option, else every CPU)
    cpus: int  # the CPUs this process may use
    memory: MemoryLimit | None  # None: unreadable here
    at_once: int = 1  # variants compiling side by side

    def per_variant(self) -> Share:
        """One variant's share: its jobs, its CPUs, its memory."""
        parts = self.at_once
        share = self.memory
        if share is not None and parts > 1:
            share = MemoryLimit(share.mib // parts, f"1/{parts} of {share.source}")
        return Share(max(1, self.jobs // parts), max(1, self.cpus // parts), share)


def available(root: Path = Path("/")) -> MemoryLimit | None:
    """The least of MemAvailable and every memory cgroup's room; None where none is read."""
    found = [*_meminfo(root), *_cgroups(root)]
    return min(found, key=lambda limit: limit.mib) if found else None


def _meminfo(root: Path) -> list[MemoryLimit]:
    try:
        lines = (root / "proc/meminfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if fields[:1] == ["MemAvailable:"] and len(fields) >= 2 and fields[1].isdigit():
            return [MemoryLimit(int(fields[1]) // 1024, "MemAvailable in /proc/meminfo")]
    return []


def _cgroups(root: Path) -> list[MemoryLimit]:
    """The room each memory cgroup of this process leaves, from its own folder up to its
    mount's root (a parent's limit binds its children too)."""
    out: list[MemoryLimit] = []
    for version, folder, top in _cgroup_folders(root):
        limit_file, usage_file = _FILES[version]
        while True:
            room = _room(folder, limit_file, usage_file)
            if room is not None:
                shown = "/" + folder.relative_to(root).as_posix()
                out.append(MemoryLimit(room, f"cgroup {version} {shown}: {limit_file} - usage"))
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent
    return out


def _room(folder: Path, limit_file: str, usage_file: str) -> int | None:
    """MiB a cgroup folder's limit leaves; None without a limit or readable files."""
    try:
        raw = (folder / limit_file).read_text().strip()
        if raw == "max" or int(raw) >= _NO_LIMIT:
            return None
        used = int((folder / usage_file).read_text().strip())
    except (OSError, ValueError):
        return None
    return max(0, int(raw) - max(0, used - _inactive_file(folder))) // _MIB


def _inactive_file(folder: Path) -> int:
    """The cgroup's inactive page cache (bytes; reclaimed before anything is killed)."""
    try:
        lines = (folder / "memory.stat").read_text().splitlines()
    except OSError:
        return 0
    stat = dict(line.split()[:2] for line in lines if len(line.split()) >= 2)
    for name in ("total_inactive_file", "inactive_file"):  # v1's hierarchical, v2's
        if stat.get(name, "").isdigit():
            return int(stat[name])
    return 0


def _cgroup_folders(root: Path) -> list[tuple[str, Path, Path]]:
    """(version, this process's memory cgroup folder, its mount point) per hierarchy."""
    try:
        membership = (root / "proc/self/cgroup").read_text().splitlines()
        mounts = (root / "proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    paths: dict[str, str] = {}
    for line in membership:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            paths["v2"] = parts[2]
        elif "memory" in parts[1].split(","):
            paths["v1"] = parts[2]
    out = []
    for version, mount_root, point in _cgroup_mounts(mounts):
        if version not in paths:
            continue
        top = root / point.lstrip("/")
        inside = os.path.relpath(paths[version], mount_root)
        folder = top if inside.startswith("..") else top / inside
        out.append((version, folder if folder.is_dir() else top, top))
    return out


def _cgroup_mounts(lines: Iterable[str]) -> list[tuple[str, str, str]]:
    """(version, the cgroup path at the mount's root, mount point) of memory cgroup mounts."""
    out = []
    for line in lines:
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(after) < 3:
            continue
        kind, options = after[0], after[2].split(",")
        if kind == "cgroup2" or (kind == "cgroup" and "memory" in options):
            version = "v2" if kind == "cgroup2" else "v1"
            out.append((version, _unescape(fields[3]), _unescape(fields[4])))
    return out


def _unescape(field: str) -> str:
    r"""mountinfo's octal escapes (``\040`` for a space) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


@dataclass(frozen=True)
class Estimates:
    """``data/compile_memory.toml``: MiB per compiler process of a unit never measured."""

    cuda_per_thread: int
    host_torch: int
    host: int
    min_measured: int


class MemoryDataError(LocatedError, ToolchainError):
    """``data/compile_memory.toml`` is invalid (the message names the key)."""


@cache
def load_estimates() -> Estimates:
    """The estimates shipped in ``kernelwheel/data/``."""
    where = f"kernelwheel/data/{DATA_FILE}"
    text = (resources.files("kernelwheel") / "data" / DATA_FILE).read_text("utf-8")
    top = Located(
        parse_toml(text, file=where, error=MemoryDataError), file=where, error=MemoryDataError
    )
    keys = ("cuda-per-thread", "host-torch", "host", "min-measured")
    top.check_keys(("schema", *keys))
    values = []
    for key in keys:
        value = top.integer(key, low=1, hint=f"set {key} to a number of MiB")
        if value is None:
            raise top.error("missing required key", key, f"set {key} to a number of MiB")
        values.append(value)
    return Estimates(*values)


@dataclass(frozen=True)
class UnitMemory:
    """One compile unit's expected memory: ``mib`` for one compiler process (one nvcc thread),
    ``targets`` its ``-gencode`` targets (0: a host unit), and where ``mib`` came from."""

    source: str
    mib: int
    targets: int = 0
    origin: str = "estimated"

    def at(self, threads: int) -> int:
        """MiB at its peak with ``threads`` nvcc threads (one per target at most)."""
        return self.mib * max(1, min(threads, self.targets)) if self.targets else self.mib


def units_of(
    sources: Sequence[str],
    *,
    targets: int,
    torch_free: Iterable[str],
    measured: Mapping[str, float],
    per_thread: int | None = None,
    estimates: Estimates | None = None,
) -> tuple[UnitMemory, ...]:
    """Each source's :class:`UnitMemory`. ``measured``: MiB per source (the same strings as
    ``sources``) from earlier builds, used from ``min_measured`` up; ``per_thread`` (the
    memory-per-thread option) replaces both measurement and estimate; ``targets``: a ``.cu``
    unit's -gencode targets."""
    est = estimates or load_estimates()
    free = set(torch_free)
    out = []
    for src in sources:
        cuda = src.endswith(".cu")
        took = measured.get(src)
        if per_thread is not None:
            mib, origin = per_thread, "the memory-per-thread option"
        elif took is not None and took >= est.min_measured:
            mib, origin = round(took), "measured"
        elif cuda:
            mib, origin = est.cuda_per_thread, "estimated"
        else:
            mib, origin = (est.host if src in free else est.host_torch), "estimated"
        out.append(UnitMemory(src, mib, max(1, targets) if cuda else 0, origin))
    return tuple(out)


@dataclass(frozen=True)
class Fit:
    """Jobs and nvcc threads within the memory, whether memory cut them, and the log line."""

    jobs: int
    nvcc_threads: int
    by_memory: bool
    line: str


def _need(units: Sequence[UnitMemory], jobs: int, threads: int) -> int:
    """MiB of the ``jobs`` largest units at their peak at once."""
    return sum(sorted((u.at(threads) for u in units), reverse=True)[:jobs])


def fit(jobs: int, threads: int, units: Sequence[UnitMemory], limit: MemoryLimit | None) -> Fit:
    """``jobs`` and ``threads`` cut, jobs first, until the ``jobs`` largest units fit ``limit``;
    never below one of each (a serial build that exceeds the limit is tried anyway)."""
    cpu = f"jobs {jobs}, nvcc threads {threads}"
    if limit is None or not units:
        return Fit(jobs, threads, False, f"{cpu}: the CPU budget (memory not known)")
    cut_jobs, cut_threads = jobs, threads
    while cut_jobs > 1 and _need(units, cut_jobs, cut_threads) > limit.mib:
        cut_jobs -= 1
    while cut_threads > 1 and _need(units, cut_jobs, cut_threads) > limit.mib:
        cut_threads -= 1
    need = _need(units, cut_jobs, cut_threads)
    shown = f"{limit.mib} MiB available ({limit.source})"
    if (cut_jobs, cut_threads) == (jobs, threads):
        line = (
            f"{cpu}: the CPU budget; {shown}, {need} MiB needed "
            f"by the {min(jobs, len(units))} largest units at once"
        )
        return Fit(jobs, threads, False, line)
    largest = max(units, key=lambda u: u.at(cut_threads))
    heavy = f"{largest.source}, {largest.at(cut_threads)} MiB {largest.origin}"
    over = "; even that exceeds it: compiling serially anyway" if need > limit.mib else ""
    line = (
        f"jobs {cut_jobs}, nvcc threads {cut_threads}: limited by memory: {shown} holds "
        f"{need} MiB of units at once (the largest: {heavy}){over}; the CPUs allow {cpu}"
    )
    return Fit(cut_jobs, cut_threads, True, line)
