"""Shared file and process helpers: hashing, atomic publishing (outputs appear whole or not at
all), locks, and the one process runner: every command kernelwheel starts goes through here, so
an interrupt stops them all (:func:`stop_running`)."""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import ToolchainError, UsageError

_CHUNK = 1 << 20
Command = Sequence[str | Path]  # a command and its arguments, as every runner takes them
Env = Mapping[str, str]

# The secrets this process was given (a Hub token): whatever the CLI writes (terminal, logs,
# --json, tracebacks) passes through redact.
_SECRETS: set[str] = set()
REDACTED = "<redacted>"


def secret(value: str) -> str:
    """Register ``value`` (and its stripped form) as a secret; returns it unchanged."""
    _SECRETS.update(v for v in (value, value.strip()) if len(v) >= 4)
    return value


# A URL's login: its password (``user:PASSWORD@``), a one-part login (``https://TOKEN@host/``,
# as pip hides it), ccache's ``redis://[USER:]PASSWORD@`` whole, up to the authority's last
# ``@`` as pip and urllib split it; and ccache's ``|bearer-token=TOKEN``.
_LOGIN = re.compile(r"(redis://|://)([^/\s?#\"'<>`]*)@")  # quotes end it: JSON, shell
_TOKEN = re.compile(r"(bearer-token=)[^|\s]+")


def _hide_login(match: re.Match[str]) -> str:
    user, colon, _ = match[2].partition(":")
    shown = user if colon and match[1] == "://" else ""  # the user name of user:password
    return f"{match[1]}{shown}{colon if shown else ''}{REDACTED}@"


def redact(text: str) -> str:
    """``text`` with every secret (and its repr's escapes) and URL password as ``<redacted>``."""
    for value in sorted(_SECRETS, key=len, reverse=True):
        for form in (value, repr(value)[1:-1]):
            text = text.replace(form, REDACTED)
    return _TOKEN.sub(rf"\1{REDACTED}", _LOGIN.sub(_hide_login, text))


# The first lines of a script run as ``python -c`` that probes an interpreter: ``-c`` puts the
# current folder first on sys.path, so a ``torch/`` there (a PyTorch checkout) would be probed
# instead of the interpreter's torch (``-P`` does this on Python 3.11+ only).
NO_CWD_ON_PATH = "import sys\nif sys.path[:1] == ['']:\n    del sys.path[0]\n"

# An empty path (``-o "$OUT"`` with OUT unset) is refused, not taken for the current folder,
# where it would write or read what was meant for another: one wording for every source.
EMPTY_PATH = "an empty path (an unset variable?); '.' is this folder"

# The fix of a write a full disk (or quota) refused.
DISK_FULL_HINT = "free space on that disk (df -h), or pass a folder on another one"


def disk_full(exc: OSError) -> bool:
    """Whether ``exc`` is a write refused for want of space (a full disk or a quota)."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in chunks (wheels and fatbins can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_remembered(path: Path, memo: Path) -> str:
    """:func:`sha256_file`, hashed again only when the size, mtime or inode ``memo`` records
    differ (a dev build's shared object is hundreds of MB: hashing it every run cost seconds)."""
    st = path.stat()
    stamp = f"{st.st_size} {st.st_mtime_ns} {st.st_ino} {st.st_dev}"
    try:
        recorded_stamp, recorded = memo.read_text().split("\n")[:2]
    except (OSError, ValueError):
        recorded_stamp = recorded = ""
    if recorded_stamp == stamp and len(recorded) == 64:
        return recorded
    digest = sha256_file(path)
    atomic_write(memo, f"{stamp}\n{digest}\n")
    return digest


@contextmanager
def staged_file(final: Path, *, mode: int = 0o644) -> Iterator[Path]:
    """A temporary path beside ``final``, renamed onto it on success, removed on any error."""
    final.parent.mkdir(parents=True, exist_ok=True)
    prefix = f"{_STAGING}tmp-{os.getpid()}-"  # a dead run's leftover is removed by the next
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=final.suffix, dir=final.parent)
    except OSError as exc:  # named by the file meant, not by the temporary one (a read-only disk)
        raise OSError(exc.errno, exc.strerror, str(final)) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, mode)
        os.replace(tmp, final)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename in (None, tmp_name) and not exc.filename2:
            exc.filename = str(final)  # a write's ENOSPC names no file; the temporary, no help
        raise


