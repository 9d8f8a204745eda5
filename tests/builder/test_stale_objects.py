"""A dev build's kept objects are judged by their inputs' bytes, not their times: ninja itself
leaves an object alone when a source comes back with an older time (``git checkout`` of an older
revision, ``cp -p``, ``tar x``, ``touch -d``). A real ninja and deps log, a shell "compiler"."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kernelwheel._util import Runner
from kernelwheel.builder.stale import (
    all_inputs,
    objects_inputs,
    recently_changed,
    record_compiled,
    remove_stale,
)

NINJA = shutil.which("ninja")
pytestmark = pytest.mark.skipif(NINJA is None, reason="needs ninja")

# each object: its source then the header it "includes", written with a depfile ninja reads
BUILD_NINJA = """\
headers = ../project/hdr.h ../include/gen.h
rule cc
  command = cat $in ../project/hdr.h > $out && printf '%s: %s $headers\\n' $out $in > $out.d
  depfile = $out.d
  deps = gcc
build a.o: cc ../project/a.c
build b.o: cc ../project/b.c
"""
OLD = 1_000_000_000  # 2001: older than any object


def _stage(tmp_path: Path) -> tuple[Path, Path]:
    stage = tmp_path / "stage"
    (stage / "obj").mkdir(parents=True)
    (stage / "obj" / "build.ninja").write_text(BUILD_NINJA)
    project = tmp_path / "project"
    project.mkdir()
    (stage / "project").symlink_to(project)  # as the compile step links the project in
    for name, text in {"a.c": "a1\n", "b.c": "b1\n", "hdr.h": "h1\n"}.items():
        (project / name).write_text(text)
    (stage / "include").mkdir()  # what kernelwheel writes right before it (registration.h)
    (stage / "include" / "gen.h").write_text("generated\n")
    return stage, project


def _compile(stage: Path) -> tuple[str, ...]:
    """One dev compile as compile_step runs it; the objects ninja (re)made."""
    obj = stage / "obj"
    assert NINJA is not None
    before = remove_stale(stage, objects_inputs(NINJA, obj, Runner()))
    before = {**recently_changed(stage / "project"), **before}  # saved right before: by bytes
    started = time.time_ns()
    ran = subprocess.run([NINJA, "-v", "-C", obj], capture_output=True, text=True, check=True)
    out = ran.stdout
    record_compiled(stage, objects_inputs(NINJA, obj, Runner()), before, started, stage / "project")
    return tuple(sorted(name for name in ("a.o", "b.o") if f" {name}" in out))


def _restore_old(path: Path, text: str) -> None:
    path.write_text(text)
    os.utime(path, (OLD, OLD))


def test_a_source_or_header_brought_back_with_an_older_time_is_compiled_again(
    tmp_path: Path,
) -> None:
    stage, project = _stage(tmp_path)
    assert _compile(stage) == ("a.o", "b.o")
    assert _compile(stage) == ()  # unchanged: nothing
    _restore_old(project / "a.c", "a0\n")  # older than a.o: ninja alone would skip it
    assert _compile(stage) == ("a.o",)
    assert (stage / "obj" / "a.o").read_text() == "a0\nh1\n"
    _restore_old(project / "hdr.h", "h0\n")  # a header: every object that includes it
    assert _compile(stage) == ("a.o", "b.o")
    assert (stage / "obj" / "b.o").read_text() == "b1\nh0\n"
    # a source replaced by a link to an older file
    (project / "old.c").write_text("b0\n")
    os.utime(project / "old.c", (OLD, OLD))
    (project / "b.c").unlink()
    (project / "b.c").symlink_to(project / "old.c")
    assert _compile(stage) == ("b.o",)
    assert _compile(stage) == ()
    # a touch alone (same bytes, older time) compiles nothing
    os.utime(project / "a.c", (OLD, OLD))
    assert _compile(stage) == ()


@pytest.mark.parametrize("first", [True, False], ids=["first-compile", "later-compile"])
def test_an_edit_made_while_the_compile_runs_is_compiled_by_the_next_run(
    tmp_path: Path, first: bool
) -> None:
    stage, project = _stage(tmp_path)
    if not first:  # the inputs are known before it compiles
        _compile(stage)
    obj, runner = stage / "obj", Runner()
    assert NINJA is not None
    (project / "a.c").write_text("a2\n")
    before = remove_stale(stage, objects_inputs(NINJA, obj, runner))
    before = {**recently_changed(stage / "project"), **before}
    started = time.time_ns()
    subprocess.run([NINJA, "-C", obj], capture_output=True, check=True)
    _restore_old(project / "a.c", "a3\n")  # saved after the compiler read it
    record_compiled(stage, objects_inputs(NINJA, obj, runner), before, started, stage / "project")
    assert _compile(stage) == ("a.o",)
    assert (obj / "a.o").read_text() == "a3\nh1\n"


def test_a_compile_cut_short_before_its_record_compiles_again_what_it_compiled(
    tmp_path: Path,
) -> None:
    # a.c edited, ninja compiled a.o, and the run ended before the record (Ctrl-C during the
    # link, another unit's compile error); a.c brought back as it was with its older time
    # (`cp -p` of a backup): the record still named those bytes, ninja kept the edited a.o
    stage, project = _stage(tmp_path)
    _compile(stage)
    obj, runner = stage / "obj", Runner()
    assert NINJA is not None
    time.sleep(0.15)
    (project / "a.c").write_text("a2\n")
    remove_stale(stage, objects_inputs(NINJA, obj, runner))
    subprocess.run([NINJA, "-C", obj], capture_output=True, check=True)  # and no record
    assert (obj / "a.o").read_text() == "a2\nh1\n"
    _restore_old(project / "a.c", "a1\n")
    assert _compile(stage) == ("a.o",)
    assert (obj / "a.o").read_text() == "a1\nh1\n"


def test_no_ninja_or_no_deps_log_means_nothing_is_known(tmp_path: Path) -> None:
    stage, _ = _stage(tmp_path)
    assert objects_inputs(None, stage / "obj", Runner()) == {}
    assert objects_inputs(NINJA, stage / "obj", Runner()) == {}  # never built


def test_the_object_of_a_source_the_build_no_longer_has_leaves_the_inputs_known(
    tmp_path: Path,
) -> None:
    # b.c removed from build.toml (or renamed): its b.o stayed in the object folder, every
    # later run found an object the deps log does not cover, the build's inputs unknown: no
    # reuse of the unchanged build, and a header added in front of one it read went unseen
    stage, _ = _stage(tmp_path)
    _compile(stage)
    obj = stage / "obj"
    (obj / "build.ninja").write_text(BUILD_NINJA.replace("build b.o: cc ../project/b.c\n", ""))
    _compile(stage)
    assert NINJA is not None
    inputs = all_inputs(objects_inputs(NINJA, obj, Runner()), obj)
    assert inputs is not None and os.path.normpath(obj / "../project/a.c") in inputs
    assert not (obj / "b.o").exists()
