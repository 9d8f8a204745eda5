"""Console output for the CLI (docs/building.md): the Reporter that shows each step as it starts
and ends and what a long one is doing; every line, shown or not, also goes to the command's log
file, made only once work starts; on GitHub Actions each variant is a group."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .. import __version__
from .._util import redact
from ..log import UNITS_LINE, StepResult
from ..plan.options import resolve_command_option

QUIET, NORMAL, VERBOSE = -1, 0, 1
_TICK = 0.2  # seconds between looks at the running steps' logs
# Log lines that say what a step is doing (pip's, ninja's, a command kernelwheel runs); other
# lines (compiler warnings, notes) only count while none of these has been seen.
_PROGRESS = re.compile(
    r"^(\[\d+/\d+\]|\$ |Collecting |Downloading |Using cached |Installing |Building |"
    r"Successfully |Processing |Preparing |Looking in )"
)
_SOURCE = re.compile(r"(?:^|\s)(\S*?([\w.+-]+\.(?:cu|cpp|cc|cxx|c)))(?=\s|$)")


def activity_of(line: str, units: list[str] | None = None) -> str | None:
    """A progress line shortened, else None. ninja writing to a file prints ``[k/N] command``
    as a unit ends: ``[2/5] c++ ... /abs/x.cpp ...`` -> ``2/5 done: x.cpp``; with ``units``,
    those still compiling (in the author's paths: the finished one, as named there, leaves
    them), and no other line replaces that."""
    line = line.strip()
    if units is not None:
        return _unit_done(line, units)
    return (_unit_done(line, None) or line[:160]) if _PROGRESS.match(line) else None


def _unit_done(line: str, units: list[str] | None) -> str | None:
    count = re.match(r"\[(\d+/\d+)\] ", line)
    sources = _SOURCE.findall(line) if count else []
    if not (count and sources):
        return None
    path, name = sources[-1]
    if units is None:
        return f"{count[1]} done: {name}"
    name = next((u for u in units if path == u or path.endswith("/" + u)), name)
    if name in units:
        units.remove(name)
    return f"{count[1]} done: {name}" + (f"; {compiling(units)}" if units else "")


def compiling(units: Sequence[str], shown: int = 3) -> str:
    """``compiling a.cpp, b.cpp and 2 more``."""
    more = f" and {len(units) - shown} more" if len(units) > shown else ""
    return "compiling " + ", ".join(units[:shown]) + more


@dataclass
class _Running:
    scope: str
    name: str
    started: float
    log: Path | None
    offset: int = 0
    activity: str = ""
    beat: float = 0.0  # when the last heartbeat line was printed
    partial: bytes = b""
    progressed: bool = False  # a progress line was seen: plain lines no longer replace it
    units: list[str] | None = None  # the units still compiling, once the log named them


def with_log(message: str, log: Path | None) -> str:
    """An error's message, naming the log to read unless it already does."""
    return message + (f"\n  log: {log}" if log is not None and str(log) not in message else "")


