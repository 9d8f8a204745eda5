"""Arguments shared by several commands, defined once so a flag means the same everywhere.

The build options' flags, made from ``data/options.toml``, default to None ("not given"), so the
lower layers of the precedence (defaults < [tool.kernelwheel] < KERNELWHEEL_*) show through."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._util import EMPTY_PATH
from ..errors import UsageError
from ..plan.options import OPTIONS, resolve_command_option, resolve_jobs

PRECEDENCE = (
    "Precedence, lowest first: defaults < [tool.kernelwheel] in the kernel's pyproject.toml "
    "< KERNELWHEEL_* environment variables < these flags (docs/options.md)."
)


def source_arg(text: str) -> str:
    """A path or URL argument; an empty one is refused (``EMPTY_PATH``)."""
    if not text:
        raise argparse.ArgumentTypeError(EMPTY_PATH)
    return text


def path_arg(text: str) -> Path:
    return Path(source_arg(text))


def add_variant_argument(parser: argparse.ArgumentParser, what: str, example: str) -> None:
    """``--variant GLOB``; ``what`` says what a match does here."""
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="GLOB",
        help=f"{what}; a Hub variant name or a glob, braces and ranges expanded (e.g. {example}, "
        "'torch21{0..4}-*'); repeatable; a glob matching nothing is an error",
    )


def add_project_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        type=path_arg,
        nargs="?",
        metavar="DIR",
        help="the kernel project folder (holding build.toml, or that file); default: the "
        "project the current folder is in, its build.toml found here or in a folder above, "
        "up to the git repository's root (as git and cargo find theirs)",
    )


def project_path(args: argparse.Namespace) -> Path:
    """DIR exactly, else the project the current folder lies in."""
    path: Path | None = args.path
    if path is not None:
        return path
    from ..model.project import find_project_root  # commands without a project never load it

    return find_project_root()


def add_locking_arguments(parser: argparse.ArgumentParser, dir_help: str, json_what: str) -> None:
    """``lock``'s and ``download``'s PROJECT_DIR, --json, --cache-dir (their log's) and --jobs."""
    parser.add_argument(
        "project_dir",
        metavar="PROJECT_DIR",
        type=path_arg,
        nargs="?",
        default=Path("."),
        help=dir_help,
    )
    add_json_argument(parser, json_what)
    add_option_arguments(parser, "cache_dir", "jobs", grouped=False)


def jobs_value(args: argparse.Namespace) -> int:
    return resolve_jobs(resolve_command_option("jobs", args.jobs))


def add_json_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print {what} as JSON on stdout (and progress on stderr)",
    )


def option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The option flags of ``args`` by option name (None: not given)."""
    return {o.name: getattr(args, o.name) for o in OPTIONS if hasattr(args, o.name)}


SELECTION = ("build", "skip", "archs", "only", "recipes")  # matrix's options

# Selection flags by argparse dest; a command has those it defines.
_SELECTORS = (
    ("variant", "--variant"),
    ("only", "--only"),
    ("build", "--build"),
    ("skip", "--skip"),
    ("archs", "--arch"),
)


def refuse_conflicting_selectors(args: argparse.Namespace) -> None:
    """``--variant`` and ``--only`` each say exactly what to select: with another selection
    flag the two would disagree, so the command refuses instead of picking one."""
    given = [flag for dest, flag in _SELECTORS if getattr(args, dest, None)]
    for exclusive in ("--variant", "--only"):
        if exclusive in given and len(given) > 1:
            others = [flag for flag in given if flag != exclusive]
            raise UsageError(
                f"{exclusive} cannot be combined with {' or '.join(others)}: both choose the "
                "variants",
                hint=f"use {exclusive} alone, or drop it and select with --build/--skip/--arch",
            )


def add_target_python_argument(parser: argparse.ArgumentParser, purpose: str) -> None:
    """``--python``: the user's interpreter (install, variants)."""
    parser.add_argument(
        "--python",
        type=source_arg,
        metavar="PY",
        help=f"the interpreter {purpose}: a path, or a name looked up on PATH (python3.12) "
        "(default: $VIRTUAL_ENV's, else python3 on PATH)",
    )


def add_option_arguments(
    parser: argparse.ArgumentParser,
    *names: str,
    grouped: bool = True,
    defaults: Mapping[str, str] | None = None,
) -> None:
    """The flags of the build options ``names`` (default: all), in OPTIONS' order, in their
    --help sections or (``grouped=False``) on ``parser``; ``defaults`` replaces the default an
    option's help states where this command's differs."""
    sections: dict[str, argparse._ArgumentGroup] = {}
    for option in OPTIONS:
        if names and option.name not in names:
            continue
        where: argparse.ArgumentParser | argparse._ArgumentGroup = parser
        if grouped:
            if option.group not in sections:
                about = None if sections else PRECEDENCE
                sections[option.group] = parser.add_argument_group(option.group, about)
            where = sections[option.group]
        flags = (option.flag, option.short) if option.short else (option.flag,)
        text = option.help + ("; repeatable" if option.repeat else "")
        if option.metavar is None:  # on/off: the flag sets what its name says
            env = f"{option.env}={int(not option.negated)}" if option.env else None
            shape: dict[str, Any] = {"action": "store_false" if option.negated else "store_true"}
        else:
            default = (defaults or {}).get(option.name, option.default)
            text += f" (default: {default})" if default != "none" else ""
            env = option.env
            shape = {"action": "append" if option.repeat else "store", "metavar": option.metavar}
        # docs/options.md's help as --help shows it: no backticks, the variable after it
        text = text.replace("`", "").replace("%", "%%") + (f" [env: {env}]" if env else "")
        where.add_argument(*flags, dest=option.name, default=None, help=text, **shape)
