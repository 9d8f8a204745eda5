"""Progress while work happens: a start line per step (seen on a pseudo-terminal before the step
ends), a heartbeat with the elapsed time and what the step's log says it is doing, --verbose
streaming the tools' output, --quiet keeping only errors and the summary."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.variants import TORCH214_CPU as CPU

from kernelwheel.builder.service import Outcome
from kernelwheel.cli import main
from kernelwheel.cli.build import _Progress, summary_table
from kernelwheel.cli.ui import QUIET, VERBOSE, ConsoleUI, activity_of
from kernelwheel.errors import ToolchainError
from kernelwheel.log import step

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"

# A step that runs until the file named by argv[1] appears, its tool writing to argv[2].
_SLOW_STEP = r"""
import sys, time
from pathlib import Path
from kernelwheel.cli.ui import ConsoleUI
from kernelwheel.log import step
release, log = Path(sys.argv[1]), Path(sys.argv[2])
ui = ConsoleUI()
print("tty" if ui.tty else "no tty", flush=True)
with step(ui, "torch214-cxx11-cpu-x86_64-linux", "environment", log=log):
    with open(log, "a") as fh:
        fh.write("Collecting torch==2.14.1\n  Downloading torch-2.14.1-cp311-linux.whl (190 MB)\n")
    while not release.exists():
        time.sleep(0.05)
print("after the step", flush=True)
"""


def _read_until(fd: int, needle: bytes, seen: bytearray, timeout: float = 30) -> bool:
    end = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
    return needle in seen


def test_start_line_and_live_status_appear_before_the_step_ends(tmp_path: Path) -> None:
    release, log = tmp_path / "release", tmp_path / "variant.log"
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_STEP, str(release), str(log)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    seen = bytearray()
    try:
        assert _read_until(leader, b"environment", seen), seen.decode(errors="replace")
        assert b"tty" in seen and b"no tty" not in seen
        assert b"\xe2\x96\xb8 torch214-cxx11-cpu-x86_64-linux: environment" in seen  # ▸ start
        # The status line, redrawn in place, shows what pip is downloading while the step runs.
        assert _read_until(leader, b"Downloading torch-2.14.1", seen), seen.decode(errors="replace")
        assert _read_until(leader, b"\r\x1b[K", seen)  # ... and redrawn in place
        assert b"after the step" not in seen and not release.exists()
        release.touch()
        assert _read_until(leader, b"after the step", seen), seen.decode(errors="replace")
    finally:
        release.touch()
        proc.wait(timeout=30)
        os.close(leader)
    text = seen.decode(errors="replace")
    assert text.index("▸ torch214") < text.index("✓ torch214-cxx11-cpu-x86_64-linux: environment")


def _slow_step(ui: ConsoleUI, log: Path, lines: list[str], seconds: float) -> None:
    with step(ui, "v", "environment", log=log) as detail:
        with open(log, "a") as fh:
            for line in lines:
                fh.write(line + "\n")
                fh.flush()
        time.sleep(seconds)
        detail.append("torch 2.14.1")


def test_heartbeat_when_not_a_terminal_names_elapsed_time_and_activity(tmp_path: Path) -> None:
    out = io.StringIO()
    ui = ConsoleUI(out=out, err=out, heartbeat=0.3)
    log = tmp_path / "v.log"
    log.write_text("old line from before the step\n")
    _slow_step(ui, log, ["Collecting torch==2.14.1", "  Downloading torch-2.14.1.whl"], 1.0)
    lines = out.getvalue().splitlines()
    assert lines[0] == "  > v: environment …"  # plain marks: StringIO has no encoding
    beats = [line for line in lines if line.startswith("  … v: environment: ")]
    assert beats and all(line.endswith("Downloading torch-2.14.1.whl") for line in beats)
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()  # plain lines
    assert lines[-1].startswith("  ok v: environment (1.") and lines[-1].endswith("torch 2.14.1")
    assert "old line" not in out.getvalue()  # followed from where the log stood


def test_verbose_streams_the_tools_output(tmp_path: Path) -> None:
    out = io.StringIO()
    ui = ConsoleUI(out=out, err=out, verbosity=VERBOSE, heartbeat=60)
    _slow_step(ui, tmp_path / "v.log", ["[1/2] c++ -c img2gray_cpu.cpp", "[2/2] c++ -shared"], 0)
    text = out.getvalue()
    assert "    | [1/2] c++ -c img2gray_cpu.cpp\n    | [2/2] c++ -shared\n" in text
    assert text.index("| [2/2]") < text.index("ok v: environment")


def test_quiet_keeps_only_results_warnings_and_errors(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    ui = ConsoleUI(out=out, err=err, verbosity=QUIET, heartbeat=0.1)
    ui.info("", "img2gray 0.1.0; 1 variant(s)")
    ui.group("v")
    _slow_step(ui, tmp_path / "v.log", ["Downloading torch"], 0.4)
    ui.done("v", True, 1.0)
    ui.print("the summary")
    ui.warn("a warning")
    ui.error("an error")
    assert out.getvalue() == "the summary\n"
    assert err.getvalue() == "warning: a warning\nerror: an error\n"


def test_log_to_keeps_every_line_even_when_quiet(tmp_path: Path) -> None:
    out = io.StringIO()
    ui = ConsoleUI(out=out, err=out, verbosity=QUIET)
    log = ui.log_to(tmp_path / "logs" / "run.log", "header")
    _slow_step(ui, tmp_path / "v.log", [], 0)
    ui.error("boom")
    ui.close()
    text = log.read_text()
    assert text.startswith("header\n  > v: environment …\n  ok v: environment (")
    assert text.endswith("error: boom\n")


def test_a_failing_build_shows_its_steps_totals_and_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI, with no real build: --python names an interpreter that does not exist,
    so the environment step fails at once."""
    out = tmp_path / "wh"
    args = ["build", str(IMG2GRAY), "--variant", CPU, "-o", str(out), "--python", "/no/python"]
    code = main(args)
    marks = ConsoleUI()  # the marks the CLI chose for this (captured) stdout
    captured = capsys.readouterr()
    assert code == ToolchainError.exit_code
    log = out / "logs" / f"{CPU}.log"
    assert log.is_file()
    lines = captured.out.splitlines()
    start = lines.index(f"  {marks.start_mark} {CPU}: environment …")
    assert lines[start + 1].startswith(f"  {marks.fail_mark} {CPU}: environment (")
    total = f"{marks.fail_mark} {CPU}: failed in "
    assert any(line.startswith(total) for line in lines)  # the variant's total
    table = lines[lines.index(next(x for x in lines if x.startswith("variant "))) :]
    assert table[0].split() == ["variant", "status", "time", "size", "wheel", "/", "log", "sha256"]
    assert table[1].split()[:2] == [CPU, "failed"] and f"log: {log}" in table[1]
    assert table[-1].startswith("0 of 1 variant(s) built in ")
    assert "cannot run the interpreter /no/python" in captured.err
    assert f"log: {log}" in captured.err  # the failure names the log to read


