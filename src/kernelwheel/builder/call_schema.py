"""A Python call of an op (``ops.add(x)``) read against the op's schema as torch matches one
(``createStackForSchema``): a required argument left out, too many positionals, a keyword the
schema lacks; torch raises each at the call. A call through ``*args``/``**kwargs`` is not
judged, nor a schema this reading does not parse (silence over a false alarm)."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .cxx_signature import split_arguments


@dataclass(frozen=True)
class _Argument:
    name: str
    default: bool
    keyword_only: bool


def _arguments(schema: str) -> tuple[_Argument, ...] | None:
    """The arguments of ``schema`` (``ns::name.overload(args) -> returns``), None unparsed."""
    match = re.fullmatch(r"[\w:.]+\((.*)\)\s*->.*", schema.strip(), re.DOTALL)
    if match is None:
        return None
    found, keyword_only = [], False
    for arg in split_arguments(match[1]):
        if arg == "*":
            keyword_only = True
            continue
        words = arg.split("=", 1)[0].split()
        if len(words) != 2 or not words[1].isidentifier():
            return None  # a default with a comma in a string, or unknown syntax
        found.append(_Argument(words[1], "=" in arg, keyword_only))
    return tuple(found)


def _fault(args: Sequence[_Argument], positional: int, keywords: Sequence[str]) -> str | None:
    """What torch refuses in a call of ``args`` with ``positional`` arguments and
    ``keywords``, and the fix; None for a call it accepts."""
    takes = [a.name for a in args if not a.keyword_only]
    if positional > len(takes):
        later = [a.name for a in args[len(takes) :]]
        fix = f"pass {', '.join(later)} by keyword" if later else "drop the extra ones"
        return (
            f"passes {positional} positional arguments, and it takes {len(takes)} "
            f"({', '.join(takes) or 'none'}); {fix}, or add them to the schema and the kernel"
        )
    faults = []
    rest = {a.name for a in args[positional:]}
    if twice := [k for k in keywords if k in takes[:positional]]:
        faults.append(f"passes {', '.join(twice)} both by position and by keyword")
    elif unknown := [k for k in keywords if k not in rest]:
        faults.append(
            f"passes {', '.join(k + '=' for k in unknown)}, which it has no argument named "
            f"(its arguments: {', '.join(a.name for a in args)})"
        )
    if missing := [a.name for a in args[positional:] if not a.default and a.name not in keywords]:
        faults.append(
            f"leaves out {', '.join(missing)}, which it gives no default; pass "
            f"{', '.join(m + '=...' for m in missing)}, or give a default in the ops.def"
        )
    return "; ".join(faults) or None


def call_fault(call: ast.Call, schemas: Sequence[str]) -> str | None:
    """Why torch refuses ``call`` under every one of ``schemas`` (an overload packet's, or
    one overload's), with the schemas; None where one accepts it or it cannot be read."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None
    keywords = [k.arg for k in call.keywords if k.arg is not None]
    faults = []
    for schema in schemas:
        args = _arguments(schema)
        if args is None:
            return None
        fault = _fault(args, len(call.args), keywords)
        if fault is None:
            return None
        faults.append(f"{schema.split('::', 1)[-1]}: the call {fault}")
    return "; ".join(faults) or None
