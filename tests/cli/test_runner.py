"""_util's process runner, the one way kernelwheel starts a command: captured output (text or
bytes, stdin fed, stderr merged), timeouts, and long-lived piped commands that an interrupt
(stop_running) kills like the rest."""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

from kernelwheel._util import (
    CommandTimeout,
    release,
    resume_running,
    run_captured,
    spawn_piped,
    stop_running,
)
from kernelwheel.errors import ToolchainError

PY = sys.executable


def test_captured_text_and_bytes_with_input() -> None:
    echo = "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d[::-1])"
    proc = run_captured([PY, "-c", echo], input=b"\x00abc", text=False)
    assert proc.returncode == 0 and proc.stdout == b"cba\x00"
    proc = run_captured([PY, "-c", "import sys; print(sys.stdin.read().upper())"], input="hi")
    assert proc.stdout == "HI\n"


def test_merged_stderr_keeps_the_order() -> None:
    code = "import sys; print('a', flush=True); print('b', file=sys.stderr, flush=True); print('c')"
    proc = run_captured([PY, "-c", code], merge_stderr=True)
    assert proc.stdout.split() == ["a", "b", "c"] and not proc.stderr


def test_timeout_kills_the_command() -> None:
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        run_captured([PY, "-c", "import time; time.sleep(60)"], timeout=0.5)
    assert time.monotonic() - started < 20


def test_a_piped_command_answers_and_an_interrupt_kills_it() -> None:
    cat = spawn_piped([PY, "-u", "-c", "import sys\nfor l in sys.stdin: print(l.strip()[::-1])"])
    assert cat.stdin is not None and cat.stdout is not None
    cat.stdin.write(b"abc\n")
    cat.stdin.flush()
    assert cat.stdout.readline() == b"cba\n"
    waiter = threading.Thread(target=cat.wait)
    waiter.start()
    try:
        stop_running()
        waiter.join(20)
        # stopped by the interrupt (SIGTERM, SIGKILL after the grace period), not closed
        assert cat.returncode in (-signal.SIGTERM, -signal.SIGKILL)
        with pytest.raises(ToolchainError, match="stopping"):
            spawn_piped([PY, "-c", "pass"])  # none starts once stopped
    finally:
        resume_running()
        release(cat)
    again = spawn_piped([PY, "-c", "import sys; sys.stdin.read()"])
    release(again)
    assert again.returncode == 0
