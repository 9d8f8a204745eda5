"""The little TOML the lock files need, written by hand so the layout is ours: keys in the order
given, one value a line, strings always quoted the same way. Same data, same bytes."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

__all__ = ["TOMLDecodeError", "key", "loads", "value"]

TOMLDecodeError = tomllib.TOMLDecodeError
loads = tomllib.loads

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def string(text: str) -> str:
    """A TOML basic string."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def key(name: str) -> str:
    """A key: bare where TOML allows it, quoted otherwise."""
    return name if _BARE_KEY.fullmatch(name) else string(name)


def value(item: Any) -> str:
    """A scalar, an array of scalars, or an inline table (mappings keep their order)."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, str):
        return string(item)
    if isinstance(item, Mapping):
        return "{ " + ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items()) + " }"
    if isinstance(item, Sequence):
        return "[" + ", ".join(value(v) for v in item) + "]"
    raise TypeError(f"cannot write {type(item).__name__} as TOML")


def array(items: Sequence[Any]) -> str:
    """An array, one element a line (diff-friendly); empty arrays stay on one line."""
    if not items:
        return "[]"
    return "[\n" + "".join(f"    {value(v)},\n" for v in items) + "]"
