"""A compile that fails because of the machine (a full disk, a broken ccache) is reported as
that, a ToolchainError (exit 5) naming the folders and the fix, never as the author's compile
error (BuildError, exit 6). The processes are real: the compile worker runs the host's C++
compiler writing its object to /dev/full (the kernel answers ENOSPC), or through the host's
ccache with its cache folder below a file."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from support.kinds import write_tvm_ffi_project
from support.requests import build_request

from kernelwheel._util import RUNNER
from kernelwheel.builder.request import BuildRequest
from kernelwheel.builder.steps import run_worker
from kernelwheel.compile.compile_spec import CommandSpec, CommandUnit
from kernelwheel.compile.diagnostics import fault
from kernelwheel.errors import BuildError, ToolchainError
from kernelwheel.model.variant import Arch, Variant

CPU = Variant.parse(f"tvm-ffi01-cpu-{Arch.host().value}-linux")
needs_cxx = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


def _compile(
    tmp_path: Path, source: str, obj: str | None = None, compiler: tuple[str, ...] = ("c++",)
) -> tuple[BuildRequest, Path]:
    """A one-unit commands spec in ``stage``, ready for run_worker."""
    req = build_request(write_tvm_ffi_project(tmp_path / "p"), CPU)
    stage = tmp_path / "stage"
    stage.mkdir()
    src = stage / "unit.cpp"
    src.write_text(source)
    target = obj or str(stage / "unit.o")
    unit = CommandUnit(str(src), target, (*compiler, "-c", str(src), "-o", target))
    link = ("c++", "-shared", "-o", str(stage / "lib.so"), target)
    spec = CommandSpec((unit,), link, str(stage / "lib.so"), str(stage), 1)
    (stage / "compile.json").write_text(spec.to_json())
    req.log.parent.mkdir(parents=True)
    return req, stage


def _run(req: BuildRequest, stage: Path, env: dict[str, str] | None = None) -> None:
    run_worker(req, Path(sys.executable), stage, env or dict(os.environ), None, RUNNER)


@needs_cxx
@needs_dev_full
def test_a_full_disk_is_a_toolchain_error_naming_the_folders(tmp_path: Path) -> None:
    req, stage = _compile(tmp_path, "int f() { return 1; }\n", obj="/dev/full")
    with pytest.raises(ToolchainError) as caught:
        _run(req, stage)
    text = str(caught.value)
    assert caught.value.exit_code == 5
    assert "a disk is full" in text and "No space left on device" in text
    assert str(req.outputs.cache_dir) in text and str(stage) in text and "GiB free" in text
    assert "--cache-dir" in text and str(req.log) in text


@needs_cxx
def test_a_broken_ccache_is_a_toolchain_error_naming_its_folder(tmp_path: Path) -> None:
    ccache = shutil.which("ccache")
    if ccache is None:
        pytest.skip("no ccache")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    req, stage = _compile(tmp_path, "int f() { return 1; }\n", compiler=(ccache, "c++"))
    env = {**os.environ, "CCACHE_DIR": str(blocker / "ccache")}
    with pytest.raises(ToolchainError) as caught:
        _run(req, stage, env)
    text = str(caught.value)
    assert "ccache: error:" in text and "not in the compiler" in text
    assert str(blocker / "ccache") in text and "--no-ccache" in text


@needs_cxx
def test_the_authors_error_stays_a_build_error(tmp_path: Path) -> None:
    # The author's message quotes the words: the compiler's quoted source line is not a fault.
    source = 'int f() { const char* m = "No space left on device"; return m }\n'
    req, stage = _compile(tmp_path, source)
    with pytest.raises(BuildError) as caught:
        _run(req, stage)
    assert caught.value.exit_code == 6 and "No space left on device" in str(caught.value)


def test_fault_reads_the_machines_words_only() -> None:
    assert fault("x.cpp:2:5: error: expected ';'\n") is None
    assert fault("    1 | // ccache: error: and No space left on device\n") is None
    found = fault("OSError: [Errno 28] No space left on device: '/c/x.o'\n")
    assert found is not None and found.kind == "disk-full"
    found = fault("ccache: error: Failed to create directory /c/tmp: Permission denied\n")
    assert found is not None and found.kind == "ccache"
    # ccache reporting a full disk: the disk is the cause
    both = "ccache: error: Failed to write /c/x: No space left on device\n"
    found = fault(both)
    assert found is not None and found.kind == "disk-full"


def test_a_disk_too_full_to_hold_the_compilers_words_is_still_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dev folder's disk full: the log lies on it too, so the compiler's "No space left on
    device" never reaches it, and the output just stops. The free space tells the cause."""
    req, stage = _compile(tmp_path, "", compiler=("sh", "-c", "exit 1", "cut-short"))
    with pytest.raises(BuildError):  # room enough: the compile's own failure
        _run(req, stage)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=4096))
    with pytest.raises(ToolchainError) as caught:
        _run(req, stage)
    text = str(caught.value)
    assert caught.value.exit_code == 5 and "a disk is full" in text, text
    assert "its output stops short and names no error" in text and "0.0 MiB free" in text
    assert "says:" not in text and "--cache-dir" in text
    # an error the compiler did write stays the author's, whatever the space left
    req, stage = _compile(tmp_path / "again", "int f() { return 1 }\n")
    with pytest.raises(BuildError):
        _run(req, stage)
