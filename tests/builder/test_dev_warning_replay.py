"""A dev build's per-unit warnings (builder/steps.run_worker, unit-warnings.json) across a
compile that failed: the units it compiled before failing keep the warnings they gave then."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.requests import build_request
from support.tinykernel import write_tiny_kernel

from kernelwheel.abi.policy import data_file
from kernelwheel.builder.request import BuildRequest
from kernelwheel.builder.steps import PROJECT_LINK, _announce, _some, run_worker
from kernelwheel.errors import BuildError
from kernelwheel.model.variant import Variant

CPU = Variant.parse("torch213-cxx11-cpu-x86_64-linux")


class _Ninja:
    """ninja as a dev build runs it: each run's output appended to the log, then the link's
    (silent) and ninja's exit code."""

    def __init__(self) -> None:
        self.output: list[str] = []
        self.code = 0

    def logged(self, cmd: object, log: Path, **kwargs: object) -> int:
        with log.open("a") as fh:
            fh.write(self.output.pop(0) if self.output else "")
        return self.code


def _stage(tmp_path: Path) -> tuple[BuildRequest, Path, str, str]:
    """The tiny kernel's CPU request, its empty work folder and the paths of two units in it."""
    req = build_request(write_tiny_kernel(tmp_path / "p"), CPU)
    stage = tmp_path / "stage"
    stage.mkdir()
    req.log.parent.mkdir(parents=True)
    req.log.write_text("")
    a, b = (f"{stage}/{PROJECT_LINK}/csrc/{name}.cpp" for name in ("a", "b"))
    return req, stage, a, b


def test_a_unit_compiled_before_a_failure_replays_its_new_warnings_not_its_old_ones(
    tmp_path: Path,
) -> None:
    # a.cpp warned of x; the author fixed x (a new unused y) and broke b.cpp: that run failed
    # after compiling a.cpp; once b.cpp was fixed, ninja compiled b.cpp alone and the replay
    # said a.cpp's x, a variable gone, and never y
    req, stage, a, b = _stage(tmp_path)
    spec = {"sources": [a, b], "incremental": True, "build_temp": str(stage)}
    (stage / "compile.json").write_text(json.dumps(spec))
    (stage / "result.json").write_text("{}")
    ninja = _Ninja()

    def run() -> list[str]:
        result = run_worker(req, Path("py"), stage, {}, None, ninja, direct=(["ninja"], ["ld"]))  # type: ignore[arg-type]
        return [str(line) for line in result["warnings"]]  # type: ignore[attr-defined]

    ninja.output = [
        f"[1/2] c++ -c {a} -o a.o\n{a}:3:5: warning: unused variable 'x' [-Wunused-variable]\n"
        f"[2/2] c++ -c {b} -o b.o\n"
    ]
    assert run() == [
        "csrc/a.cpp: 1 warning (first: csrc/a.cpp:3:5: unused variable 'x' [-Wunused-variable])"
    ]
    ninja.output = [
        f"[1/2] c++ -c {a} -o a.o\n{a}:7:5: warning: unused variable 'y' [-Wunused-variable]\n"
        f"FAILED: b.o\nc++ -c {b} -o b.o\n{b}:1:1: error: boom\n"
        "ninja: build stopped: subcommand failed.\n"
    ]
    ninja.code = 1
    with pytest.raises(BuildError, match="compiling csrc/b.cpp failed"):
        run()
    ninja.output, ninja.code = [f"[1/1] c++ -c {b} -o b.o\n"], 0
    assert run() == [
        "csrc/a.cpp: 1 warning (first: csrc/a.cpp:7:5: unused variable 'y' [-Wunused-variable])"
    ]
    # a record whose values are no lines (edited by hand) replays nothing of them
    (stage / "unit-warnings.json").write_text(json.dumps({"csrc/a.cpp": 3, "csrc/b.cpp": ["x"]}))
    ninja.output = ["ninja: no work to do.\n"]
    assert run() == []