def publish(done: Path, final: Path) -> Path:
    """Move a finished file or folder onto ``final`` by one rename: old or new, never a part."""
    os.replace(done, final)
    return final


def write_if_changed(path: Path, text: str) -> Path:
    """``path`` holding ``text``, left alone (its time too) when it already does: a generated
    header rewritten unchanged would make ninja recompile every unit that includes it."""
    if not path.is_file() or path.read_text() != text:
        atomic_write(path, text)  # never half-written (a full disk, a kill), and named if not
    return path


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object kept at ``path``; empty when absent, unreadable or not an object (a
    record kernelwheel keeps for itself: a damaged one is read as none, never an error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def atomic_write(final: Path, data: bytes | str) -> Path:
    with staged_file(final) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return final


def atomic_copy(src: Path, final: Path) -> Path:
    """Copy ``src`` to ``final`` atomically (a no-op when they are the same file)."""
    if final.exists() and final.samefile(src):
        return final
    with staged_file(final) as tmp:
        shutil.copyfile(src, tmp)
    return final


_STAGING = ".kernelwheel-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


def remove_stale_staging(parent: Path) -> list[Path]:
    """Remove what dead runs (SIGKILL, power loss) staged in ``parent``, and return it; an
    interrupted run needs none of this: the CLI unwinds and removes its own."""
    removed: list[Path] = []
    for path in parent.glob(f"{_STAGING}*"):  # none where parent is no folder
        pid = path.name[len(_STAGING) :].split("-")[-2:-1]
        if not pid or not pid[0].isdigit() or _alive(int(pid[0])):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        elif path.is_file() and path.name.startswith(f"{_STAGING}tmp-"):  # staged_file's
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextmanager
def staging_dir(parent: Path, purpose: str) -> Iterator[Path]:
    """A private folder in ``parent`` (same file system: results move out by rename), removed
    on exit whatever happens; dead runs' folders are removed first."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(parent)
    path = Path(tempfile.mkdtemp(prefix=f"{_STAGING}{purpose}-{os.getpid()}-", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def output_dir(path: Path, flag: str) -> Path:
    """Make the output folder ``path`` (given with ``flag``); one that cannot be made or
    written is a UsageError naming it, before any work is done."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        where = "is a file" if isinstance(exc, FileExistsError) else "a part of the path is a file"
        raise UsageError(
            f"{flag} {path}: {where}, not a folder", hint=f"pass a folder to {flag}"
        ) from None
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot create the folder: {exc.strerror or exc}",
            hint=f"pass a folder you may write to {flag}",
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(
            f"{flag} {path}: the folder is not writable",
            hint=f"pass a folder you may write to {flag}, or fix its permissions",
        )
    return path


def check_output_path(path: Path, flag: str) -> Path:
    """Refuse, without creating anything, a folder ``path`` that cannot be made or written (its
    first existing folder judged): a UsageError naming it."""
    hint = f"pass a folder you may write to {flag}"
    existing = path
    while not existing.exists() and not existing.is_symlink() and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == path else f"lies under the file {existing}"
        raise UsageError(f"{flag} {path}: {where}, not a folder", hint=hint)
    if existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: {existing} is not writable", hint=hint)
    return path


def replace_dir(staging: Path, final: Path) -> Path:
    """Move ``staging`` onto ``final``, the old folder renamed aside first, so ``final`` is
    always the old or the new tree; a symlink there is the user's: a UsageError."""
    if final.is_symlink():
        raise UsageError(
            f"{final} is a symlink (to {os.readlink(final)}); kernelwheel writes a folder there "
            "and will not replace the link or write through it",
            hint="remove the link (or write the output elsewhere)",
        )
    if final.exists():
        old = final.with_name(f".old-{final.name}")
        if old.is_symlink() or old.is_file():
            old.unlink()
        elif old.exists():
            shutil.rmtree(old)  # left by an interrupted run
        os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old)
    else:
        os.replace(staging, final)
    return final


