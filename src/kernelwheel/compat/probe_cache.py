"""An interpreter's probe report (1.5-2 CPU-seconds importing torch), kept while the files it came
from keep their device, inode, size, mtime and ctime; keyed by what else shapes it: the path, the
working folder, the ``PYTHON*`` and driver variables and the probe script."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._util import RUNNER, Runner, atomic_write, read_json_object
from . import interpreter
from .rules import DRIVER_VARIABLES

# The variables that change what ``python -c`` imports.
_PATH_VARIABLES = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONNOUSERSITE",
    "PYTHONUSERBASE",
    "PYTHONSAFEPATH",
)


def run_cached(
    python: Path, cache_dir: Path, runner: Runner = RUNNER, *, timeout: float | None = None
) -> tuple[interpreter.Interpreter, bool]:
    """:func:`interpreter.run`, answered from ``cache_dir`` while the record holds (True: it was);
    only a report with a working torch is kept, so a failure is reported fresh each time."""
    interpreter.checked_driver_setting()  # a value that is no version: refused, cached or not
    record = _record(python, cache_dir)
    data = _valid(record, python)
    kept = data is not None
    if data is None:
        if timeout is None:
            data = interpreter.report(python, runner=runner)
        else:
            data = interpreter.report(python, timeout=timeout, runner=runner)
        if "torch" in data and "torch_files" in data:
            _write(record, python, data)
    return interpreter.parse(data), kept


@contextmanager
def kept_across(python: Path, cache_dir: Path) -> Iterator[None]:
    """Around a change kernelwheel makes that leaves the report as it was (a dev build's ``.pth``):
    a record valid before is stamped again after, so the next run does not import torch."""
    record = _record(python, cache_dir)
    data = _valid(record, python)
    yield
    if data is not None:
        _write(record, python, data)


def _record(python: Path, cache_dir: Path) -> Path:
    return cache_dir / "interpreters" / f"{_key(python)}.json"


def _write(record: Path, python: Path, data: dict[str, Any]) -> None:
    stamps = {path: _stamp(path) for path in _watched(python, data)}
    record_data = {"report": data, "stamps": stamps, "digest": _digest(data, stamps)}
    atomic_write(record, json.dumps(record_data, sort_keys=True) + "\n")


def _key(python: Path) -> str:
    shape = {
        "python": str(python.absolute()),
        "cwd": os.getcwd(),
        "env": {name: os.environ.get(name) for name in (*_PATH_VARIABLES, *DRIVER_VARIABLES)},
        "script": interpreter.script_digest(),
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:20]


def _valid(record: Path, python: Path) -> dict[str, Any] | None:
    """The record's report when whole, well-typed, its own (a report edited after it was written is
    a lie) and its files are as they were; else None (the caller probes again)."""
    saved = read_json_object(record)
    data, stamps = saved.get("report"), saved.get("stamps")
    if not isinstance(data, dict) or not isinstance(stamps, dict) or not _well_typed(data):
        return None
    if saved.get("digest") != _digest(data, stamps) or set(stamps) != set(_watched(python, data)):
        return None
    if any(_stamp(path) != stamp for path, stamp in stamps.items()):
        return None
    return data if _torch_version_holds(data) else None


def _digest(data: dict[str, Any], stamps: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([data, stamps], sort_keys=True).encode()).hexdigest()


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


def _optional_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _well_typed(data: dict[str, Any]) -> bool:
    """Whether the report has every field :func:`interpreter.parse` and the cache read, each of
    its type (a record hand-edited, or written by a broken run, is probed again)."""
    python = data.get("python")
    torch = data.get("torch")
    return (
        _strings([data.get(k) for k in ("executable", "implementation", "machine", "purelib")])
        and isinstance(data.get("prefix"), str)
        and all(_strings(data.get(k)) for k in ("sys_path", "torch_files", "tags"))
        and isinstance(python, list)
        and len(python) >= 2
        and _ints(python[:2])
        and isinstance(data.get("pip"), bool)
        and isinstance(torch, list)
        and len(torch) == 5
        and _strings(torch[:2])
        and (torch[2] is None or _ints(torch[2]))
        and isinstance(torch[3], bool)
        and (torch[4] is None or _ints(torch[4]))  # the driver's CUDA (compat.rules)
        and all(_optional_str(data.get(k)) for k in ("torch_cuda", "torch_hip", "torch_dist"))
        and _optional_str(data.get("torch_error"))
    )


def _torch_version_holds(data: dict[str, Any]) -> bool:
    """The report's torch version against torch's ``version.py``: an independent read, so a record
    naming another torch is not believed even when its stamps still match."""
    for path in data["torch_files"]:
        if os.path.basename(path) != "version.py":
            continue
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        found = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.MULTILINE)
        return found is not None and found.group(1) == data["torch"][0]
    return True


def _watched(python: Path, data: dict[str, Any]) -> list[str]:
    paths = [str(python.absolute()), data["executable"], *data["sys_path"], *data["torch_files"]]
    paths.append(os.path.join(data["prefix"], "pyvenv.cfg"))
    return sorted(set(paths))


def _stamp(path: str) -> list[int] | None:
    """What changes when the file or folder is replaced or written; None: it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
