"""A dev build's objects judged by their inputs' bytes, not times: ninja would keep an object whose
source came back with an older time (``git checkout``, ``cp -p``, ``tar x``). The digests each
object's project inputs had when compiled (hashed before the compile reads them) are kept; an
object whose inputs now hold something else is removed before ninja runs."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from .._util import CommandTimeout, Runner, atomic_write, read_json_object, sha256_file
from ..compile import unit_costs
from ..compile._compile_worker import depfile_paths
from ..compile.compile_spec import CommandSpec

RECORD = "inputs.sha256.json"  # in the variant's work folder: {input: its digest when compiled}
# ctime comes from the kernel's coarse clock, up to a tick (1-10 ms) behind time.time_ns()
CLOCK_MARGIN_NS = 100_000_000


def objects_inputs(ninja: str | None, build_temp: Path, runner: Runner) -> dict[str, list[str]]:
    """Each object of ``build_temp`` and its inputs (normalized absolute paths) by ninja's deps
    log; empty without ninja or a log. The object of a source the build no longer has (removed
    from build.toml, renamed) is removed: left, no deps would cover it (:func:`all_inputs`)."""
    if not ninja or not (build_temp / ".ninja_deps").is_file():
        return {}
    try:
        runner.captured([ninja, "-C", build_temp, "-t", "cleandead"], timeout=120)
        proc = runner.captured([ninja, "-C", build_temp, "-t", "deps"], timeout=120)
    except (OSError, CommandTimeout):
        return {}
    found: dict[str, list[str]] = {}
    inputs: list[str] = []
    for line in proc.stdout.splitlines() if proc.returncode == 0 else ():
        if line.strip() and not line[0].isspace():
            inputs = found.setdefault(
                os.path.normpath(build_temp / line.partition(": #deps ")[0]), []
            )
        elif line.strip():
            inputs.append(os.path.normpath(build_temp / line.strip()))
    return found


def pending(sources: Sequence[str], build_temp: Path, deps: Mapping[str, list[str]]) -> list[str]:
    """The ``sources`` ninja is to compile in ``build_temp``, as it judges them: the last
    build.ninja made no object of one, the object is gone, or one of its inputs (by ``deps``,
    else the source) is newer."""
    made = {os.path.normpath(s): o for o, s in unit_costs.sources_of(build_temp).items()}

    def fresh(source: str) -> bool:
        target = made.get(os.path.normpath(source))
        try:
            built = os.stat(target).st_mtime_ns if target else -1
            inputs = deps.get(os.path.normpath(target or ""), [source])
            return all(os.stat(path).st_mtime_ns <= built for path in inputs)
        except OSError:
            return False

    return [source for source in sources if not fresh(source)]


def all_inputs(deps: Mapping[str, list[str]], build_temp: Path) -> list[str] | None:
    """Every input of the objects of ``build_temp`` by ``deps``, as the compile worker gives
    them; None unless the deps log covers every object."""
    objects = {os.path.normpath(p) for p in build_temp.rglob("*.o")}
    if not objects or not objects <= deps.keys():
        return None
    return _every_input(deps)


def _every_input(deps: Mapping[str, list[str]]) -> list[str]:
    return sorted({path for inputs in deps.values() for path in inputs})


class Digests:
    """The digests of the inputs under ``roots``, each file hashed once; None for an unreadable
    one."""

    def __init__(self, *roots: Path) -> None:
        self.prefixes = tuple(os.path.normpath(root) + os.sep for root in roots)
        self.known: dict[str, str | None] = {}

    def mine(self, inputs: list[str]) -> list[str]:
        return [path for path in inputs if path.startswith(self.prefixes)]

    def __call__(self, path: str) -> str | None:
        if path not in self.known:
            try:
                self.known[path] = sha256_file(Path(path))
            except OSError:
                self.known[path] = None
        return self.known[path]


def remove_stale(stage: Path, deps: Mapping[str, list[str]], *more: Path) -> dict[str, str | None]:
    """Remove each object of ``deps`` one of whose inputs under ``stage`` (or ``more``) holds
    other bytes than when it was compiled (or was never recorded); those inputs' digests now."""
    recorded = read_json_object(stage / RECORD)
    digest = Digests(stage, *more)
    for target, inputs in deps.items():
        if any(digest(path) != recorded.get(path) for path in digest.mine(inputs)):
            Path(target).unlink(missing_ok=True)
    # a compile cut short before record_compiled (an interrupt, another unit's error) must not
    # leave the old bytes recorded: brought back with an older time, they would keep its object
    if (kept := {p: d for p, d in recorded.items() if digest.known.get(p, d) == d}) != recorded:
        atomic_write(stage / RECORD, json.dumps(kept, indent=0, sort_keys=True))
    return digest.known