def test_an_incremental_compile_names_the_units_it_compiled(tmp_path: Path) -> None:
    # a header edited: the author sees which units that recompiled (every one including it, no
    # other), not only "ccache 0/3 hit"; kernelwheel's own unit is not the author's to name
    req, stage, a, b = _stage(tmp_path)
    compat = f"{stage}/kernelwheel-data/kernelwheel_compat.cpp"
    spec = {"sources": [a, b, compat], "incremental": True, "build_temp": str(stage)}
    (stage / "compile.json").write_text(json.dumps(spec))
    (stage / "result.json").write_text("{}")
    ninja = _Ninja()
    ninja.output = [
        f"[1/3] c++ -c {b} -o b.o\n[2/3] c++ -c {compat} -o c.o\n[3/3] c++ -c {a} -o a.o\n"
    ]
    result = run_worker(req, Path("py"), stage, {}, None, ninja, direct=(["ninja"], ["ld"]))  # type: ignore[arg-type]
    assert result["units"] == ["csrc/b.cpp", "csrc/a.cpp"]
    assert _some(["a", "b", "c", "d", "e", "f"]) == "a, b, c, d and 2 more"
    assert _some(["a"]) == "a"


def test_a_dev_compile_of_no_unit_says_so_not_ccache_0_of_0() -> None:
    # a source dropped from build.toml: the worker relinked, no unit compiled, and the ✓ line
    # said "ccache 0/0 hit"
    from kernelwheel.builder.steps import dev_summary
    from kernelwheel.toolchain.compiler_cache import CacheStats

    none, own = CacheStats(0, 0, 0), CacheStats(0, 1, 0)
    assert dev_summary([], none.describe(), none) == "no unit to compile (linked again)"
    assert dev_summary([], own.describe(), own) == (
        "no unit of the project to compile (linked again); ccache 0/1 hit"
    )
    assert dev_summary(["csrc/a.cpp"], own.describe(), own) == "compiled csrc/a.cpp; ccache 0/1 hit"
    unchanged = "unchanged: ninja had nothing to compile"
    assert dev_summary([], unchanged, None) == unchanged
    assert dev_summary(None, none.describe(), none) == "ccache 0/0 hit"  # a release build


def test_a_warning_of_kernelwheels_own_source_names_it_never_by_its_cache_path(
    tmp_path: Path,
) -> None:
    # the compat source kernelwheel adds to every unit list and the header it forces in lie in
    # the cache: a warning in them names the file, not the author's fault nor a path to open
    req, stage, a, _ = _stage(tmp_path)
    compat = f"{stage}/kernelwheel-data/kernelwheel_compat.cpp"
    spec = {"sources": [a, compat], "incremental": True, "build_temp": str(stage / "obj")}
    (stage / "compile.json").write_text(json.dumps(spec))
    (stage / "result.json").write_text("{}")
    ninja = _Ninja()
    ninja.output = [
        f"[1/2] c++ -c {a} -o a.o\n"
        f"[2/2] c++ -c {compat} -o c.o\n"
        f"In file included from {compat}:3:\n"
        f"{stage}/include/kernelwheel_abi.h:9:1: warning: odd [-Wodd]\n"
    ]
    result = run_worker(req, Path("py"), stage, {}, None, ninja, direct=(["ninja"], ["ld"]))  # type: ignore[arg-type]
    assert result["warnings"] == [
        "kernelwheel_compat.cpp (kernelwheel's own source): 1 warning "
        "(first: kernelwheel_abi.h:9:1: odd [-Wodd])"
    ]
    assert result["units"] == ["csrc/a.cpp"]  # the project's units this run compiled


def test_the_units_to_compile_are_named_in_the_log_in_the_authors_paths(tmp_path: Path) -> None:
    req, stage, a, b = _stage(tmp_path)
    compat = f"{stage}/kernelwheel-data/kernelwheel_compat.cpp"
    _announce(req, stage, str(stage / "obj"), [b, compat, a])
    assert req.log.read_text() == (
        "units to compile: csrc/b.cpp, kernelwheel_compat.cpp, csrc/a.cpp\n"
    )
    # the compat source where no link names it: kernelwheel's package data folder
    req.log.write_text("")
    _announce(req, stage, str(stage / "obj"), [str(data_file("kernelwheel_compat.cpp"))])
    assert req.log.read_text() == "units to compile: kernelwheel_compat.cpp\n"