# The commands running, in every thread, so that an interrupt can kill them all (stop_running).
_RUNNING: set[subprocess.Popen[Any]] = set()
_RUNNING_LOCK = threading.Lock()
_STOPPED = threading.Event()
_KILLED = -9  # the exit code a command that was not started reports
# A signal handler's exception raised while the main thread is inside Popen (the child already
# started, no Popen object yet) would leave that child running unseen: it waits here until the
# command is registered (raise_when_safe).
_STARTING_IN_MAIN = False
_DEFERRED: list[BaseException] = []


def raise_when_safe(exc: BaseException) -> None:
    """Raise ``exc`` from a signal handler, or, while the main thread is starting a command,
    as soon as that command is registered for :func:`stop_running`."""
    if _STARTING_IN_MAIN:
        _DEFERRED.append(exc)
        return
    raise exc


# How long a stopped command's group has after SIGTERM before it is killed. ninja runs each
# compiler in a process group of its own, which no signal to ninja's group reaches; on SIGTERM
# ninja stops them itself, so it must not be SIGKILLed first.
_GRACE_SECONDS = 5.0


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """Stop ``proc``'s group (each command leads its own): SIGTERM, then SIGKILL what is left."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(proc.pid):
            break
        time.sleep(0.02)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(ProcessLookupError):
        proc.kill()
    # A SIGKILLed process ends when it next runs (later in uninterruptible I/O): wait for the
    # group, bounded, so that none of it is seen running once kernelwheel has exited.
    deadline = time.monotonic() + _GRACE_SECONDS
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _raise_deferred() -> None:
    if _DEFERRED:
        raise _DEFERRED.pop()


@contextmanager
def _tracked(start: Callable[[], subprocess.Popen[Any]]) -> Iterator[subprocess.Popen[Any] | None]:
    """``start()`` registered for :func:`stop_running` (the check and the start share the lock);
    None once stopped. Its group is killed on every way out, a normal one too (what it left)."""
    global _STARTING_IN_MAIN
    in_main = threading.current_thread() is threading.main_thread()
    with _RUNNING_LOCK:
        if _STOPPED.is_set():
            proc = None
        else:
            _STARTING_IN_MAIN = in_main
            try:
                proc = start()
                _RUNNING.add(proc)
            except BaseException as failed:
                _STARTING_IN_MAIN = False
                if _DEFERRED:  # the signal that came meanwhile is what the user asked for
                    raise _DEFERRED.pop() from failed
                raise
            _STARTING_IN_MAIN = False
    if proc is None:
        _raise_deferred()
        yield None
        return
    with proc:
        try:
            _raise_deferred()
            yield proc
        except BaseException:  # interrupted here (the main thread): no orphan left running
            _kill_group(proc)
            raise
        finally:
            # Before the leader is reaped its pid (the group's id) cannot be reused, so this
            # reaches only what the command started.
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)


def run_logged(cmd: Command, log: Path, *, env: Env | None = None, cwd: Path | None = None) -> int:
    """Run ``cmd`` with its output appended to ``log`` (after a ``$ cmd`` line); the exit code."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        fh.write(redact(f"$ {' '.join(str(c) for c in cmd)}\n"))  # pip's --index-url password
        fh.flush()
        return _run_to(cmd, env, cwd, fh)


def run_attached(cmd: Command, *, env: Env | None = None, cwd: Path | None = None) -> int:
    """Run ``cmd`` on this process's own stdout and stderr (what the user runs through
    kernelwheel, e.g. the project's tests); the exit code."""
    return _run_to(cmd, env, cwd, None)


def _run_to(cmd: Command, env: Env | None, cwd: Path | None, out: IO[str] | None) -> int:
    """``cmd`` run to its end, its output (stderr too) into ``out``, or this process's."""

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(c) for c in cmd],
            stdout=out,
            stderr=None if out is None else subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_with_run_id(env),
            cwd=cwd,
            start_new_session=True,  # a group of its own: _kill_group reaches its children
        )

    with _tracked(start) as proc:
        if proc is None:
            return _KILLED
        try:
            return proc.wait()
        except KeyboardInterrupt as exc:
            if out is None and type(exc) is KeyboardInterrupt:  # Ctrl-C, not SIGTERM
                _pass_interrupt(proc)
            raise