def remove_shadowed(deps: Mapping[str, list[str]], appeared: Sequence[str]) -> None:
    """Remove each object of ``deps`` that read a header named as one of ``appeared`` (now
    shadowing it on the include path): ninja, its inputs unchanged, kept it."""
    names = {os.path.basename(path) for path in appeared}
    for target, inputs in deps.items() if names else ():
        if any(os.path.basename(path) in names for path in inputs):
            Path(target).unlink(missing_ok=True)


def recently_changed(project: Path) -> dict[str, str | None]:
    """The digests now of the files of ``project`` (hidden folders aside) changed within the
    clock margin, before a compile begins: their ctime cannot tell a save before it from one
    during it, their bytes can (:func:`record_compiled` records these)."""
    since, found = time.time_ns() - CLOCK_MARGIN_NS, {}
    digest = Digests(project)
    for folder, dirs, files in os.walk(os.path.normpath(project)):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for path in (os.path.join(folder, name) for name in files):
            try:
                if os.stat(path).st_ctime_ns >= since:
                    found[path] = digest(path)
            except OSError:
                continue
    return found


def record_compiled(
    stage: Path,
    deps: Mapping[str, list[str]],
    before: Mapping[str, str | None],
    started_ns: int,
    project: Path,
    *more: Path,
) -> None:
    """After a compile that succeeded (begun at ``started_ns``): each input's digest from
    ``before``, else now, or ``"edited"`` where a file of ``project`` changed since the compile
    began (by ctime: the bytes compiled are unknown, so its objects compile again)."""
    digest = Digests(stage, *more)
    authors = os.path.normpath(project) + os.sep

    def compiled_from(path: str) -> str | None:
        if path in before:
            return before[path]
        try:
            edited = path.startswith(authors) and (
                os.stat(path).st_ctime_ns >= started_ns - CLOCK_MARGIN_NS
            )
        except OSError:
            edited = False
        return "edited" if edited else digest(path)

    record = {path: compiled_from(path) for inputs in deps.values() for path in digest.mine(inputs)}
    atomic_write(stage / RECORD, json.dumps(record, indent=0, sort_keys=True))


# in a tvm-ffi dev build's work folder: {object: the command that last compiled it}
COMMANDS = "units.commands.json"


def depfile_inputs(build_temp: Path, objects: Iterable[str]) -> dict[str, list[str]]:
    """Each of ``objects`` that exists and the inputs its depfile (``OBJECT.d``) names, absolute
    (from ``build_temp``); one without a readable depfile (nvcc writes none) left out."""
    found: dict[str, list[str]] = {}
    for target in objects:
        try:
            if not Path(target).is_file():
                continue
            text = Path(f"{target}.d").read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if (paths := depfile_paths(text, os.fspath(build_temp))) is not None:
            found[target] = paths
    return found


def units_to_compile(
    stage: Path, spec: CommandSpec, project: Path, shadowing: Sequence[str] = ()
) -> tuple[CommandSpec, dict[str, str | None]]:
    """A tvm-ffi dev build's ``spec`` cut to the units to compile, by bytes: an object missing,
    of another command, without a depfile, whose inputs changed or that read a header named as
    one of ``shadowing`` (:func:`remove_shadowed`); and those inputs' digests now (for
    :func:`record_compiled`)."""
    last = read_json_object(stage / COMMANDS)
    same = [u.object for u in spec.units if last.get(u.object) == list(u.argv)]
    deps = depfile_inputs(Path(spec.build_temp), same)
    before = remove_stale(stage, deps, project)  # what changed goes
    before = {**recently_changed(project), **before}
    remove_shadowed(deps, shadowing)
    todo = tuple(u for u in spec.units if u.object not in deps or not Path(u.object).is_file())
    return replace(spec, units=todo), before


def units_compiled(
    stage: Path, spec: CommandSpec, before: Mapping[str, str | None], started_ns: int, project: Path
) -> list[str] | None:
    """After :func:`units_to_compile`'s units compiled: inputs and commands recorded; all the
    units' inputs (for the reuse of an unchanged build), or None where one has no depfile."""
    objects = [u.object for u in spec.units]
    deps = depfile_inputs(Path(spec.build_temp), objects)
    record_compiled(stage, deps, before, started_ns, project, project)
    atomic_write(stage / COMMANDS, json.dumps({u.object: list(u.argv) for u in spec.units}))
    return _every_input(deps) if len(deps) == len(objects) else None
