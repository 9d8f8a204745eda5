"""SIGINT and SIGTERM at several points of to-wheel and download, in real subprocesses of the
CLI (issue 13 item 5): the run exits 130/143 without a traceback and leaves nothing but complete
files in the output folder (no hidden staging folder, no half-written file); staging folders
that a killed run (SIGKILL) left behind are removed by the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.gitrepo import HubRepo, variant_files
from support.interrupt import interrupt_at

from kernelwheel._util import remove_stale_staging, staged_file, staging_dir
from kernelwheel.locking.resolve import LockRequest, lock_project

VARIANTS = (
    "torch27-cxx11-cu128-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cpu-x86_64-linux",
)

# Runs the real CLI with one function paused (before or after its original runs), after
# touching a mark file, so a signal arrives at a known point.


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> HubRepo:
    root = tmp_path_factory.mktemp("signals")
    cache = so_cache
    repo = HubRepo(root / "img2gray")
    repo.set_variants(variant_files(v, so_cache=cache, pad=2 << 20) for v in VARIANTS)
    repo.commit("build")
    repo.tag("v1.1.2")
    return repo


@pytest.fixture(scope="module")
def project(repo: HubRepo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    app = tmp_path_factory.mktemp("app")
    (app / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.kernelwheel.dependencies]\n'
        f'"drbh/img2gray" = {{ version = "1.1.2", path = "{repo.root}" }}\n'
    )
    lock_project(LockRequest(app))
    return app


def _interrupt(
    tmp_path: Path, point: tuple[str, str, str], sig: int, args: list[str], pause: float = 30
) -> tuple[int, str]:
    code, _, err = interrupt_at(tmp_path, point, sig, args, pause=pause)
    return code, err


def _hidden_or_partial(folder: Path) -> list[str]:
    """Hidden entries and folders (staging) in ``folder``; the command's logs/ is expected, and
    must hold nothing hidden either (a half-written log would be named ``.tmp-*``)."""
    if not folder.exists():
        return []
    logs = folder / "logs"
    found = [p for p in folder.iterdir() if p.name.startswith(".") or not p.is_file()]
    found += [p for p in logs.iterdir() if p.name.startswith(".")] if logs.is_dir() else []
    return sorted(p.name for p in found if p != logs)


TO_WHEEL_POINTS = [
    ("kernelwheel.hub.towheel", "prepare_wheel", "before"),  # staging made, nothing written
    ("kernelwheel.abi.checker", "check_wheel", "before"),  # a wheel in staging
    ("kernelwheel.hub.towheel", "publish", "after"),  # one wheel moved in, the others not
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("point", TO_WHEEL_POINTS, ids=lambda p: p[1])
def test_to_wheel_cleans_up(
    repo: HubRepo, tmp_path: Path, point: tuple[str, str, str], sig: int
) -> None:
    out = tmp_path / "out"
    args = ["to-wheel", str(repo.root), "1.1.2", "-o", str(out), "--jobs", "1"]
    code, err = _interrupt(tmp_path, point, sig, args)
    assert code == (143 if sig == signal.SIGTERM else 130), err
    assert "Traceback" not in err
    assert ("terminated" if sig == signal.SIGTERM else "interrupted") in err
    assert _hidden_or_partial(out) == []
    if point[1] == "publish":
        assert len(list(out.glob("*.whl"))) == 1  # complete wheels only


def test_to_wheel_sigterm_while_worker_threads_convert(repo: HubRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    point = ("kernelwheel.hub.towheel", "write_wheel", "after")
    args = ["to-wheel", str(repo.root), "1.1.2", "-o", str(out), "--jobs", "3"]
    code, err = _interrupt(tmp_path, point, signal.SIGTERM, args, pause=1)
    assert code == 143 and "Traceback" not in err, err
    assert _hidden_or_partial(out) == [] and list(out.glob("*.whl")) == []


DOWNLOAD_POINTS = [
    ("kernelwheel.hub.towheel", "write_wheel", "after"),
    ("kernelwheel.locking.download", "publish", "after"),
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("point", DOWNLOAD_POINTS, ids=lambda p: f"{p[0].split('.')[-1]}.{p[1]}")
def test_download_cleans_up(
    project: Path, tmp_path: Path, point: tuple[str, str, str], sig: int
) -> None:
    house = tmp_path / "house"
    args = ["download", str(project), "--wheelhouse", str(house), "--jobs", "1"]
    code, err = _interrupt(tmp_path, point, sig, args)
    assert code == (143 if sig == signal.SIGTERM else 130), err
    assert "Traceback" not in err
    assert _hidden_or_partial(house) == []


def test_staging_left_by_a_killed_run_is_removed_by_the_next(repo: HubRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    point = ("kernelwheel.abi.checker", "check_wheel", "before")
    args = ["to-wheel", str(repo.root), "1.1.2", "-o", str(out), "--jobs", "1"]
    code, _ = _interrupt(tmp_path, point, signal.SIGKILL, args)
    assert code == -signal.SIGKILL
    stale = [p.name for p in out.iterdir() if p.name.startswith(".kernelwheel-")]
    assert stale  # SIGKILL cannot be caught: the folder stays ...
    from kernelwheel.cli import main

    assert main(["to-wheel", str(repo.root), "1.1.2", "-o", str(out)]) == 0
    assert _hidden_or_partial(out) == []  # ... until the next run in that folder
    assert len(list(out.glob("*.whl"))) == len(VARIANTS)


def test_a_dead_runs_staging_and_temporary_files_go_a_live_runs_stay(tmp_path: Path) -> None:
    with staging_dir(tmp_path, "x") as mine, staged_file(tmp_path / "w.whl") as live:
        dead = tmp_path / ".kernelwheel-x-999999999-abc"
        dead.mkdir()
        dead_file = tmp_path / ".kernelwheel-tmp-999999999-abc.whl"  # staged_file's, SIGKILLed
        dead_file.write_bytes(b"half a wheel")
        assert sorted(remove_stale_staging(tmp_path)) == sorted([dead, dead_file])
        assert mine.exists() and live.exists()


# --- issue 30: a signal to kernelwheel's pid alone stops every command it started -------------

# The CLI as a terminal runs it (SIGINT raises KeyboardInterrupt even when the test runner was
# started in the background, which hands SIGINT down ignored).
CLI = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from kernelwheel.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _marked(token: bytes) -> list[tuple[int, list[str]]]:
    """The live processes whose environment holds ``token`` (every descendant of a run inherits
    it, whatever process group or session it is in), with their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token not in (entry / "environ").read_bytes():
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        found.append((int(entry.name), [a.decode(errors="replace") for a in argv if a]))
    return found