def _pass_interrupt(proc: subprocess.Popen[bytes]) -> None:
    """The user's Ctrl-C passed to the command they watch (in a group of its own, it never got
    the terminal's), awaited a while: pytest then shows where it stopped and its summary."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGINT)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2 * _GRACE_SECONDS)


# What run_captured raises past its timeout (callers need not import subprocess for it).
CommandTimeout = subprocess.TimeoutExpired


def run_captured(
    cmd: Command,
    *,
    timeout: float | None = None,
    env: Env | None = None,
    cwd: Path | None = None,
    input: str | bytes | None = None,
    text: bool = True,
    merge_stderr: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(cmd, capture_output=True, text=text)`` that :func:`stop_running` kills;
    :data:`CommandTimeout` after ``timeout`` seconds, the command killed. ``merge_stderr`` puts
    stderr into stdout, in order."""
    args = [str(c) for c in cmd]

    def start() -> subprocess.Popen[Any]:
        return subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            text=text,
            env=_with_run_id(env),
            cwd=cwd,
            start_new_session=True,
        )

    with _tracked(start) as proc:
        if proc is None:
            empty = "" if text else b""
            return subprocess.CompletedProcess(args, _KILLED, empty, "stopped" if text else b"")
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(args, proc.returncode, out, err)


