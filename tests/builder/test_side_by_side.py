"""Variants built side by side (the variant-jobs option): they really overlap, each plans within
its share of the CPUs, the summary keeps the selection's order, a failed variant does not stop
the others, and an interrupt kills the compilers still running. build_and_export is replaced
by a stand-in; the real builds side by side are tests/conftest.py's `built` fixture."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.variants import TORCH214_CPU as CPU

import kernelwheel.builder.service as build_service
from kernelwheel._util import RUNNER, Runner
from kernelwheel.builder import preflight
from kernelwheel.builder.request import BuildRequest, BuiltWheel
from kernelwheel.cli import main
from kernelwheel.compile.compile_rules import variants_at_once
from kernelwheel.compile.memory import MemoryLimit
from kernelwheel.errors import BuildError
from kernelwheel.log import Reporter

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
CPU213 = "torch213-cxx11-cpu-x86_64-linux"
SELECT = ["--variant", "torch21{3,4}-*cpu-x*"]  # CPU213, then CPU


@pytest.fixture(autouse=True)
def _torch_index_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """These builds are faked and fetch nothing: PyTorch's CPU index counts as reachable
    (builder.preflight would refuse torch 2.14.1+cpu where it is not)."""
    monkeypatch.setattr(preflight, "_unreachable", lambda url: None)


def _wheel(req: BuildRequest) -> BuiltWheel:
    req.log.parent.mkdir(parents=True, exist_ok=True)
    req.log.write_text("compiler output\n")
    wheel = req.outputs.out_dir / f"img2gray-0.1.0+{req.variant.local_version}-cp310-abi3-x.whl"
    wheel.write_bytes(req.variant.name.encode())
    return BuiltWheel(req.variant, wheel, "ns", req.log)


def _build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, Any], str]:
    """Exit code, the --json output (empty when there is none) and stderr."""
    code = main(["build", str(IMG2GRAY), "--json", "-o", str(tmp_path / "wh"), *SELECT, *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


@pytest.mark.parametrize(
    ("requested", "variants", "cpus", "expected"),
    [
        (None, 18, 16, 8),  # auto: one per 2 CPUs
        (None, 18, 3, 2),  # a small machine: two at once, each on its own CPU
        (None, 18, 2, 2),
        (None, 18, 1, 1),  # one CPU: one at a time
        (None, 2, 64, 2),  # never more than the variants
        (3, 18, 2, 3),  # asked for: the CPUs are shared, not a limit
        (5, 1, 16, 1),
    ],
)
def test_variants_at_once(requested: int | None, variants: int, cpus: int, expected: int) -> None:
    assert variants_at_once(requested, variants, cpus) == expected


def test_auto_variants_at_once_fit_the_memory() -> None:
    # 16 CPUs would take 8; 20 GiB holds 4 variants at two 2560 MiB threads each
    assert variants_at_once(None, 18, 16, memory_mib=20 * 1024) == 4
    assert variants_at_once(None, 18, 16, memory_mib=20 * 1024, mib_per_thread=1024) == 8
    assert variants_at_once(None, 18, 16, memory_mib=1024) == 1
    assert variants_at_once(6, 18, 16, memory_mib=1024) == 6  # asked for: taken as given


def test_variants_overlap_and_share_the_cpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    both_running = threading.Barrier(2, timeout=20)  # broken unless the two builds overlap
    seen: dict[str, tuple[int, MemoryLimit | None]] = {}
    reads: list[int] = []  # the run's memory, read once for both variants

    def fake(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
        seen[req.variant.name] = (req.budget.jobs, req.budget.memory)
        both_running.wait()
        if req.variant.name == CPU213:
            time.sleep(0.3)  # finishes last: the summary still lists it first
        return _wheel(req)

    monkeypatch.setattr(build_service, "build_and_export", fake)
    monkeypatch.setattr(
        build_service, "available_memory", lambda: reads.append(1) or MemoryLimit(8192, "test")
    )
    code, data, _ = _build(tmp_path, capsys, "--variant-jobs", "2", "--jobs", "6")
    assert code == 0 and data["ok"] is True
    assert [w["variant"] for w in data["wheels"]] == [CPU213, CPU]
    half = MemoryLimit(4096, "1/2 of test")
    assert seen == {CPU213: (3, half), CPU: (3, half)}  # --jobs 6 and the memory split
    assert reads == [1]


def test_one_variant_at_a_time_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    running: list[str] = []
    overlapped: list[bool] = []

    def fake(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
        running.append(req.variant.name)
        overlapped.append(len(running) > 1)
        time.sleep(0.2)
        running.remove(req.variant.name)
        return _wheel(req)

    monkeypatch.setattr(build_service, "build_and_export", fake)
    code, data, _ = _build(tmp_path, capsys, "--variant-jobs", "1", "--jobs", "6")
    assert code == 0 and overlapped == [False, False]


def test_a_failed_variant_does_not_stop_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
        if req.variant.name == CPU213:
            req.log.parent.mkdir(parents=True, exist_ok=True)
            req.log.write_text("error: no\n")
            raise BuildError(f"compiling {req.variant.name} failed (exit 1)", log=req.log)
        time.sleep(0.3)  # still running when the other failed
        return _wheel(req)

    monkeypatch.setattr(build_service, "build_and_export", fake)
    code, data, _ = _build(tmp_path, capsys, "--variant-jobs", "2")
    assert code != 0 and data["ok"] is False
    status = {w["variant"]: w["status"] for w in data["wheels"]}
    assert status == {CPU213: "failed", CPU: "built"}


def test_an_interrupt_kills_the_other_variants_compilers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    compiling = threading.Event()
    exits: list[int] = []

    def fake(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
        if req.variant.name == CPU:  # a compiler that would run for a minute
            compiling.set()
            exits.append(runner.logged(["sleep", "60"], tmp_path / "sleep.log"))
            raise BuildError("compiling failed", log=req.log)
        assert compiling.wait(20)
        time.sleep(0.2)  # the sleep has started
        raise KeyboardInterrupt  # Ctrl-C, as the main thread would see it

    monkeypatch.setattr(build_service, "build_and_export", fake)
    started = time.monotonic()
    code, _, err = _build(tmp_path, capsys, "--variant-jobs", "2")
    assert code == 130 and "interrupted" in err
    assert time.monotonic() - started < 30
    assert exits in ([-signal.SIGTERM], [-signal.SIGKILL])  # stopped, not waited for
    assert "failed" not in err  # the killed variant goes unreported


def test_after_an_interrupt_a_variant_starts_no_new_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant killed in a probe (a captured command) goes on to its next step: that step's
    command must not start (the pool waits for the variant), and the next build runs commands
    again."""
    probing = threading.Event()
    seen: list[tuple[int, float]] = []

    def fake(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
        if req.variant.name == CPU:
            probing.set()
            probe = runner.captured(["sleep", "60"])  # an interpreter probe, say
            began = time.monotonic()
            compiled = runner.logged(["sleep", "60"], tmp_path / "compile.log")  # the next step
            seen.append((probe.returncode, time.monotonic() - began))
            seen.append((compiled, 0.0))
            raise BuildError("stopped", log=req.log)
        assert probing.wait(20)
        time.sleep(0.2)  # the probe has started
        raise KeyboardInterrupt

    monkeypatch.setattr(build_service, "build_and_export", fake)
    started = time.monotonic()
    code, _, _ = _build(tmp_path, capsys, "--variant-jobs", "2")
    assert code == 130
    assert time.monotonic() - started < 30
    (probe_code, refused_in), (compile_code, _) = seen
    assert probe_code in (-signal.SIGTERM, -signal.SIGKILL)  # stopped
    assert compile_code == -9 and refused_in < 1  # never started
    assert "sleep 60" in (tmp_path / "compile.log").read_text()  # asked for, never run
    assert RUNNER.logged(["true"], tmp_path / "after.log") == 0  # commands run again
