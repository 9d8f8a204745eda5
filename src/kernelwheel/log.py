"""Progress reporting. The library reports through a Reporter; the CLI installs one that prints.

Library code calls ``step(...)`` as a context manager so each step is timed and marked done or
failed; the default reporter records nothing, keeping the library silent. A step that runs tools
names the log their output goes to (``step(..., log=path)``), so a reporter can show what is
happening while the step runs (the CLI tails it: pip's downloads, the compiler's progress).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class StepResult:
    scope: str
    name: str
    ok: bool
    seconds: float
    detail: str = ""


class Reporter(Protocol):
    def step_started(self, scope: str, name: str, log: Path | None = None) -> None:
        """A step began; ``log`` is the file its tools write to, if any."""

    def step_finished(self, result: StepResult) -> None: ...

    def info(self, scope: str, message: str) -> None: ...


class SilentReporter:
    """Records results for callers that want them, prints nothing."""

    def __init__(self) -> None:
        self.results: list[StepResult] = []
        self.messages: list[tuple[str, str]] = []

    def step_started(self, scope: str, name: str, log: Path | None = None) -> None:
        pass

    def step_finished(self, result: StepResult) -> None:
        self.results.append(result)

    def info(self, scope: str, message: str) -> None:
        self.messages.append((scope, message))


@contextmanager
def step(
    reporter: Reporter, scope: str, name: str, *, log: Path | None = None
) -> Iterator[list[str]]:
    """Time one step. The yielded list collects a short detail shown beside the step's mark;
    ``log`` is the file the step's tools write to (the reporter may follow it)."""
    detail: list[str] = []
    if log is None:
        reporter.step_started(scope, name)
    else:
        reporter.step_started(scope, name, log)
    start = time.monotonic()
    ok = False
    try:
        yield detail
        ok = True
    finally:
        seconds = time.monotonic() - start
        reporter.step_finished(StepResult(scope, name, ok, seconds, " ".join(detail)))
