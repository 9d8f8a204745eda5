"""SIGTERM and SIGINT while ``kernelwheel build`` has already put the variant's wheel into the
output folder (issue 38 family 10: the CLI said "nothing partial was left behind" with the wheel
in ``-o``). A real subprocess of the CLI, paused at a known point, gets a real signal: the run
exits 143/130, the wheel it had written is gone, and a wheel from an earlier run stays."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from support.interrupt import interrupt_at
from support.kinds import write_noarch_project

# The real CLI with one function paused after it ran, a mark file touched when it is reached.

POINTS = [
    ("kernelwheel.builder.noarch", "write_wheel", "after"),  # the wheel in -o, the build not done
    ("kernelwheel.hub.export", "export_variant", "after"),  # the wheel in -o, the layout half made
]


def _interrupted(tmp_path: Path, point: tuple[str, str, str], sig: int, argv: list[str]) -> str:
    code, out, err = interrupt_at(tmp_path, point, sig, argv, reach_within=120)
    assert code == (143 if sig == signal.SIGTERM else 130), out + err
    assert "Traceback" not in err
    return out + err


def _first_of_two_then(sig: int, out: Path) -> tuple[list[str], str, Path, Any]:
    """Two CPU variants of the tiny kernel (their names and ``--variant`` selector), the wheel
    the first makes in ``out``, and a ``build_project`` that finishes the first, starts the
    second and gets ``sig``, real, to this process (the CLI's handler raises in its sleep)."""
    import os
    import time

    from kernelwheel.builder.service import Outcome
    from kernelwheel.model.variant import Arch

    host = Arch.host().value
    names = [f"torch21{minor}-cxx11-cpu-{host}-linux" for minor in (3, 4)]
    wheel = out / "tiny_add-0.1.0+cpu-cp39-abi3-manylinux_2_28_x86_64.whl"

    def build_project(planned, recipes, progress, **kwargs):  # type: ignore[no-untyped-def]
        progress.variant_started(names[0])
        progress.variant_finished(Outcome(names[0], 1.0, out / "logs" / "a.log", wheel))
        progress.variant_started(names[1])
        os.kill(os.getpid(), sig)
        time.sleep(30)  # the handler raises here
        raise AssertionError("not interrupted")

    return names, f"torch21{{3,4}}-cxx11-cpu-{host}-linux", wheel, build_project


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("point", POINTS, ids=lambda p: p[1])
def test_an_interrupted_build_leaves_no_wheel_in_the_output_folder(
    tmp_path: Path, point: tuple[str, str, str], sig: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    root = write_noarch_project(tmp_path / "p")
    out = tmp_path / "out"
    argv = ["build", str(root), "-o", str(out), "--hub-layout", str(tmp_path / "hub")]
    said = _interrupted(tmp_path, point, sig, argv)
    if sig == signal.SIGTERM:
        assert "nothing partial was left behind" in said
    assert list(out.glob("*.whl")) == [], sorted(p.name for p in out.iterdir())
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_a_wheel_of_an_earlier_run_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    root = write_noarch_project(tmp_path / "p")
    out = tmp_path / "out"
    from kernelwheel.cli import main

    assert main(["build", str(root), "-o", str(out)]) == 0
    (wheel,) = out.glob("*.whl")
    data = wheel.read_bytes()
    _interrupted(tmp_path, POINTS[0], signal.SIGTERM, ["build", str(root), "-o", str(out)])
    assert wheel.read_bytes() == data  # replaced whole by the same bytes, not removed


def test_a_compiled_variant_interrupted_after_its_repair_leaves_only_the_other_wheels(
    tmp_path: Path,
) -> None:
    # The compiled kinds' repair step publishes the wheel into -o before the check and Hub
    # layout steps end: the same guard, on the variant's own local version (here without a
    # compile: the build is replaced by one that publishes and is then interrupted).
    from dataclasses import replace

    from support.requests import build_request
    from support.tinykernel import write_tiny_kernel

    from kernelwheel.builder import entry
    from kernelwheel.builder.request import BuildKind
    from kernelwheel.builder.steps import full_version
    from kernelwheel.errors import Terminated
    from kernelwheel.log import SilentReporter
    from kernelwheel.model.variant import Arch, Variant

    variant = Variant.parse(f"torch213-cxx11-cpu-{Arch.host().value}-linux")
    req = build_request(write_tiny_kernel(tmp_path / "p"), variant)
    out = req.outputs.out_dir
    out.mkdir()
    version = full_version(req.version, variant, req.outputs.local_version_style)
    name = req.project.name.replace("-", "_")
    mine = out / f"{name}-{version}-cp39-abi3-manylinux_2_28_{Arch.host().value}.whl"
    other = out / f"{name}-{req.version}+other-cp39-abi3-linux_x86_64.whl"
    other.write_bytes(b"finished earlier")

    def publishes_then_is_interrupted(*_: object) -> None:
        mine.write_bytes(b"repaired")
        raise Terminated()

    kind = {BuildKind.TORCH: publishes_then_is_interrupted}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(entry, "_BUILDERS", kind)
        with pytest.raises(Terminated):
            entry.build_and_export(replace(req, kind=BuildKind.TORCH), SilentReporter())
    assert not mine.exists() and other.read_bytes() == b"finished earlier"


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_an_interrupted_multi_variant_build_says_which_variants_finished_and_where(
    tmp_path: Path,
    sig: int,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Ctrl-C or SIGTERM during the third of three variants ended with "interrupted" alone: not
    # that the first two had finished, one with its wheel in -o. The variants' builds are
    # replaced (no compile); the signal is real, to this process, handled by the CLI's handler.
    import os
    import time

    from support.tinykernel import write_tiny_kernel

    from kernelwheel.builder.service import Outcome
    from kernelwheel.cli import build, main
    from kernelwheel.errors import BuildError
    from kernelwheel.model.variant import Arch

    host = Arch.host().value
    names = [f"torch21{minor}-cxx11-cpu-{host}-linux" for minor in (3, 4, 5)]
    out = tmp_path / "out"
    wheel = out / "tiny_add-0.1.0+cpu-cp39-abi3-manylinux_2_28_x86_64.whl"

    def build_project(planned, recipes, progress, **kwargs):  # type: ignore[no-untyped-def]
        assert [r.name for r in recipes] == names
        progress.variant_started(names[0])
        progress.variant_finished(Outcome(names[0], 1.0, out / "logs" / "a.log", wheel))
        progress.variant_started(names[1])
        failed = BuildError("compiling failed", log=out / "logs" / "b.log")
        progress.variant_finished(Outcome(names[1], 1.0, out / "logs" / "b.log", error=failed))
        progress.variant_started(names[2])
        os.kill(os.getpid(), sig)
        time.sleep(30)  # the handler raises here
        raise AssertionError("not interrupted")

    monkeypatch.setattr(build, "build_project", build_project)
    root = write_tiny_kernel(tmp_path / "p")
    argv = ["build", str(root), "-o", str(out), "--cache-dir", str(tmp_path / "cache")]
    # SIGINT as a terminal delivers it: a run started in the background (`&`) inherits an
    # ignored SIGINT, which the CLI leaves ignored, and this test would wait out its sleep
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main([*argv, "--variant", f"torch21{{3,4,5}}-cxx11-cpu-{host}-linux"]) == code
    finally:
        signal.signal(signal.SIGINT, previous)
    said = capsys.readouterr()
    lines = (said.out + said.err).splitlines()
    assert "interrupted: 2 of 3 variant(s) finished" in lines
    assert f"  built {names[0]}: {wheel}" in lines
    assert f"  failed {names[1]} (log: {out / 'logs' / 'b.log'})" in lines
    assert f"  not finished, no wheel: {names[2]}" in lines
    assert "Traceback" not in said.err


def test_a_variant_that_makes_its_wheel_while_an_interrupt_stops_the_others_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Side by side, an interrupt stops the running variants' commands and leaves their outcomes
    # unreported; one past its last command makes its wheel all the same, and went unreported
    # too: the interrupted run's summary would not name a wheel that is in -o.
    import threading

    from support.requests import build_request
    from support.tinykernel import write_tiny_kernel

    from kernelwheel.builder import service
    from kernelwheel.builder.request import BuiltWheel
    from kernelwheel.log import SilentReporter
    from kernelwheel.model.variant import Arch, Variant

    root = write_tiny_kernel(tmp_path / "p")
    host = Arch.host().value
    a, b = (Variant.parse(f"torch21{m}-cxx11-cpu-{host}-linux") for m in (3, 4))
    wheel = tmp_path / "a.whl"
    wheel.write_bytes(b"wheel")
    stopped = threading.Event()  # the run has stopped its commands: the interrupt is seen
    stop_running = service.stop_running

    running = threading.Event()  # a has started: the interrupt comes while it runs

    def build_and_export(req, progress, runner):  # type: ignore[no-untyped-def]
        if req.variant == b:
            assert running.wait(10)
            raise KeyboardInterrupt
        running.set()
        assert stopped.wait(10)
        return BuiltWheel(a, wheel, "ns", req.log)

    def stop() -> None:
        stop_running()
        stopped.set()

    monkeypatch.setattr(service, "build_and_export", build_and_export)
    monkeypatch.setattr(service, "stop_running", stop)

    class Progress(SilentReporter):
        finished: list[str] = []

        def variant_started(self, name: str, *, side_by_side: bool = False) -> None:
            pass

        def variant_finished(self, outcome: service.Outcome) -> None:
            self.finished.append(f"{outcome.variant} {outcome.wheel}")

    progress = Progress()
    requests = [build_request(root, v) for v in (b, a)]  # b's interrupt is seen first
    with pytest.raises(KeyboardInterrupt):
        service._side_by_side(requests, 2, progress, runner=None)  # type: ignore[arg-type]
    assert progress.finished == [f"{a.name} {wheel}"]


def test_an_interrupted_build_with_json_lists_the_finished_wheels_in_its_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # --json printed {"error": "Interrupted"} alone: a CI script reading stdout lost the wheel
    # the first variant had finished (the summary went to stderr only)
    import json

    from support.tinykernel import write_tiny_kernel

    from kernelwheel.cli import build, main

    out = tmp_path / "out"
    out.mkdir()
    names, selector, wheel, build_project = _first_of_two_then(signal.SIGTERM, out)
    wheel.write_bytes(b"PK")

    monkeypatch.setattr(build, "build_project", build_project)
    root = write_tiny_kernel(tmp_path / "p")
    argv = ["build", str(root), "-o", str(out), "--cache-dir", str(tmp_path / "cache"), "--json"]
    assert main([*argv, "--variant", selector]) == 143
    document = json.loads(capsys.readouterr().out)
    assert document["error"]["kind"] == "Terminated"
    assert [(w["variant"], w["path"]) for w in document["wheels"]] == [(names[0], str(wheel))]
    assert document["not_finished"] == [names[1]]


def test_a_second_ctrl_c_does_not_cut_the_interrupted_builds_summary_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The user pressed Ctrl-C twice: the second came while the summary of what finished was
    # printed, raised there, and the list of finished wheels stopped after its first line.
    import os
    import time

    from support.tinykernel import write_tiny_kernel

    from kernelwheel.cli import build, main

    out = tmp_path / "out"
    names, selector, wheel, build_project = _first_of_two_then(signal.SIGINT, out)
    summary = build.interrupted_summary

    def pressed_again(*args):  # type: ignore[no-untyped-def]
        for number, line in enumerate(summary(*args)):
            if number == 1:  # the second Ctrl-C, after the summary's first line
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)  # a handler that raises does so here
            yield line

    monkeypatch.setattr(build, "build_project", build_project)
    monkeypatch.setattr(build, "interrupted_summary", pressed_again)
    root = write_tiny_kernel(tmp_path / "p")
    argv = ["build", str(root), "-o", str(out), "--cache-dir", str(tmp_path / "cache")]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's
    try:
        assert main([*argv, "--variant", selector]) == 130
        # the CLI's handler is put back as it returns: a later Ctrl-C is not ignored
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    said = capsys.readouterr()
    lines = (said.out + said.err).splitlines()
    assert "interrupted: 1 of 2 variant(s) finished" in lines
    assert f"  built {names[0]}: {wheel}" in lines
    assert f"  not finished, no wheel: {names[1]}" in lines
    assert "Traceback" not in said.err
