"""What a compile said, for the author: the units that failed and the compiler's first error with
its context and notes, or each unit's warnings; every path into the project shown relative to it.
Pure: it reads the worker's output, in ninja's form, of gcc, clang or nvcc and returns lines."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

MAX_LINES = 25  # a screenful: the rest is in the log
_MAX_WIDTH = 300  # a template's type can fill a line with thousands of characters

# A diagnostic's location: gcc/clang ``path:line[:col]:``, nvcc's front end ``path(line):``,
# or a tool's name (``c++:``, ``<command-line>:``, ``nvcc fatal   :``); a path may hold
# parentheses other than nvcc's ``(line)`` (``/home/me/kernels (copy)/k.cu(12): error: …``) and
# single blanks, never a run of them: a line of thousands of blanks took minutes to read.
_WHERE = r"(?P<where>\S(?:[^:(\s]|\s(?=\S)|\((?!\d+\)))*?)(?::\d+(?::\d+)?|\(\d+\))?"
_SEVERITY = re.compile(
    _WHERE + r"\s*(?::\s*)?(?P<severity>fatal error|catastrophic error|internal compiler error|"
    r"error|fatal|warning|note|remark)(?: #(?P<code>[\w-]+))?\s*: (?P<text>.*)$"
)
# ld's unresolved symbols (the link of a torch build is setuptools', outside ninja).
_LINKER = re.compile(
    r"^\S+: (?:undefined reference to|multiple definition of) |(?:^|/)ld(?:\.\w+)?: cannot find "
)
# Lines that say where the next diagnostic happens: the include chain, the function, gcc's
# template instantiation trace, ld's ``in function``.
_CONTEXT = re.compile(
    r"^(?:In file included from |\s+from \S.*[:,]$|"
    r"\S.*?: (?:In|in) [\w ]*?(?:function|instantiation|constructor|destructor|substitution)\b|"
    r"\S.*?: At global scope:|"
    r"\S[^:]*:\d+(?::\d+)?:\s{2,}(?:required|in|recursively)\b)"
)
_UNIT = re.compile(r"^(?:\[\d+/\d+\]|\$) (?P<command>.+)$")  # a unit's, or the link's
_FAILED = re.compile(r"^FAILED: (?:\[code=\d+\] )?(?P<outputs>.+)$")
# Where a unit's output ends: ninja giving up, the Python traceback of torch's runner.
_END = re.compile(r"^(?:ninja: |Traceback \(most recent call last\):|running |error: command )")
# A path: at least one slash, not inside a word.
_PATH = re.compile(r"(?<![\w/.+-])((?:\.{1,2}/|/)?[\w.+-]+(?:/[\w.+-]+)+)")


# What is not the author's fault: a full disk (the OS's words, Python's errno, the constant) and
# ccache's own errors (not a compiler's). A source line the compiler quotes (``  12 | ...``) is
# the author's code and is never read as one.
_NO_SPACE = re.compile(r"No space left on device|\[Errno 28\]|\bENOSPC\b|Disk quota exceeded")
_CCACHE = re.compile(r"^ccache: (?:error|FATAL)\b", re.IGNORECASE)
_QUOTED_SOURCE = re.compile(r"^\s*\d*\s*\|")
# The terminal's colour and erase codes a compiler told -fdiagnostics-color=always (or clang's
# -fcolor-diagnostics) puts around its locations and severities: read as they would print.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_MINOR = (None, "warning", "note", "remark")
# Where a trace names a line: gcc's ``path:line:col:`` (``required from here``), nvcc's ``at line
# N of path`` (``detected during instantiation``).
_TRACED = re.compile(
    r"^(?P<path>[^\s:(]+):(?P<line>\d+)(?::\d+)?:|\bat line (?P<at>\d+) of (?P<of>\S+)"
)


@dataclass(frozen=True)
class PathMap:
    """Shows the project's files relative to it: ``folders`` are the project as the compilers
    may name it (the work folder's link to it, its absolute and its resolved path); a relative
    path is read against ``cwd``, the folder the compilers ran in (ccache hands them paths
    relative to it)."""

    folders: tuple[str, ...]
    cwd: str
    # kernelwheel's own files' folders (its compat source, the headers it writes): in a line,
    # a file of them is named, never by its path in the cache
    own: tuple[str, ...] = ()

    def _full(self, path: str) -> str:
        return os.path.normpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))

    def ours(self, path: str) -> str | None:
        """The name of kernelwheel's own file at ``path``; None for any other."""
        full = self._full(path)
        return next((full[len(f) + 1 :] for f in self.own if full.startswith(f + "/")), None)

    def path(self, path: str) -> str:
        """``path`` relative to the project when it is in it, else as given."""
        full = self._full(path)
        for folder in self.folders:
            if full.startswith(folder.rstrip("/") + "/"):
                return full[len(folder.rstrip("/")) + 1 :]
        # a path relative to the build folder means nothing to the author: shown whole
        return full if path.startswith("../") else path

    def line(self, text: str) -> str:
        """``text`` with every path into the project shown relative to it."""
        return _PATH.sub(lambda m: self.ours(m.group(1)) or self.path(m.group(1)), text)


@dataclass(frozen=True)
class Diagnostics:
    """A failed compile's failing units and its first error with context and notes (at most
    :data:`MAX_LINES`); without a compiler's error (``compiler_error`` false), the last lines."""

    units: tuple[str, ...]
    lines: tuple[str, ...]
    compiler_error: bool = True
    linker: bool = False  # the first error is the linker's (the shared object's link failed)


@dataclass
class _Segment:
    unit: str | None  # None: output of no unit (setuptools' link, a traceback)
    failed: bool
    lines: list[str]


def _source_of(command: str) -> str | None:
    """The source a compile command compiles (the word after the last ``-c``: torch's flags
    hold one of their own); None for a link."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i in range(len(words) - 2, -1, -1):
        if words[i] == "-c" and not words[i + 1].startswith("-"):
            return words[i + 1]
    return None


def _segments(output: str) -> list[_Segment]:
    """The output cut at each unit's ``[i/n]`` or ``FAILED:`` line, each piece with its unit."""
    segments = [_Segment(None, False, [])]
    lines = iter(_ANSI.sub("", output).splitlines())
    for raw in lines:
        line = raw.rstrip()
        unit, failed = _UNIT.match(line), _FAILED.match(line)
        if unit:
            segments.append(_Segment(_source_of(unit["command"]), False, []))
        elif failed:
            source = _source_of(next(lines, ""))  # the command, on the next line
            segments.append(_Segment(source or failed["outputs"].split()[0], True, []))
        elif _END.match(line):
            segments.append(_Segment(None, False, []))
        else:
            segments[-1].lines.append(line)
    return segments


def _severity(line: str) -> str | None:
    found = _SEVERITY.match(line)
    if found is not None:
        return found["severity"]
    return "error" if _LINKER.search(line) else None


def _first_error(lines: Sequence[str]) -> list[str]:
    """The first error in ``lines``: the context lines before it, then its source and caret
    lines and its notes (with their own context); empty without one."""
    at = next((i for i, line in enumerate(lines) if _severity(line) not in _MINOR), None)
    if at is None:
        return []
    start = at
    while start > 0 and _CONTEXT.match(lines[start - 1]):
        start -= 1
    end = at + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and (line[0].isspace() or _severity(line) == "note"):
            end += 1
            continue
        # a context group belongs to this error only when a note follows it
        after = end
        while after < len(lines) and _CONTEXT.match(lines[after]):
            after += 1
        if after > end and after < len(lines) and _severity(lines[after]) == "note":
            end = after + 1
            continue
        break
    return list(lines[start:end])


def _screenful(lines: Sequence[str], paths: PathMap) -> tuple[str, ...]:
    shown = [_clip(paths.line(line)) for line in lines]
    if len(shown) > MAX_LINES:
        more = len(shown) - (MAX_LINES - 1)
        shown = [*shown[: MAX_LINES - 1], f"… ({more} more lines of this error in the log)"]
    return tuple(shown)


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_WIDTH else line[: _MAX_WIDTH - 1] + "…"


def failure(output: str, paths: PathMap) -> Diagnostics:
    """A failed compile's :class:`Diagnostics`; the last lines where the worker itself failed."""
    segments = _segments(output)
    failed = [s for s in segments if s.failed]
    units = tuple(dict.fromkeys(paths.path(s.unit) for s in failed if s.unit is not None))
    # the first error of a failed unit, else of any output
    first = next((f for s in [*failed, *segments] if (f := _first_error(s.lines))), [])
    if first:
        error = next(line for line in first if _severity(line) not in _MINOR)
        lines = _excerpt(first, error, paths) + _others(failed, first, paths)
        linker = _SEVERITY.match(error) is None and _LINKER.search(error) is not None
        return Diagnostics(units, lines, linker=linker)
    tail = [line for line in _ANSI.sub("", output).splitlines() if line.strip()]
    return Diagnostics(units, _screenful(tail[-5:], paths), compiler_error=False)


def _excerpt(first: Sequence[str], error: str, paths: PathMap) -> tuple[str, ...]:
    """The lines shown of the ``first`` error: all (a screenful), then the project's line that
    led into a header outside it; of a static assertion in such a header (torch refusing a
    kernel's C++ signature) only its own line and the project's: the templates' trace
    around it is the log's."""
    own = _own_line(first, paths)
    found = _SEVERITY.match(error)
    if own and found is not None and found["text"].startswith("static assertion failed"):
        more = f"… ({len(first) - 1} more lines of this error in the log: the templates' trace)"
        return (_clip(paths.line(error)), more, *own)
    return _screenful(first, paths) + own


def _own_line(first: Sequence[str], paths: PathMap) -> tuple[str, ...]:
    """For an error in a header outside the project (torch's, a template's), the project's line
    that led there, the last its trace names: ``from the project: csrc/k.cpp:16``."""
    error = next((_SEVERITY.match(line) for line in first if _severity(line) not in _MINOR), None)
    if error is None or not os.path.isabs(paths.path(error["where"])):
        return ()
    own = None
    for line in first:
        found = _TRACED.search(line.strip())
        if found is not None:
            path, number = found["path"] or found["of"], found["line"] or found["at"]
            if not os.path.isabs(shown := paths.path(path.strip('"'))):
                own = f"{shown}:{number}"
    return (f"from the project: {own} (the error is in a header outside it)",) if own else ()


def _others(failed: Sequence[_Segment], first: Sequence[str], paths: PathMap) -> tuple[str, ...]:
    """One line per other failed unit, its own first error (``also csrc/b.cu: csrc/b.cu(3):
    error: ...``), where it is not the one shown (a header both include)."""
    seen = {paths.line(line) for line in first if _severity(line) not in _MINOR}
    lines = []
    for segment in failed:
        error = next((line for line in segment.lines if _severity(line) not in _MINOR), None)
        if segment.unit is None or error is None or (said := paths.line(error)) in seen:
            continue
        seen.add(said)
        lines.append(_clip(f"also {paths.path(segment.unit)}: {said}"))
    return tuple(lines)


@dataclass(frozen=True)
class Fault:
    """A failed compile's cause that is this machine's, not the author's code: ``kind`` is
    ``"disk-full"`` or ``"ccache"``; ``line`` the output's first line that says so, clipped
    (``said``), or what else showed it (the free space left, where the output was cut short)."""

    kind: str
    line: str
    said: bool = True


def fault(output: str) -> Fault | None:
    """The machine's fault in a failed compile's ``output`` (a full disk, ccache's own error),
    or None when nothing but the compile itself is to blame. A full disk wins: ccache reports
    one as its own error too."""
    disk = ccache = None
    for line in output.splitlines():
        if _QUOTED_SOURCE.match(line):
            continue
        if disk is None and _NO_SPACE.search(line):
            disk = Fault("disk-full", _clip(line.strip()))
        if ccache is None and _CCACHE.match(line.strip()):
            ccache = Fault("ccache", _clip(line.strip()))
    return disk or ccache


def warning_summary(output: str, paths: PathMap) -> tuple[str, ...]:
    """One line per unit of a successful compile's ``output`` that warned:
    ``csrc/k.cu: 3 warnings (first: csrc/k.cu:12:5: unused variable 'y')``."""
    return tuple(line for line in unit_warnings(output, paths).values() if line)


def unit_warnings(output: str, paths: PathMap) -> dict[str, str]:
    """Each unit ``output`` compiled, by its path as shown, with its :func:`warning_summary`
    line ("" where it did not warn): what an incremental compile replaces of the last one's."""
    found: dict[str, list[str]] = {}
    for segment in _segments(output):
        if segment.unit is not None:
            found.setdefault(paths.path(segment.unit), [])
        for line in segment.lines:
            match = _SEVERITY.match(line)
            if match is None or match["severity"] != "warning":
                continue
            unit = paths.path(segment.unit) if segment.unit else "the build"
            where = paths.line(line[: match.start("severity")].rstrip(" :"))
            # nvcc's number, which -diag-suppress takes, as gcc's [-Wflag]
            code = f" [#{match['code']}]" if match["code"] else ""
            warning = f"{where}: {match['text']}{code}"
            # nvcc's front end says a warning once for the host, once for the device
            if warning not in found.setdefault(unit, []):
                found[unit].append(warning)
    return {unit: _unit_line(_own_unit(unit, paths), said) for unit, said in found.items()}


def _own_unit(unit: str, paths: PathMap) -> str:
    name = paths.ours(unit)
    return unit if name is None else f"{name} (kernelwheel's own source)"


def _unit_line(unit: str, said: Sequence[str]) -> str:
    """``unit``'s warnings in one line, the first of the project's own shown (one in torch's or
    the compiler's header, absolute, is not the author's to fix): ``all outside the project``
    where none is its own."""
    if not said:
        return ""
    own = [warning for warning in said if not os.path.isabs(warning)]
    where = "" if own else ", all in headers outside the project"
    plural = "s" if len(said) > 1 else ""
    return _clip(f"{unit}: {len(said)} warning{plural}{where} (first: {(own or said)[0]})")
