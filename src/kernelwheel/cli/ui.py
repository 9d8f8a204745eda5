"""Console output for the CLI: a Reporter that prints steps with marks and durations.

On GitHub Actions (GITHUB_ACTIONS=true) each variant is folded into a group and errors become
annotations.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from ..log import StepResult


class ConsoleUI:
    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.github = os.environ.get("GITHUB_ACTIONS") == "true"
        enc = (getattr(self.out, "encoding", None) or "").lower()
        unicode_ok = "utf" in enc
        self.ok_mark = "✓" if unicode_ok else "ok"
        self.fail_mark = "✕" if unicode_ok else "FAIL"

    # Reporter protocol
    def step_started(self, scope: str, name: str) -> None:
        pass

    def step_finished(self, result: StepResult) -> None:
        mark = self.ok_mark if result.ok else self.fail_mark
        detail = f"  {result.detail}" if result.detail else ""
        print(
            f"  {mark} {result.scope}: {result.name} ({result.seconds:.1f}s){detail}",
            file=self.out,
            flush=True,
        )

    def info(self, scope: str, message: str) -> None:
        prefix = f"{scope}: " if scope else ""
        print(f"{prefix}{message}", file=self.out, flush=True)

    # CLI helpers
    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def group(self, title: str) -> None:
        if self.github:
            print(f"::group::{title}", file=self.out, flush=True)
        else:
            print(title, file=self.out, flush=True)

    def endgroup(self) -> None:
        if self.github:
            print("::endgroup::", file=self.out, flush=True)

    def error(self, message: str) -> None:
        if self.github:
            first = message.splitlines()[0] if message else ""
            print(f"::error::{first}", file=self.out, flush=True)
        print(f"error: {message}", file=self.err, flush=True)

    def warn(self, message: str) -> None:
        print(f"warning: {message}", file=self.err, flush=True)
