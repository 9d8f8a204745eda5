"""TOML in one place: reading (tomllib, or tomli before 3.11) with errors that name the file
and the fix, and the little TOML the lock files need, written by hand so the layout is ours:
keys in the order given, one value a line, strings always quoted the same way. Same data, same
bytes."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import KernelwheelError, ProjectError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

__all__ = ["TOMLDecodeError", "key", "loads", "parse_toml", "read_toml", "value"]

TOMLDecodeError = tomllib.TOMLDecodeError
loads = tomllib.loads

SYNTAX_HINT = "fix the syntax at that line and column"

# How a module reports a problem in one of its files: ProjectError, or a subclass's twin such as
# RecipeError, called as error(message, file=..., hint=...).
ErrorFactory = Callable[..., KernelwheelError]


def parse_toml(
    text: str, *, file: Path | str, hint: str = SYNTAX_HINT, error: ErrorFactory = ProjectError
) -> dict[str, Any]:
    """Parse ``text`` read from ``file``; invalid TOML raises ``error`` naming the file, with
    the line and column (tomllib's message carries them) and ``hint``."""
    if text.startswith("\ufeff"):
        raise error(
            "starts with a UTF-8 byte order mark, which TOML does not allow",
            file=file,
            hint="save the file as UTF-8 without BOM",
        )
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as exc:
        raise error(f"invalid TOML: {exc}", file=file, hint=hint) from exc
    except RecursionError:
        raise error(
            "invalid TOML: arrays or tables nested too deeply to read",
            file=file,
            hint="flatten the nesting; kernelwheel's files need at most a few levels",
        ) from None


def read_toml(
    path: Path,
    *,
    hint: str = SYNTAX_HINT,
    missing_hint: str | None = None,
    error: ErrorFactory = ProjectError,
) -> dict[str, Any]:
    """Read and parse the TOML file ``path``. Every failure is ``error`` naming the file: not
    found (with ``missing_hint``), a folder, not UTF-8, unreadable, or invalid TOML."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error("not found", file=path, hint=missing_hint or "check the path") from None
    except IsADirectoryError:
        raise error(
            "is a folder, not a file",
            file=path,
            hint="pass the file inside it, or remove the folder",
        ) from None
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=path,
            hint=f"save {path.name} as UTF-8",
        ) from exc
    except OSError as exc:
        raise error(
            f"cannot read: {exc.strerror or exc}", file=path, hint="check the file's permissions"
        ) from exc
    return parse_toml(text, file=path, hint=hint, error=error)


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
