"""A pytest plugin ``kernelwheel test`` loads (``-p kernelwheel_test_report``: a copy of this
file in the dev folder, the standard library alone): when pytest's run ends, each outcome's count
and the skip reasons, as JSON, into the file ``KERNELWHEEL_TEST_REPORT`` names. It only counts:
nothing pytest shows, runs or decides changes. :func:`all_skipped` judges what it wrote (read
back by kernelwheel's one reader of its records, which this copy cannot import)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

PLUGIN = "kernelwheel_test_report"
ENV = "KERNELWHEEL_TEST_REPORT"
SHOWN = 3  # the most common skip reasons named


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    target = os.environ.get(ENV)
    if not target or hasattr(config, "workerinput"):  # an xdist worker: the controller counts
        return
    stats = terminalreporter.stats
    counts = {key: len(reports) for key, reports in stats.items() if key}
    reasons = Counter(_reason(report) for report in stats.get("skipped", ()))
    staged = f"{target}.{os.getpid()}.tmp"
    with open(staged, "w", encoding="utf-8") as fh:
        json.dump({"counts": counts, "reasons": reasons.most_common()}, fh)
    os.replace(staged, target)


def _reason(report: Any) -> str:
    """A skip's reason as pytest's ``-rs`` shows it (``longrepr``: path, line, reason)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(text).removeprefix("Skipped: ")


def all_skipped(found: Mapping[str, Any]) -> str | None:
    """Where the run whose report is ``found`` skipped tests and ran none (nothing passed,
    failed or xfailed): the count and its most common reasons, in one line; None otherwise, or
    where the report is not one this plugin writes (a run that died, a damaged file)."""
    counts, reasons = found.get("counts"), found.get("reasons")
    if not isinstance(counts, dict) or not isinstance(reasons, list):
        return None
    skipped = counts.get("skipped", 0)
    ran = ("passed", "failed", "error", "xfailed", "xpassed")
    if not skipped or any(counts.get(outcome, 0) for outcome in ran):
        return None
    reasons = [pair for pair in reasons if isinstance(pair, list) and len(pair) == 2]
    named = ", ".join(f"{n} {_cut(str(reason))!r}" for reason, n in reasons[:SHOWN])
    more = f", and {len(reasons) - SHOWN} other reason(s)" if len(reasons) > SHOWN else ""
    return (
        f"no test ran: {skipped} skipped, none passed ({named}{more}), so nothing was tested "
        "here; kernelwheel test -- -rs lists each"
    )


def _cut(text: str, width: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