def spawn_piped(cmd: Command) -> subprocess.Popen[bytes]:
    """A long-lived command behind pipes (``git cat-file --batch``), stderr discarded, that
    :func:`stop_running` kills too; :func:`release` it. Once stopped: a ToolchainError."""
    with _RUNNING_LOCK:
        if _STOPPED.is_set():
            raise ToolchainError(f"not started, the run is stopping: {cmd[0]}")
        proc = subprocess.Popen(
            [str(c) for c in cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_with_run_id(None),
            start_new_session=True,
        )
        _RUNNING.add(proc)
    return proc


def release(proc: subprocess.Popen[bytes], *, timeout: float = 10) -> None:
    """Close a :func:`spawn_piped` command's stdin, wait for it (killed after ``timeout``)."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    finally:
        # The leader is reaped (or was killed); what it left in its group goes too.
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


def stop_running() -> None:
    """Kill every command running (in any thread); none starts until :func:`resume_running`."""
    with _RUNNING_LOCK:
        _STOPPED.set()
        running = list(_RUNNING)
    for proc in running:
        _kill_group(proc)


def resume_running() -> None:
    """Let commands start again after :func:`stop_running` (the next build in this process)."""
    _STOPPED.clear()


class Runner:
    """The process runner code is given (:data:`RUNNER` at the entry points), so a test passes
    a subclass that records or fakes commands; :meth:`checked` and :meth:`output` are built on
    :meth:`logged` and :meth:`captured`, so overriding those two sees them."""

    def logged(
        self, cmd: Command, log: Path, *, env: Env | None = None, cwd: Path | None = None
    ) -> int:
        return run_logged(cmd, log, env=env, cwd=cwd)

    def captured(
        self,
        cmd: Command,
        *,
        timeout: float | None = None,
        env: Env | None = None,
        cwd: Path | None = None,
        input: str | None = None,
        merge_stderr: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        return run_captured(
            cmd, timeout=timeout, env=env, cwd=cwd, input=input, merge_stderr=merge_stderr
        )

    def attached(self, cmd: Command, *, env: Env | None = None, cwd: Path | None = None) -> int:
        return run_attached(cmd, env=env, cwd=cwd)

    def captured_bytes(
        self, cmd: Command, *, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        return run_captured(cmd, input=input, text=False)

    def spawn(self, cmd: Command) -> subprocess.Popen[bytes]:
        return spawn_piped(cmd)

    def checked(self, cmd: Command, log: Path | None, what: str, hint: str | None = None) -> None:
        """A toolchain command (pip, venv); failed, a ToolchainError naming the log, or quoting
        the output's last lines without one."""
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
        tail = ""
        if log is not None:
            code = self.logged(cmd, log, env=env)
        else:
            proc = self.captured(cmd, env=env)
            code = proc.returncode
            tail = "\n" + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        if code != 0:
            where = f" (log: {log})" if log else ""
            raise ToolchainError(f"failed to {what}: exit {code}{where}{tail}", hint=hint)

    def output(self, cmd: Command, *, cwd: Path | None = None, timeout: float = 60) -> str | None:
        """The stripped stdout of a command that reports (``git rev-parse``); None when it
        cannot start, fails or times out: the fact is unknown."""
        try:
            proc = self.captured(cmd, cwd=cwd, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired, UnicodeDecodeError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None


# The runner of the entry points (the CLI, the library's public functions): real processes.
RUNNER = Runner()


# Locks with an owner file: flock is released when its holder dies, but what it started is not
# (an orphaned pip may go on writing into the environment the next run recreates). So each lock
# has an owner file (``<lock>.owner``: pid and start time) while held, and every command carries
# the run's identity in its environment (RUN_ID_VARIABLE), which its children inherit whatever
# group they join. A run that finds an owner file kills the dead run's processes, waits for them
# and says so (DeadOwner) before it touches the locked work.

RUN_ID_VARIABLE = "KERNELWHEEL_RUN_ID"
_WAIT_FOR_ORPHANS = 30.0  # seconds a killed process may take to go


@dataclass(frozen=True)
class DeadOwner:
    """The run that held a lock and died: its pid and its processes this run had to stop."""

    pid: int
    stopped: tuple[int, ...]

    def describe(self) -> str:
        pids = ", ".join(map(str, self.stopped))
        left = f"; its commands still running (pids {pids}) were stopped"
        return f"a run that died (pid {self.pid}) held this lock{left if self.stopped else ''}"


def _stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (its state first), or []."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return []


def _start_time(pid: int) -> str | None:
    """The start time of ``pid``: it tells a process from a later one with its pid."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else None  # field 22 of proc(5)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie does not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    stats = (_stat(entry.name) for entry in proc.iterdir() if entry.name.isdigit())
    return any(len(f) > 2 and f[2] == str(pgid) and f[0] != "Z" for f in stats)


def _run_id(pid: int, start: str | None) -> str:
    return f"{pid}:{start}"


@functools.cache
def _this_run(pid: int) -> str:
    return _run_id(pid, _start_time(pid))  # a process's start time never changes


def _with_run_id(env: Env | None) -> dict[str, str]:
    """``env`` (else this process's) marked with this run's identity (by pid: a forked worker
    is a run of its own)."""
    return {**(os.environ if env is None else env), RUN_ID_VARIABLE: _this_run(os.getpid())}


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _carrying(run_id: str) -> list[int]:
    """The live processes started, directly or not, by the run ``run_id`` (Linux /proc)."""
    mark = f"{RUN_ID_VARIABLE}={run_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or another user's
        if mark in environ.split(b"\0") and _running(int(entry.name)):
            found.append(int(entry.name))
    return found


def _write_owner(owner: Path) -> None:
    pid = os.getpid()
    atomic_write(owner, json.dumps({"pid": pid, "start": _start_time(pid)}) + "\n")


def _read_owner(owner: Path) -> tuple[int, str | None] | None:
    data = read_json_object(owner)
    if not isinstance(data.get("pid"), int):
        return None
    start = data.get("start")
    return data["pid"], start if isinstance(start, str) else None


def _clear_dead_owner(owner: Path) -> DeadOwner | None:
    """With the lock held, an owner file is a dead holder's: kill what it started, and wait."""
    data = _read_owner(owner)
    if data is None:
        owner.unlink(missing_ok=True)  # none, or unreadable: nothing to stop
        return None
    pid, start = data
    stopped = _carrying(_run_id(pid, start)) if start is not None else []
    for orphan in stopped:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(orphan, signal.SIGKILL)
    deadline = time.monotonic() + _WAIT_FOR_ORPHANS
    while any(map(_running, stopped)) and time.monotonic() < deadline:
        time.sleep(0.05)
    owner.unlink(missing_ok=True)
    return DeadOwner(pid, tuple(stopped))


@contextmanager
def locked(path: Path, waiting: Callable[[str], None] | None = None) -> Iterator[DeadOwner | None]:
    """Hold an exclusive lock on ``path``; yields the dead holder whose work was cleared, if
    any. ``waiting`` is told who holds it before the wait (a silent wait looks like a hang)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    owner = path.with_name(f"{path.name}.owner")
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                holder = _read_owner(owner)
                waiting(f"pid {holder[0]}" if holder else "a process")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            dead = _clear_dead_owner(owner)
            _write_owner(owner)
            try:
                yield dead
            finally:
                owner.unlink(missing_ok=True)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