def table(
    header: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    *,
    right: Container[int] = (),
    rule: bool = False,
) -> list[str]:
    """Columns two spaces apart, those in ``right`` aligned right; ``rule``: dashes under header."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    dashes = [line(tuple("-" * w for w in widths))] if rule else []
    return [line(header), *dashes, *(line(row) for row in rows)]


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


class ConsoleUI:
    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        verbosity: int = NORMAL,
        progress_to_stderr: bool = False,
        tty: bool | None = None,
        heartbeat: float = 30.0,
    ) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.progress = self.err if progress_to_stderr else self.out
        self.verbosity = verbosity
        self.tty = _isatty(self.progress) if tty is None else tty
        self.heartbeat = heartbeat
        self.github = os.environ.get("GITHUB_ACTIONS") == "true"
        utf = "utf" in (getattr(self.progress, "encoding", None) or "").lower()
        marks = ("✓", "✕", "▸") if utf else ("ok", "FAIL", ">")
        self.ok_mark, self.fail_mark, self.start_mark = marks
        self._running: dict[tuple[str, str], _Running] = {}
        self._lock = threading.RLock()
        self._ticker: threading.Thread | None = None
        self._status = False  # a status line is on the terminal
        self._log: TextIO | None = None
        self.log_path: Path | None = None  # the file log_to copies to
        self._pending: list[str] | None = None  # the log's lines while its file is not made
        self._made: list[Path] = []  # the folders made for the log (discard_log removes them)
        # scope -> its lines not shown yet (hold/release), with their streams
        self._held: dict[str, list[tuple[str, TextIO]]] = {}

    def _clear_status(self) -> None:
        if self._status:
            self.progress.write("\r\x1b[K")
            self._status = False

    def _emit(
        self, text: str, stream: TextIO, *, show: bool = True, scope: str | None = None
    ) -> None:
        text = redact(text)  # a token quoted in an error reaches neither terminal nor log
        with self._lock:
            if self._log is not None:
                self._log.write(text + "\n")
                self._log.flush()
            elif self._pending is not None:
                self._pending.append(text)
            if not show:
                return
            if scope is not None and scope in self._held:
                self._held[scope].append((text, stream))
                return
            self._clear_status()
            print(text, file=stream, flush=True)

    def log_to(self, path: Path, header: str = "") -> Path:
        """Copy every line, shown or not, to ``path`` until :meth:`close`; the file is made when
        the first step starts (or at :meth:`close`), the lines held until then."""
        with self._lock:
            self.close()
            self.log_path, self._pending = path, [header] if header else []
        return path

    def _open_log(self) -> None:
        with self._lock:
            if self._pending is None or self.log_path is None:
                return
            made = [p for p in self.log_path.parents if not p.exists()]
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._made = made  # the folders made for the log, deepest first
            fh = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
            fh.writelines(line + "\n" for line in self._pending)
            fh.flush()
            self._log, self._pending = fh, None

    def keep_log(self) -> None:
        """Make the log's file now (the error names it), else drop it: no message names a file
        that is not there."""
        with self._lock:
            try:
                self._open_log()
            except OSError:
                self._pending, self.log_path = None, None

    def discard_log(self) -> None:
        """Forget the log, its file and the folders made for it included (a run refused for its
        arguments leaves no folder behind)."""
        with self._lock:
            path, self._pending, self.log_path = self.log_path, None, None
            if self._log is None or path is None:
                return
            self._log.close()
            self._log = None
            path.unlink(missing_ok=True)
            for folder in self._made:
                with contextlib.suppress(OSError):  # not empty: something else is there now
                    folder.rmdir()
            self._made = []

    def close(self) -> None:
        with self._lock:
            self.keep_log()  # an unwritable log folder: the error shown is all there is
            if self._log is not None:
                self._log.close()
                self._log = None

    def log_only(self, text: str) -> None:
        self._emit(text, self.err, show=False)

    def step_started(self, scope: str, name: str, log: Path | None = None) -> None:
        self._open_log()  # work begins: the log is made, to be followed while it runs
        now = time.monotonic()
        running = _Running(scope, name, now, log, beat=now)
        if log is not None:
            with contextlib.suppress(OSError):
                running.offset = log.stat().st_size
        with self._lock:
            self._running[(scope, name)] = running
            self._step_line(f"  {self.start_mark} {scope}: {name} …", scope)
            if self._ticker is None or not self._ticker.is_alive():
                self._ticker = threading.Thread(
                    target=self._tick, name="kernelwheel-progress", daemon=True
                )
                self._ticker.start()

    def step_finished(self, result: StepResult) -> None:
        with self._lock:
            running = self._running.pop((result.scope, result.name), None)
            if running is not None:
                self._follow(running)  # the last lines of its log, for --verbose
            mark = self.ok_mark if result.ok else self.fail_mark
            detail = f"  {result.detail}" if result.detail else ""
            line = f"  {mark} {result.scope}: {result.name} ({result.seconds:.1f}s){detail}"
            self._step_line(line, result.scope)

    def info(self, scope: str, message: str) -> None:
        self._step_line(f"{scope}: {message}" if scope else message, scope)

    def _step_line(self, text: str, scope: str) -> None:
        """A progress line of ``scope``: hidden by --quiet, held with the scope's lines."""
        self._emit(text, self.progress, show=self.verbosity > QUIET, scope=scope)

    def _tick(self) -> None:
        while True:
            time.sleep(_TICK)
            with self._lock:
                if not self._running:
                    self._clear_status()
                    self._ticker = None
                    return
                now = time.monotonic()
                for running in list(self._running.values()):
                    self._follow(running)
                if self.verbosity <= QUIET:
                    continue
                if self.tty:
                    self._draw_status(now)
                else:
                    for running in self._running.values():
                        if now - running.beat >= self.heartbeat:
                            running.beat = now
                            self._emit(self._describe(running, now), self.progress)

    def _describe(self, running: _Running, now: float) -> str:
        text = f"  … {running.scope}: {running.name}: {_elapsed(now - running.started)}"
        return text + (f"  {running.activity}" if running.activity else "")

    def _draw_status(self, now: float) -> None:
        text = self._describe(min(self._running.values(), key=lambda r: r.started), now)
        if len(self._running) > 1:
            text += f"  (+{len(self._running) - 1} more running)"
        width = shutil.get_terminal_size((100, 24)).columns - 1
        self._clear_status()
        self.progress.write(redact(text)[:width])
        self.progress.flush()
        self._status = True

    def _follow(self, running: _Running) -> None:
        """The step's log's new lines: the last becomes its activity; --verbose shows them all."""
        if running.log is None:
            return
        try:
            with open(running.log, "rb") as fh:
                fh.seek(running.offset)
                data = fh.read()
        except OSError:
            return
        running.offset += len(data)
        data = running.partial + data
        *lines, running.partial = data.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip().rsplit("\r", 1)[-1]  # a bar's last state
            if not line.strip():
                continue
            if line.startswith(UNITS_LINE):
                running.units = [u for u in line[len(UNITS_LINE) :].split(", ") if u]
                found: str | None = compiling(running.units)
            else:
                found = activity_of(line, running.units)
            if found is not None:
                running.activity, running.progressed = found, True
            elif not running.progressed:
                running.activity = line.strip()[:160]
            if self.verbosity >= VERBOSE:
                self._emit(f"    | {line}", self.progress, scope=running.scope)

    def print(self, text: str = "") -> None:
        """A result line (stdout; shown even with --quiet)."""
        self._emit(text, self.out)

    def print_json(self, document: object) -> None:
        self.print(json.dumps(document, indent=2))

    def group(self, title: str) -> None:
        if self.github:
            self._emit(f"::group::{title}", self.progress)
        else:
            self._emit(title, self.progress, show=self.verbosity > QUIET)

    def endgroup(self) -> None:
        if self.github:
            self._emit("::endgroup::", self.progress)

    def hold(self, scope: str) -> None:
        """Keep ``scope``'s lines off the terminal until :meth:`release` (the log gets them)."""
        with self._lock:
            self._held.setdefault(scope, [])

    def release(self, scope: str) -> None:
        """Show the held lines of ``scope``, if any, as one group titled ``scope``."""
        with self._lock:
            if scope not in self._held:
                return
            lines = self._held.pop(scope)
            self.group(scope)
            for text, stream in lines:
                self._clear_status()
                print(text, file=stream, flush=True)
            self.endgroup()

    def done(self, scope: str, ok: bool, seconds: float, detail: str = "") -> None:
        """A unit of work (a variant) finished: its total time."""
        mark = self.ok_mark if ok else self.fail_mark
        what = "done" if ok else "failed"
        extra = f": {detail}" if detail else ""
        self._step_line(f"{mark} {scope}: {what} in {seconds:.1f}s{extra}", scope)

    def error(self, message: str) -> None:
        if self.github:
            first = message.splitlines()[0] if message else ""
            self._emit(f"::error::{first}", self.progress)
        self._emit(f"error: {message}", self.err)

    def warn(self, message: str) -> None:
        self._emit(f"warning: {message}", self.err)


def slug(text: str) -> str:
    """A file-name-safe form of a repo id or folder name (``drbh/img2gray`` -> drbh--img2gray)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.replace("/", "--")).strip("-.") or "run"


def open_cache_log(ui: ConsoleUI, command: str, folder: Path, cache_dir: str | None = None) -> Path:
    """Start ``<cache-dir>/logs/<command>-<folder>-<hash of its absolute path>.log``, the log of
    a command without a per-variant one: lock and download leave the project and the wheelhouse
    untouched on failure, so theirs is not there."""
    folder = folder.resolve()
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    cache: Path = resolve_command_option("cache_dir", cache_dir)
    log = cache / "logs" / f"{command}-{slug(folder.name)}-{digest}.log"
    return ui.log_to(log, header(command))


def header(command: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S %z")
    argv = " ".join(sys.argv[1:]) or command
    return f"kernelwheel {__version__} {command} at {when}\n$ kernelwheel {argv}"
