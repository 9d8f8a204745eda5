"""A static HTTP server on loopback for index tests: ``python -m http.server`` in a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def http_server(root: Path) -> Iterator[str]:
    """``python -m http.server`` on 127.0.0.1 (an ephemeral port), serving ``root``."""
    # The with block closes the stdout pipe too (else a ResourceWarning at garbage collection).
    with subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "-d", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            port = re.search(r"port (\d+)", line)
            assert port, line
            yield f"http://127.0.0.1:{port[1]}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)
