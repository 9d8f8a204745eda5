"""What the worker needs to compile one extension, a frozen value sent as JSON; a tvm-ffi
build's (no torch or setuptools to write them) is its commands (:class:`CommandSpec`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

from ..model.capability import CudaCapability


class CrossInfo(NamedTuple):
    """Recorded in the spec of a cross build, for the log and the reader of compile.json."""

    arch: str
    sysroot: str
    target_torch: str


class SourceFlags(NamedTuple):
    """One source's own flags (after the extension's), as kernel-builder gives each kernel its
    own; for a ``.cu``, ``gencode`` replaces the extension's -gencode flags."""

    source: str
    flags: tuple[str, ...] = ()
    gencode: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompileSpec:
    name: str  # the extension (and ops namespace) name
    sources: tuple[str, ...]
    include_dirs: tuple[str, ...]
    define_macros: tuple[tuple[str, str | None], ...]  # None: -DNAME without a value
    cxx_flags: tuple[str, ...]
    nvcc_flags: tuple[str, ...]
    cuda: bool
    cuda_home: str | None
    build_temp: str
    build_lib: str
    jobs: int
    requested_limited_api: str
    capabilities: tuple[CudaCapability, ...] = ()
    library_dirs: tuple[str, ...] = ()  # searched before torch's own (cross builds)
    link_flags: tuple[str, ...] = ()
    cross: CrossInfo | None = field(default=None)
    source_flags: tuple[SourceFlags, ...] = ()  # empty: every source compiles alike
    # sources that reach no torch header: cached on their preprocessed text (compile.torch_free)
    torch_free: tuple[str, ...] = ()
    # (folder, link to it): the compile commands name the folder's files through the link
    path_views: tuple[tuple[str, str], ...] = ()
    # The order the compiles start in (ninja's file order), where it is not ``sources``'; the
    # link order stays the objects' path order either way, so the bytes do not depend on it.
    schedule: tuple[str, ...] = ()
    # a dev build's: setuptools always runs ninja and the link (its own up-to-date test reads
    # only the sources' times, not the headers'); ninja skips what is unchanged
    incremental: bool = False
    # where each compiler's peak memory is appended (compile/_peak_rss; "": not measured)
    peak_log: str = ""

    def through_views(self, views: tuple[tuple[str, str], ...]) -> CompileSpec:
        """This spec naming each ``(folder, link)``'s sources through the link (recorded for the
        worker's headers and flags): objects mirror the sources' paths and link in path order,
        so the shared object's bytes no longer depend on where the folders lie."""

        def swap(path: str) -> str:
            for folder, link in views:
                if path == folder or path.startswith(folder + "/"):
                    return link + path[len(folder) :]
            return path

        return replace(
            self,
            sources=tuple(swap(s) for s in self.sources),
            source_flags=tuple(e._replace(source=swap(e.source)) for e in self.source_flags),
            torch_free=tuple(swap(s) for s in self.torch_free),
            path_views=views,
            schedule=tuple(swap(s) for s in self.schedule),
        )

    def to_json(self) -> str:
        data: dict[str, Any] = asdict(self)
        if self.cross is None:
            del data["cross"]
        else:
            data["cross"] = self.cross._asdict()
        data["source_flags"] = [entry._asdict() for entry in self.source_flags]
        data["capabilities"] = [str(c) for c in self.capabilities]
        return json.dumps(data, indent=2)


# How a compile is scheduled, not what it makes: out of its identity (builder.reuse's key, a dev
# build's "same spec" test), so new unit costs, jobs or nvcc threads do not make an unchanged
# build recompile and link (layer-norm: 1 s became 8 s).
_SCHEDULING = ("schedule", "jobs")
_NVCC_THREADS = "--threads="


def output_identity(spec_json: str) -> str:
    """A spec's JSON (either kind's ``to_json``) without the fields that only schedule it."""
    data = json.loads(spec_json)
    for name in _SCHEDULING:
        data.pop(name, None)
    if "nvcc_flags" in data:
        data["nvcc_flags"] = [f for f in data["nvcc_flags"] if not f.startswith(_NVCC_THREADS)]
    for unit in data.get("units", ()):  # a commands spec: nvcc's threads in each command
        unit["argv"] = [a for a in unit["argv"] if not a.startswith(_NVCC_THREADS)]
    return json.dumps(data, sort_keys=True)


class CommandUnit(NamedTuple):
    """One compiler command: ``argv`` compiles ``source`` into ``object``."""

    source: str
    object: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class CommandSpec:
    """A compile as its commands: the units (``jobs`` at a time), then ``link``."""

    units: tuple[CommandUnit, ...]
    link: tuple[str, ...]
    shared_object: str
    build_temp: str
    jobs: int
    cuda_home: str | None = None
    capabilities: tuple[CudaCapability, ...] = ()
    include_dirs: tuple[str, ...] = ()  # the units' -I folders, in search order (builder.reuse)
    schedule: tuple[str, ...] = ()  # the sources in the order to start them; (): the units'
    # where each compiler's peak memory is appended (compile/_peak_rss; "": not measured)
    peak_log: str = ""

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(unit.source for unit in self.units)

    def to_json(self) -> str:
        data: dict[str, Any] = asdict(self)
        data["kind"] = "commands"  # the worker's switch: run these, no setuptools
        data["units"] = [unit._asdict() for unit in self.units]
        data["capabilities"] = [str(c) for c in self.capabilities]
        return json.dumps(data, indent=2)
