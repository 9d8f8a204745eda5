"""The options every invocation takes, apart from the command flags so that parsing them imports
nothing heavy (``kernelwheel --version`` starts fast)."""

from __future__ import annotations

import argparse
from typing import Any


def add_common_arguments(parser: argparse.ArgumentParser, *, traceback: bool | None = None) -> None:
    """--traceback, --verbose and --quiet, on the main parser (``traceback``: its default) and
    on every command, so they work before or after the command name."""
    main = traceback is not None
    # On a command, an absent flag must not overwrite what the main parser set.
    unset: Any = argparse.SUPPRESS
    parser.add_argument(
        "--traceback",
        action="store_true",
        default=traceback if main else unset,
        help="show the Python traceback on errors (or set KERNELWHEEL_TRACEBACK=1)",
    )
    loud = parser.add_mutually_exclusive_group()
    for flags, help_text in (
        (("--verbose", "-v"), "also stream the tools' output (compiler, pip) as it is written"),
        (("--quiet", "-q"), "show only errors, warnings and the final summary"),
    ):
        loud.add_argument(
            *flags, action="store_true", default=False if main else unset, help=help_text
        )
