"""An interpreter's probe report, kept between runs while nothing it depends on has changed.

Probing imports torch: 1.5-2 CPU-seconds, paid by every build with ``--python`` (a build
environment keeps its report in its ready-marker instead). The record is reused only if the
files the report came from are as they were: the interpreter, every folder on its ``sys.path``
(installing, removing or upgrading a package changes its folder), its ``pyvenv.cfg``, and
torch's own folder, ``version.py`` and ``_C`` extension. "As they were" is the same device,
inode, size, mtime and ctime. The key holds what else shapes the report: the interpreter path
as given, the working folder (``sys.path[0]`` of ``python -c``), the ``PYTHON*`` variables
that move ``sys.path``, and the probe script itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .._util import atomic_write
from . import interpreter

__all__ = ["run_cached"]

# The variables that change what ``python -c`` imports.
_PATH_VARIABLES = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONNOUSERSITE",
    "PYTHONUSERBASE",
    "PYTHONSAFEPATH",
)


def run_cached(python: Path, cache_dir: Path) -> tuple[interpreter.Interpreter, bool]:
    """:func:`interpreter.run`, answered from ``cache_dir`` when the record there still holds
    (True: it was). Only a report with a working torch is kept (a failure is reported fresh
    each time)."""
    record = cache_dir / "interpreters" / f"{_key(python)}.json"
    data = _valid(record, python)
    kept = data is not None
    if data is None:
        data = interpreter.report(python)
        if "torch" in data and "torch_files" in data:
            stamps = {path: _stamp(path) for path in _watched(python, data)}
            text = json.dumps({"report": data, "stamps": stamps}, sort_keys=True)
            atomic_write(record, text + "\n")
    return interpreter.parse(data), kept


def _key(python: Path) -> str:
    shape = {
        "python": str(python.absolute()),
        "cwd": os.getcwd(),
        "env": {name: os.environ.get(name) for name in _PATH_VARIABLES},
        "script": interpreter.script_digest(),
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:20]


def _valid(record: Path, python: Path) -> dict[str, Any] | None:
    try:
        saved = json.loads(record.read_text())
        data: dict[str, Any] = saved["report"]
        stamps: dict[str, Any] = saved["stamps"]
        watched = _watched(python, data)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if set(stamps) != set(watched):
        return None
    if any(_stamp(path) != stamp for path, stamp in stamps.items()):
        return None
    return data


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
