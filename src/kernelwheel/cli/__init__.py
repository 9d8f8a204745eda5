"""Command-line entry point. Owns all output and exit codes; library code only raises.

Each command's module has ``register(subparsers)`` and ``run(args, ui) -> int``; :func:`main`
imports only the module of the command it runs, so none loads the others' dependencies."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import HungUp, KernelwheelError, Terminated, UsageError, VariantError

if TYPE_CHECKING:
    from .._util import Runner
    from .ui import ConsoleUI

# Order is the order shown in --help.
COMMANDS = tuple(
    "init dev test build matrix check to_wheel upload index install variants lock download".split()
)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def _traceback_setting() -> tuple[bool, str | None]:
    """KERNELWHEEL_TRACEBACK as a boolean (``0``: off), and what is wrong with any other value."""
    raw = os.environ.get("KERNELWHEEL_TRACEBACK", "")
    value = raw.strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE, None
    return False, (
        f"KERNELWHEEL_TRACEBACK={raw!r} is neither true nor false: set it to 1 (or true, yes, "
        "on) to show tracebacks, 0 (or false, no, off) or nothing not to"
    )


def add_common_arguments(parser: argparse.ArgumentParser, *, traceback: bool | None = None) -> None:
    """--traceback, --verbose and --quiet, on the main parser (``traceback``: its default) and
    on every command, so they work before or after the command name; kept apart from the
    command flags so that parsing them imports nothing heavy (``--version`` starts fast)."""
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


class _CommandParser(argparse.ArgumentParser):
    """Its description and epilog as written (examples keep their lines), unless it picks another
    formatter."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(**kwargs)


