"""Progress reporting. The library reports through a Reporter; the CLI installs one that prints.

Library code calls ``step(...)`` as a context manager so each step is timed and marked done or
failed; the default reporter records nothing, keeping the library silent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class StepResult:
    scope: str
    name: str
    ok: bool
    seconds: float
    detail: str = ""


class Reporter(Protocol):
    def step_started(self, scope: str, name: str) -> None: ...

    def step_finished(self, result: StepResult) -> None: ...

    def info(self, scope: str, message: str) -> None: ...


class SilentReporter:
    """Records results for callers that want them, prints nothing."""

    def __init__(self) -> None:
        self.results: list[StepResult] = []
        self.messages: list[tuple[str, str]] = []

    def step_started(self, scope: str, name: str) -> None:
        pass

    def step_finished(self, result: StepResult) -> None:
        self.results.append(result)

    def info(self, scope: str, message: str) -> None:
        self.messages.append((scope, message))


@contextmanager
def step(reporter: Reporter, scope: str, name: str) -> Iterator[list[str]]:
    """Time one step. The yielded list collects a short detail shown beside the step's mark."""
    detail: list[str] = []
    reporter.step_started(scope, name)
    start = time.monotonic()
    try:
        yield detail
    except BaseException:
        reporter.step_finished(
            StepResult(scope, name, False, time.monotonic() - start, " ".join(detail))
        )
        raise
    reporter.step_finished(
        StepResult(scope, name, True, time.monotonic() - start, " ".join(detail))
    )
