"""Progress reporting: the library times each ``step(...)`` through a Reporter (the CLI's prints,
and tails the log a step names: pip's downloads, the compiler's progress); the default is silent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# A compile's log line naming the units it is about to compile, in the author's paths (the
# CLI's progress names them from it, then each as the build tool finishes it).
UNITS_LINE = "units to compile: "


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
    """Time one step; the yielded list collects a short detail shown beside its mark."""
    detail: list[str] = []
    reporter.step_started(scope, name, log)
    start = time.monotonic()
    ok = False
    try:
        yield detail
        ok = True
    finally:
        seconds = time.monotonic() - start
        reporter.step_finished(StepResult(scope, name, ok, seconds, " ".join(detail)))
