"""Command-line entry point. Owns all output and exit codes; library code only raises.

Each subcommand lives in ``kernelwheel.cli.<name>`` and exposes
``register(subparsers) -> None``, which adds its parser and sets ``func(args, ui) -> int``.
:func:`main` imports only the module of the command it runs (all of them for the top-level help
or an unknown command), so ``kernelwheel --version`` and each command start without importing the
others' dependencies.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from .. import __version__
from ..errors import KernelwheelError

# Order is the order shown in --help.
COMMANDS = ("build", "matrix", "check", "to_wheel", "index", "lock", "download")


def make_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelwheel",
        description=(
            "Build PyTorch custom kernels into installable abi3 wheels, one per "
            "torch x backend x C++ ABI x arch variant, and convert Hub kernel repos to wheels."
        ),
        epilog="Run 'kernelwheel COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"kernelwheel {__version__}")
    parser.add_argument(
        "--traceback",
        action="store_true",
        default=bool(os.environ.get("KERNELWHEEL_TRACEBACK")),
        help="show the Python traceback on errors (or set KERNELWHEEL_TRACEBACK=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        try:
            module = importlib.import_module(f".{name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.{name}":
                continue  # command not shipped in this build
            raise
        module.register(sub)
    return parser


def _commands_needed(argv: Sequence[str]) -> Sequence[str]:
    """The command modules a parse of ``argv`` needs: the one named by the first positional
    argument; none for a bare ``--version``; every one otherwise (top-level help, an unknown or
    missing command), so help and errors list them all. Global options take no values."""
    for arg in argv:
        if arg in ("-h", "--help") or arg == "--":
            break
        if arg == "--version":
            return ()
        if not arg.startswith("-"):
            name = arg.replace("-", "_")
            return (name,) if name in COMMANDS else COMMANDS
    return COMMANDS


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = make_parser(_commands_needed(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .ui import ConsoleUI

    ui = ConsoleUI()
    try:
        code: int = args.func(args, ui)
        return code
    except KernelwheelError as exc:
        if args.traceback:
            traceback.print_exc()
        ui.error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        ui.error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `kernelwheel matrix ... | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def entry() -> None:
    sys.exit(main())
