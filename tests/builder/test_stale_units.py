"""A tvm-ffi dev build has no ninja: its units are judged as ninja's are, by their depfiles and
their inputs' bytes, so an unchanged project compiles nothing and an edit compiles its unit
alone, whatever the files' times. A shell "compiler" that writes the object and its depfile."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from kernelwheel.builder.stale import pending, units_compiled, units_to_compile
from kernelwheel.compile.compile_spec import CommandSpec, CommandUnit

OLD = 1_000_000_000  # 2001: older than any object


def _spec(stage: Path, project: Path, flag: str = "-O3") -> CommandSpec:
    obj = stage / "obj"

    def unit(name: str) -> CommandUnit:
        out = obj / f"{name}.o"
        # the object from the source and the header; the depfile names both (relative to obj)
        script = (
            f"cat {project}/{name}.c {project}/hdr.h > {out} && "
            f"printf '%s: %s ../../project/hdr.h\\n' {out} {project}/{name}.c > {out}.d"
        )
        return CommandUnit(str(project / f"{name}.c"), str(out), ("sh", "-c", script, flag))

    units = (unit("a"), unit("b"))
    link = ("true",)
    return CommandSpec(units, link, str(stage / "lib" / "x.so"), str(obj), 1)


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """The stage (its obj/ made) and a project of two sources and the header both read."""
    stage, project = tmp_path / "stage", tmp_path / "project"
    (stage / "obj").mkdir(parents=True)
    project.mkdir()
    for name, text in {"a.c": "a1\n", "b.c": "b1\n", "hdr.h": "h1\n"}.items():
        (project / name).write_text(text)
    return stage, project


def _compile(stage: Path, project: Path, spec: CommandSpec) -> list[str]:
    """One dev compile of ``spec`` as compile_step runs it: the sources compiled."""
    only, before = units_to_compile(stage, spec, project)
    started = time.time_ns()
    for unit in only.units:
        subprocess.run(unit.argv, check=True)
    units_compiled(stage, spec, before, started, project)
    return [Path(unit.source).name for unit in only.units]


def test_units_are_compiled_again_only_where_their_inputs_or_command_changed(
    tmp_path: Path,
) -> None:
    stage, project = _project(tmp_path)
    spec = _spec(stage, project)
    assert _compile(stage, project, spec) == ["a.c", "b.c"]
    assert _compile(stage, project, spec) == []  # unchanged: nothing compiles
    # a source brought back with an older time than its object: its unit alone
    (project / "a.c").write_text("a2\n")
    os.utime(project / "a.c", (OLD, OLD))
    assert _compile(stage, project, spec) == ["a.c"]
    assert (stage / "obj" / "a.o").read_text() == "a2\nh1\n"
    # a header both include (named relative to where the commands run): both
    (project / "hdr.h").write_text("h2\n")
    os.utime(project / "hdr.h", (OLD, OLD))
    assert _compile(stage, project, spec) == ["a.c", "b.c"]
    # a unit's command changed (a flag): every unit whose command it is
    assert _compile(stage, project, _spec(stage, project, "-O2")) == ["a.c", "b.c"]
    # an object gone, or its depfile: compiled again
    (stage / "obj" / "b.o").unlink()
    (stage / "obj" / "a.o.d").unlink()
    assert _compile(stage, project, _spec(stage, project, "-O2")) == ["a.c", "b.c"]
    assert _compile(stage, project, _spec(stage, project, "-O2")) == []


def test_a_unit_that_read_a_header_now_shadowed_is_compiled_again(tmp_path: Path) -> None:
    # a header added in front of hdr.h on the include path changes no input's bytes: the unit
    # that read hdr.h was kept ("no unit to compile"), its object from the header now hidden
    stage, project = _project(tmp_path)
    spec = _spec(stage, project)
    assert _compile(stage, project, spec) == ["a.c", "b.c"]
    only, _ = units_to_compile(stage, spec, project, [str(tmp_path / "first" / "other.h")])
    assert only.units == ()  # a header no unit read: nothing
    only, _ = units_to_compile(stage, spec, project, [str(tmp_path / "first" / "hdr.h")])
    assert [Path(unit.source).name for unit in only.units] == ["a.c", "b.c"]


def test_files_saved_right_before_the_compile_are_judged_by_their_bytes(tmp_path: Path) -> None:
    # saved within the clock margin (100 ms) before the compile began: their ctime could not
    # tell that save from one during the compile, so every run after compiled them again
    stage, project = _project(tmp_path)
    spec = _spec(stage, project)
    only, before = units_to_compile(stage, spec, project)  # the files were written just now
    started = time.time_ns()
    for unit in only.units:
        subprocess.run(unit.argv, check=True)
    units_compiled(stage, spec, before, started, project)
    assert units_to_compile(stage, spec, project)[0].units == ()
    # one saved after the compiler read it still compiles again, whatever its time
    (project / "hdr.h").write_text("h2\n")
    only, before = units_to_compile(stage, spec, project)
    started = time.time_ns()
    for unit in only.units:
        subprocess.run(unit.argv, check=True)
    (project / "b.c").write_text("b2\n")
    os.utime(project / "b.c", (OLD, OLD))
    units_compiled(stage, spec, before, started, project)
    assert [Path(u.source).name for u in units_to_compile(stage, spec, project)[0].units] == ["b.c"]


def test_the_units_ninja_is_to_compile_are_known_before_it_starts(tmp_path: Path) -> None:
    """A torch build's units to compile, named in the progress before ninja runs: those whose
    object is missing, older than an input (a header, by the deps log), or not in build.ninja."""
    temp, project = tmp_path / "obj", tmp_path / "project"
    temp.mkdir()
    project.mkdir()
    sources = [str(project / f"{name}.cpp") for name in ("a", "b", "c", "d")]
    header = project / "hdr.h"
    for path in (*sources, header):
        Path(path).write_text("x\n")
        os.utime(path, (OLD, OLD))
    rules = [f"build {temp}/{n}.o: compile {project}/{n}.cpp" for n in ("a", "b", "d")]
    (temp / "build.ninja").write_text("\n".join(["rule compile", *rules, ""]))
    for name in ("a", "b"):
        (temp / f"{name}.o").write_text("o\n")
        os.utime(temp / f"{name}.o", (OLD + 10, OLD + 10))
    os.utime(header, (OLD + 20, OLD + 20))  # saved after b.o was made; d.o was never made
    deps = {str(temp / f"{n}.o"): [sources[i], str(header)] for i, n in enumerate("ab")}
    deps[str(temp / "a.o")] = [sources[0]]
    assert pending(sources, temp, deps) == sources[1:]
    assert pending(sources[:1], temp, {}) == []  # no deps log: the source's own time