def _is_pip_install(argv: list[str]) -> bool:
    return "pip" in argv and "install" in argv


def _is_compiler(argv: list[str]) -> bool:
    return bool(argv) and Path(argv[0]).name in ("cc1plus", "c++", "g++", "gcc", "cc")


def _start(cmd: list[str], token: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KW_SIGNAL_RUN": token}
    env.pop("KERNELWHEEL_TRACEBACK", None)
    with open(log, "wb") as fh:  # a file, not a pipe: a full pipe would stall the run
        return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)


def _wait_for(proc: subprocess.Popen[bytes], token: bytes, which: Any, log: Path) -> None:
    deadline = time.monotonic() + 300
    while not any(which(argv) for _, argv in _marked(token)):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"never reached the step: rc={proc.poll()}\n{log.read_text()}")
        time.sleep(0.01)


def _survivors(token: bytes) -> list[tuple[int, list[str]]]:
    # SIGKILLed processes take a moment to go (a zombie does not count); an orphan left running
    # would still be there: a compiler runs for seconds, pip longer.
    deadline = time.monotonic() + 0.5
    while (left := _marked(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.integration
def test_signals_to_the_pid_mid_environment_and_mid_compile_leave_no_child(
    tmp_path: Path,
) -> None:
    """Issue 30: SIGTERM and SIGINT sent to kernelwheel's pid only (as kill, a container stop
    and CI cancellation send them), while pip creates the build environment and while the
    compiler runs: the run exits 143/130 without a traceback and no process it started survives;
    after a SIGKILL mid-environment the next run stops the orphaned pip (the lock's owner file)
    and says so; the next run builds the wheel. A tvm-ffi variant: a small environment and a
    small compile, through the same runner as every build."""
    from support.kinds import write_tvm_ffi_project

    from kernelwheel.model.variant import Arch

    project = write_tvm_ffi_project(tmp_path / "p")
    variant = f"tvm-ffi01-cpu-{Arch.host().value}-linux"
    cache, out = tmp_path / "cache", tmp_path / "out"
    cmd = [sys.executable, "-c", CLI, "build", str(project), "--variant", variant]
    cmd += ["--cache-dir", str(cache), "-o", str(out), "--no-ccache"]
    cases = [
        (signal.SIGTERM, _is_pip_install, 143),
        (signal.SIGINT, _is_pip_install, 130),
        (signal.SIGTERM, _is_compiler, 143),
        (signal.SIGINT, _is_compiler, 130),
    ]
    for index, (sig, which, code) in enumerate(cases):
        token = f"kw-signal-{os.getpid()}-{index}"
        log = tmp_path / f"run{index}.log"
        proc = _start(cmd, token, log)
        _wait_for(proc, token.encode(), which, log)
        os.kill(proc.pid, sig)  # the pid only, not its group
        assert proc.wait(timeout=120) == code, log.read_text()
        text = log.read_text()
        assert "Traceback" not in text, text
        assert _survivors(token.encode()) == [], (sig, which.__name__, text)
        assert list(out.glob("*.whl")) == []

    # SIGKILL cannot be caught: pip goes on as an orphan; the next run's lock stops it.
    env_cache = tmp_path / "cache-killed"
    killed_cmd = [*cmd[: cmd.index("--cache-dir") + 1], str(env_cache), *cmd[cmd.index("-o") :]]
    token = f"kw-signal-{os.getpid()}-kill"
    proc = _start(killed_cmd, token, tmp_path / "killed.log")
    _wait_for(proc, token.encode(), _is_pip_install, tmp_path / "killed.log")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    owners = list((env_cache / "envs").glob("*.lock.owner"))
    assert owners, "a killed holder leaves its owner file"
    next_log = tmp_path / "next.log"
    nxt = _start(killed_cmd, f"kw-signal-{os.getpid()}-next", next_log)
    assert nxt.wait(timeout=600) == 0, next_log.read_text()
    assert f"a run that died (pid {proc.pid})" in next_log.read_text()
    assert _survivors(token.encode()) == []  # the orphan is gone
    assert len(list(out.glob("*.whl"))) == 1

    # And the first cache, interrupted four times, still builds.
    final_log = tmp_path / "final.log"
    final = _start(cmd, f"kw-signal-{os.getpid()}-final", final_log)
    assert final.wait(timeout=600) == 0, final_log.read_text()
    assert len(list(out.glob("*.whl"))) == 1


def _is_compiling_a_source(argv: list[str]) -> bool:
    """cc1plus on one of the project's sources (not a probe's ``/dev/null``)."""
    return bool(argv) and Path(argv[0]).name == "cc1plus" and "/dev/null" not in argv


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_torch_compile_stops_worker_ninja_and_compilers(
    tmp_path: Path, sig: int
) -> None:
    """Issue 30: a torch variant compiles in the compile worker, which runs torch's ninja, which
    runs the compilers (three levels below kernelwheel). A signal to kernelwheel's pid alone,
    while cc1plus runs under ninja, ends the run with 143/130, no traceback, and none of the
    worker, ninja or compilers left running."""
    from support.builds import CPU_VARIANT, IMG2GRAY

    out = tmp_path / "out"
    cmd = [sys.executable, "-c", CLI, "build", str(IMG2GRAY), "--variant", CPU_VARIANT]
    cmd += ["-o", str(out), "--no-ccache", "--jobs", "2"]
    token = f"kw-signal-{os.getpid()}-torch-{int(sig)}"
    log = tmp_path / "run.log"
    proc = _start(cmd, token, log)
    _wait_for(proc, token.encode(), _is_compiling_a_source, log)
    chain = [argv for _, argv in _marked(token.encode())]
    assert any(Path(a[0]).name == "ninja" for a in chain if a), chain
    assert any(len(a) > 1 and a[1].endswith("_compile_worker.py") for a in chain), chain
    os.kill(proc.pid, sig)  # the pid only, not its group
    assert proc.wait(timeout=120) == (143 if sig == signal.SIGTERM else 130), log.read_text()
    text = log.read_text()
    assert "Traceback" not in text, text
    assert _survivors(token.encode()) == [], text
    assert list(out.glob("*.whl")) == []


def _wait_gone(pid: int, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as fh:  # a zombie is gone for our purpose
            if fh.read().rpartition(")")[2].split()[0] == "Z":
                return True
        time.sleep(0.02)
    return False


def test_a_command_leaves_nothing_of_its_group_running(tmp_path: Path) -> None:
    """A command that exits while something it started still runs (a compiler ninja did not
    wait for): run_logged kills the command's process group on its way out."""
    from kernelwheel._util import run_logged

    pidfile = tmp_path / "pid"
    code = run_logged(["sh", "-c", f"sleep 60 & echo $! > {pidfile}"], tmp_path / "log")
    assert code == 0
    assert _wait_gone(int(pidfile.read_text()))


def test_a_dead_owners_commands_are_stopped_by_the_next_lock_holder(tmp_path: Path) -> None:
    """The owner file beside a lock names its holder (pid, start time); every command a run
    starts carries that identity in its environment, so a holder that died (SIGKILL) left them
    running, even one killed before anything about it was written: the next holder kills what
    carries the dead run's identity, a child of it in a session of its own too, and says so.
    A process of another run (another start time for the same pid) is left alone."""
    import json

    from kernelwheel._util import RUN_ID_VARIABLE, locked

    def run_of(run_id: str, script: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, RUN_ID_VARIABLE: run_id}
        return subprocess.Popen(["sh", "-c", script], env=env, start_new_session=True)

    pidfile = tmp_path / "grandchild"
    # the grandchild leaves the group and session of the command that started it
    orphan = run_of("999999999:123", f"setsid sleep 60 & echo $! > {pidfile}; wait")
    stranger = run_of("999999999:456", "sleep 60")
    try:
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text().endswith("\n")):
            assert time.monotonic() < deadline, "the grandchild never started"
            time.sleep(0.02)
        grandchild = int(pidfile.read_text())
        owner = tmp_path / "env.lock.owner"
        owner.write_text(json.dumps({"pid": 999999999, "start": "123"}))
        with locked(tmp_path / "env.lock") as dead:
            assert dead is not None and dead.pid == 999999999
            assert set(dead.stopped) >= {orphan.pid, grandchild}
            assert "a run that died (pid 999999999)" in dead.describe()
            assert json.loads(owner.read_text())["pid"] == os.getpid()  # now ours
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert _wait_gone(grandchild)
        assert stranger.poll() is None  # not the dead run's: untouched
        assert not owner.exists()
    finally:
        for proc in (orphan, stranger):
            proc.kill()
            proc.wait()


def test_the_commands_a_run_starts_carry_its_identity(tmp_path: Path) -> None:
    from kernelwheel._util import RUN_ID_VARIABLE, _start_time, run_captured

    out = run_captured(["sh", "-c", f"echo ${RUN_ID_VARIABLE}"]).stdout.strip()
    assert out == f"{os.getpid()}:{_start_time(os.getpid())}"
    out = run_captured(["sh", "-c", f"echo ${RUN_ID_VARIABLE}"], env={"PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == f"{os.getpid()}:{_start_time(os.getpid())}"


def test_a_lock_without_owner_file_or_with_a_damaged_one_is_just_taken(tmp_path: Path) -> None:
    from kernelwheel._util import locked

    with locked(tmp_path / "a.lock") as dead:
        assert dead is None
    (tmp_path / "b.lock.owner").write_text("{not json")
    with locked(tmp_path / "b.lock") as dead:
        assert dead is None


def test_a_run_that_waits_for_a_lock_says_who_holds_it(tmp_path: Path) -> None:
    """Two `kernelwheel test` of one project: the second waits for the first's build, and says
    so (a silent wait of minutes looks like a hang)."""
    from kernelwheel._util import locked

    lock = tmp_path / "v.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True, env=_env()
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    told: list[str] = []
    with locked(lock, told.append):  # taken once the holder let go
        pass
    assert told == [f"pid {holder.pid}"]
    holder.communicate()
    with locked(lock, told.append):  # free: nothing said
        pass
    assert len(told) == 1


_HOLD_LOCK = """
import sys, time
from pathlib import Path
from kernelwheel._util import locked
with locked(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(1.5)
"""


def _env() -> dict[str, str]:
    src = str(Path(__import__("kernelwheel").__file__).parents[1])
    return {**os.environ, "PYTHONPATH": src}


def test_a_closed_terminal_unwinds_as_sigterm_does(tmp_path: Path) -> None:
    """SIGHUP (the terminal closed, an ssh session dropped) killed the run outright: its
    compilers or tests ran on, its lock's owner file stayed, staging folders were left."""
    from support.kinds import write_noarch_project

    root = write_noarch_project(tmp_path / "n")
    cache = tmp_path / "c"
    point = ("kernelwheel.builder.dev", "lay_out_hub", "before")
    args = ["dev", str(root), "--cache-dir", str(cache)]
    code, _, err = interrupt_at(tmp_path, point, signal.SIGHUP, args)
    assert code == 129, err
    assert "terminated (SIGHUP)" in err and "Traceback" not in err
    assert not list(cache.rglob("*.owner")) and not list(cache.rglob(".kernelwheel-*"))