def test_quiet_build_prints_no_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "wh"
    args = ["build", str(IMG2GRAY), "--variant", CPU, "-o", str(out), "--python", "/no/python"]
    assert main([*args, "-q"]) == ToolchainError.exit_code
    captured = capsys.readouterr()
    assert "environment" not in captured.out
    assert captured.out.startswith("variant ") and "failed" in captured.out
    assert captured.err.startswith("error: ")


@pytest.mark.parametrize(
    ("line", "activity"),
    [
        ("Collecting torch==2.14.1", "Collecting torch==2.14.1"),
        ("  Downloading torch-2.14.1-cp311-linux.whl (190 MB)",
         "Downloading torch-2.14.1-cp311-linux.whl (190 MB)"),
        # ninja writing to a file prints a unit's line when the unit has finished
        ("[2/5] /usr/bin/c++ -MMD -c /src/csrc/img2gray_cpu.cpp -o x.o",
         "2/5 done: img2gray_cpu.cpp"),
        ("[3/5] nvcc --threads=4 -c /src/csrc/img2gray.cu -o img2gray.cuda.o",
         "3/5 done: img2gray.cu"),
        ("<command-line>: note: this is the location of the previous definition", None),
    ],
)  # fmt: skip
def test_activity_lines(line: str, activity: str | None) -> None:
    assert activity_of(line) == activity


def test_a_warning_does_not_hide_the_compile_progress(tmp_path: Path) -> None:
    out = io.StringIO()
    ui = ConsoleUI(out=out, err=out, heartbeat=0.3)
    lines = ["[1/2] c++ -c /p/csrc/img2gray_cpu.cpp -o a.o", "x.cpp:1: warning: unused", "note: x"]
    _slow_step(ui, tmp_path / "v.log", lines, 0.8)
    beats = [line for line in out.getvalue().splitlines() if line.startswith("  … v:")]
    assert beats and all(line.endswith("1/2 done: img2gray_cpu.cpp") for line in beats)