def make_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelwheel",
        description=(
            "Build PyTorch custom kernels into installable abi3 wheels, one per "
            "torch x backend x C++ ABI x arch variant, and convert Hub kernel repos to wheels."
        ),
        epilog="Run 'kernelwheel COMMAND --help' for a command's options.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"kernelwheel {__version__}")
    add_common_arguments(parser, traceback=_traceback_setting()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for name in commands:
        try:
            module = importlib.import_module(f".{name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.{name}":
                continue  # command not shipped in this build
            raise
        module.register(sub)
        sub.choices[name.replace("_", "-")].set_defaults(func=module.run)
    for command in dict.fromkeys(sub.choices.values()):
        add_common_arguments(command)  # also accepted after the command: build X --traceback
    return parser


def _raise_once(signum: int, frame: object) -> None:
    # Once: a second SIGTERM or Ctrl-C must not cut short the clean-up, nor the interrupted
    # build's summary of what finished; main() puts the handlers back as it returns.
    signal.signal(signum, signal.SIG_IGN)
    from .._util import raise_when_safe  # imported by main() before the handler is set

    signalled: dict[int, type[KeyboardInterrupt]] = {
        signal.SIGTERM: Terminated,
        signal.SIGHUP: HungUp,
    }
    raise_when_safe(signalled.get(signum, KeyboardInterrupt)())


def _commands_needed(argv: Sequence[str]) -> Sequence[str]:
    """The command modules a parse of ``argv`` needs: the one its first positional names; none
    for ``--version``; all of them otherwise, so help and errors list them all."""
    for arg in argv:
        if arg in ("-h", "--help") or arg == "--":
            break
        if arg in ("--version", "-V"):
            return ()
        if not arg.startswith("-"):
            name = arg.replace("-", "_")
            return (name,) if name in COMMANDS else COMMANDS
    return COMMANDS


def main(argv: Sequence[str] | None = None, runner: Runner | None = None) -> int:
    """Run the command ``argv`` names, its processes through ``runner`` (default: real ones)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = make_parser(_commands_needed(argv))
    # `kernelwheel test … -- ARGS`: the words after "--" are pytest's, whatever they look like
    passthrough: list[str] = []
    if "--" in argv and _commands_needed(argv) == ("test",):
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    args, extra = parser.parse_known_args(argv)
    if extra:  # `kernelwheel test -x`: pytest's words before the --
        also = " (pytest's go after --: kernelwheel test [DIR] -- -x -k NAME)"
        parser.error(f"unrecognized arguments: {' '.join(extra)}" + also * ("pytest_args" in args))
    if (problem := _traceback_setting()[1]) is not None:
        parser.error(problem)  # exit 2, as a bad flag
    if passthrough:
        args.pytest_args = passthrough
    # here: `--version` imports nothing it does not need; the signal handlers set below take
    # raise_when_safe from it, so it is imported before they can run
    from .._util import RUNNER

    args.runner = RUNNER if runner is None else runner
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .ui import NORMAL, QUIET, VERBOSE, ConsoleUI, with_log

    verbosity = QUIET if args.quiet else VERBOSE if args.verbose else NORMAL
    # With --json, stdout carries the JSON alone: progress goes to stderr.
    ui = ConsoleUI(verbosity=verbosity, progress_to_stderr=bool(getattr(args, "json", False)))
    # SIGTERM (kill, CI cancellation, a container stopping) takes Ctrl-C's path: staging
    # folders and half-written files are removed on the way out. Only the main thread may set it.
    # Both raise only where the command being started can still be stopped (raise_when_safe).
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_once) if in_main else None
    default_int = in_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if default_int:
        signal.signal(signal.SIGINT, _raise_once)
    # a closed terminal (SIGHUP) killed the run outright, its compilers and tests left running;
    # not where it is ignored (nohup)
    hangup = in_main and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    if hangup:
        signal.signal(signal.SIGHUP, _raise_once)
    try:
        if any(name.startswith("KERNELWHEEL_") for name in os.environ):
            from ..plan.options import unknown_variables

            for finding in unknown_variables():
                ui.warn(finding)
        return int(args.func(args, ui))
    except KernelwheelError as exc:
        if args.traceback:
            _print_traceback()
        if isinstance(exc, (UsageError, VariantError)):
            ui.discard_log()  # refused for its arguments before any work: no logs/ folder made
        else:
            ui.keep_log()
        ui.log_only(traceback.format_exc().rstrip())  # a command's log keeps it in any case
        ui.error(with_log(str(exc), ui.log_path))
        _json_error(args, ui, type(exc).__name__, exc.message, exc.hint, exc.exit_code)
        return exc.exit_code
    except Terminated as exc:
        name = "SIGHUP" if isinstance(exc, HungUp) else "SIGTERM"
        ui.error(f"terminated ({name}); nothing partial was left behind")
        _json_error(args, ui, type(exc).__name__, f"terminated ({name})", None, exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt:
        ui.error("interrupted")
        _json_error(args, ui, "Interrupted", "interrupted (SIGINT)", None, 130)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `kernelwheel matrix ... | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # A file system refusal no check foresaw (a read-only cache on CI, a full disk, a name
        # too long): its message and the path, never a traceback.
        if args.traceback:
            _print_traceback()
        ui.log_only(traceback.format_exc().rstrip())
        where = f"{exc.filename}: " if exc.filename else ""
        if exc.filename2:  # a copy or rename: the second path is where it was going
            where = f"{exc.filename} -> {exc.filename2}: "
        message = f"{where}{exc.strerror or exc}"
        from .._util import DISK_FULL_HINT, disk_full

        named = {"cache_dir": "--cache-dir (KERNELWHEEL_CACHE_DIR)", "output_dir": "--output-dir"}
        option = (
            " or ".join(v for k, v in named.items() if hasattr(args, k)) or "the command's option"
        )
        hint = (
            f"{DISK_FULL_HINT} with {option}"
            if disk_full(exc)
            else "check that the path exists, is a folder where one is expected, and is "
            f"writable (or pass another with {option})"
        )
        ui.error(f"{message}\n  fix: {hint}")
        _json_error(args, ui, type(exc).__name__, message, hint, 1)
        return 1
    finally:
        # Whatever way the command ended, no command it started outlives it (a thread that had
        # not yet noticed an interrupt may still hold one).
        from .._util import resume_running, stop_running

        stop_running()
        resume_running()
        ui.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if default_int:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if hangup:
            signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _json_error(
    args: argparse.Namespace, ui: ConsoleUI, kind: str, message: str, hint: str | None, code: int
) -> None:
    """With ``--json``, a failed command still prints one JSON document, not an empty stdout."""
    if not getattr(args, "json", False):
        return
    import json

    document = {
        "ok": False,
        "command": args.command,
        "exit_code": code,
        "error": {"kind": kind, "message": message, "hint": hint},
        "log": str(ui.log_path) if ui.log_path is not None else None,
        # what an interrupted build had finished (cli/build.py), its wheels' paths among them
        **getattr(args, "json_partial", {}),
    }
    from .._util import redact

    with suppress(OSError):  # stdout gone: the message is on stderr already
        print(redact(json.dumps(document, indent=2)), flush=True)


def _print_traceback() -> None:
    """--traceback's traceback on stderr, secrets redacted."""
    from .._util import redact

    print(redact(traceback.format_exc().rstrip()), file=sys.stderr, flush=True)


def entry() -> None:
    sys.exit(main())
