"""The real CLI in a child process, paused at a point of kernelwheel's code and sent a signal
there: what the signal tests share."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Runs ``kernelwheel`` with ``module.attr`` wrapped: before or after the original runs, it marks
# ``KW_MARK`` and sleeps ``KW_PAUSE`` seconds, which the test's signal interrupts.
DRIVER = r"""
import importlib, os, signal, sys, time
# A terminal's Ctrl-C reaches Python's own handler; a test runner started in the background
# (sh's "cmd &") hands SIGINT down ignored, and Python then leaves it ignored: install Python's
# handler, so the CLI is tested as a user's terminal runs it.
signal.signal(signal.SIGINT, signal.default_int_handler)
module, attr, when = sys.argv[1:4]
mod = importlib.import_module(module)
original = getattr(mod, attr)
def paused(*args, **kwargs):
    result = original(*args, **kwargs) if when == "after" else None
    open(os.environ["KW_MARK"], "a").close()
    time.sleep(float(os.environ["KW_PAUSE"]))
    return original(*args, **kwargs) if when == "before" else result
setattr(mod, attr, paused)
from kernelwheel.cli import main
sys.exit(main(sys.argv[4:]))
"""


def interrupt_at(
    tmp_path: Path,
    point: tuple[str, str, str],
    sig: int,
    args: list[str],
    *,
    pause: float = 30,
    reach_within: float = 60,
) -> tuple[int, str, str]:
    """``kernelwheel ARGS`` sent ``sig`` once it reached ``point`` (module, attribute, "before"
    or "after" the original runs): its exit code, stdout and stderr."""
    mark = tmp_path / "mark"
    mark.unlink(missing_ok=True)
    env = {**os.environ, "KW_MARK": str(mark), "KW_PAUSE": str(pause)}
    env.pop("KERNELWHEEL_TRACEBACK", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *point, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + reach_within
    while not mark.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"never reached {point}: rc={proc.returncode}\n{out}\n{err}")
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err