def test_the_compile_progress_names_the_units_compiling_then_each_finished(
    tmp_path: Path,
) -> None:
    """The units the log names before ninja starts show while they compile (not ninja's command
    line, nor a cache path); each unit ninja finishes is shown done, in the author's path."""
    out = io.StringIO()
    ui = ConsoleUI(out=out, err=out, heartbeat=0.2)
    log = tmp_path / "v.log"
    cache = "/root/.cache/kernelwheel/dev/p1-0123/torch213-cxx11-cpu-x86_64-linux"
    with step(ui, "v", "compile", log=log):
        with open(log, "a") as fh:
            fh.write(
                "units to compile: csrc/p1_cpu.cpp, csrc/p1_extra.cpp, kernelwheel_compat.cpp\n"
            )
            fh.write(f"$ /usr/bin/ninja -v -C {cache}/build -j 2\n")
        time.sleep(0.6)
        with open(log, "a") as fh:
            fh.write(f"[1/3] c++ -MMD -c {cache}/project/csrc/p1_extra.cpp -o {cache}/b.o\n")
        time.sleep(0.6)
        with open(log, "a") as fh:
            fh.write("[2/3] c++ -c /root/.cache/kernelwheel/data/kernelwheel_compat.cpp -o c.o\n")
        time.sleep(0.6)
    beats = [line for line in out.getvalue().splitlines() if line.startswith("  … v: compile")]
    shown = [line.partition("  ")[2].partition("  ")[2] for line in beats]
    assert shown[0] == ("compiling csrc/p1_cpu.cpp, csrc/p1_extra.cpp, kernelwheel_compat.cpp"), (
        beats
    )
    assert "1/3 done: csrc/p1_extra.cpp; compiling csrc/p1_cpu.cpp, kernelwheel_compat.cpp" in shown
    assert shown[-1] == "2/3 done: kernelwheel_compat.cpp; compiling csrc/p1_cpu.cpp", beats
    assert not any("ninja" in line or ".cache" in line for line in beats)


def test_side_by_side_variants_each_get_a_whole_group_on_github(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two variants at once: their lines interleave as they come, but on GitHub Actions each
    variant's lines are shown together, in its own group, when it ends."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    out = io.StringIO()
    progress = _Progress(ConsoleUI(out=out, err=out, heartbeat=60))
    progress.variant_started("a", side_by_side=True)
    progress.variant_started("b", side_by_side=True)
    with step(progress, "a", "environment"):
        pass
    with step(progress, "b", "environment"):
        pass
    with step(progress, "a", "compile"):
        pass
    assert out.getvalue() == ""  # nothing shown while both run
    progress.variant_finished(Outcome("b", 1.0, None, error=ToolchainError("no nvcc")))
    progress.variant_finished(Outcome("a", 2.0, None))
    lines = out.getvalue().splitlines()
    first_end = lines.index("::endgroup::")
    assert lines[0] == "::group::b"
    assert lines[1:first_end] == ["  > b: environment …", lines[2], "FAIL b: failed in 1.0s"]
    assert lines[2].startswith("  ok b: environment (")
    assert lines[first_end + 1] == "::error::b: no nvcc"  # the annotation, outside the group
    second = lines.index("::group::a")
    assert lines[second + 1 :] == [
        "  > a: environment …",
        lines[second + 2],
        "  > a: compile …",
        lines[second + 4],
        "ok a: done in 2.0s",
        "::endgroup::",
    ]


def test_a_variant_alone_streams_into_its_group_on_github(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    out = io.StringIO()
    progress = _Progress(ConsoleUI(out=out, err=out, heartbeat=60))
    progress.variant_started("a")
    with step(progress, "a", "environment"):
        pass
    assert out.getvalue().splitlines()[:2] == ["::group::a", "  > a: environment …"]
    progress.variant_finished(Outcome("a", 2.0, None))
    assert out.getvalue().splitlines()[-2:] == ["ok a: done in 2.0s", "::endgroup::"]


def test_the_totals_line_is_the_builds_time_not_the_sum_of_its_variants() -> None:
    # two variants of 10 s each built side by side (--variant-jobs 2) in 12 s: it said 20 s
    outcomes = [Outcome("a", 10.0, Path("a.log")), Outcome("b", 10.0, Path("b.log"))]
    assert summary_table(outcomes, 12.0).splitlines()[-1] == "0 of 2 variant(s) built in 12.0s"
