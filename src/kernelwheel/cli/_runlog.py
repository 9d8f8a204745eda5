"""Where the commands without a per-variant build log keep theirs.

``to-wheel`` writes ``<output-dir>/logs/to-wheel-<repo>.log`` beside its wheels; ``lock`` and
``download`` leave the project and the wheelhouse untouched on failure, so theirs (and
``upload``'s) go to ``<cache-dir>/logs/<command>-<folder>-<hash>.log``.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path

from .. import __version__
from ..plan.options import resolve_command_option
from .ui import ConsoleUI


def slug(text: str) -> str:
    """A file-name-safe form of a repo id or folder name (``drbh/img2gray`` -> drbh--img2gray)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.replace("/", "--")).strip("-.") or "run"


def open_cache_log(ui: ConsoleUI, command: str, folder: Path, cache_dir: str | None = None) -> Path:
    """Start ``<cache-dir>/logs/<command>-<folder>-<hash of its absolute path>.log``."""
    folder = folder.resolve()
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    cache: Path = resolve_command_option("cache_dir", cache_dir)
    log = cache / "logs" / f"{command}-{slug(folder.name)}-{digest}.log"
    return ui.log_to(log, header(command))


def header(command: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S %z")
    argv = " ".join(sys.argv[1:]) or command
    return f"kernelwheel {__version__} {command} at {when}\n$ kernelwheel {argv}"
