"""TOML in one place: reading (tomllib, or tomli before 3.11) with errors that name the file and
the fix, and the lock files' TOML written by hand so the layout is ours: same data, same bytes."""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, TypeVar

from packaging.version import InvalidVersion, Version

from .errors import KernelwheelError, ProjectError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

SYNTAX_HINT = "fix the syntax at that line and column"

# How a module reports a problem in one of its files: called as error(message, file=, hint=).
ErrorFactory = Callable[..., KernelwheelError]
_V = TypeVar("_V")


def parse_toml(
    text: str, *, file: Path | str, hint: str = SYNTAX_HINT, error: ErrorFactory = ProjectError
) -> dict[str, Any]:
    """Parse ``text`` read from ``file``; invalid TOML raises ``error`` naming the file."""
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
    """Read and parse the TOML file ``path``; every failure is ``error`` naming the file."""
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
# Control characters as \uXXXX, except those TOML has a short escape for.
_ESCAPES = {code: f"\\u{code:04X}" for code in (*range(0x20), 0x7F)} | {
    ord(char): f"\\{short}" for char, short in zip('"\\\b\t\n\f\r', '"\\btnfr', strict=True)
}


def string(text: str) -> str:
    """A TOML basic string."""
    return '"' + text.translate(_ESCAPES) + '"'


def key(name: str) -> str:
    """A key: bare where TOML allows it, quoted otherwise."""
    return name if _BARE_KEY.fullmatch(name) else string(name)


def value(item: Any) -> str:
    """A scalar, an array of scalars, or an inline table."""
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


def assignments(**values: Any) -> list[str]:
    """``key = value`` lines in the order given; a keyword's underscores are the key's dashes."""
    return [f"{key(name.replace('_', '-'))} = {value(item)}" for name, item in values.items()]


def array(items: Sequence[Any]) -> str:
    """An array, one element a line (diff-friendly); empty arrays stay on one line."""
    if not items:
        return "[]"
    return "[\n" + "".join(f"    {value(v)},\n" for v in items) + "]"


_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "a boolean"),  # before int: bool is an int subclass
    (int, "an integer"),
    (float, "a float"),
    (str, "a string"),
    (list, "an array"),
    (dict, "a table"),
    ((datetime, date, time), "a date/time"),
)


def toml_type(value: object) -> str:
    """What a TOML value is, in the words of a message ("an integer", "a table")."""
    return next((name for kind, name in _TYPES if isinstance(value, kind)), type(value).__name__)


def describe(value: object) -> str:
    """A value as a message shows it: its type, and the value itself for scalars."""
    if isinstance(value, (dict, list)):
        return toml_type(value)
    if isinstance(value, bool):
        return f"{toml_type(value)} ({str(value).lower()})"
    return f"{toml_type(value)} ({value!r})"


def unknown_key_hint(
    key: str, known: Sequence[str], where: str, homes: Mapping[str, Sequence[str]] | None = None
) -> str:
    """How to fix an unknown ``key`` in a table allowing ``known`` (``homes``: key -> tables)."""
    kebab = key.replace("_", "-").lower()
    if kebab in known:
        return f"did you mean {kebab!r}? keys are kebab-case"
    if close := difflib.get_close_matches(kebab, known, n=1, cutoff=0.8):
        return f"did you mean {close[0]!r}?"
    if homes and kebab in homes:
        return f"{kebab!r} belongs in {' or '.join(homes[kebab])}; move it there"
    if close := difflib.get_close_matches(kebab, known, n=1, cutoff=0.6):
        return f"did you mean {close[0]!r}?"
    return f"remove it; keys allowed in {where}: {', '.join(known)}"


class Located:
    """A TOML table read from ``file`` at the dotted ``prefix`` ("" for the document), with typed
    getters: every wrong type, missing or unknown key raises ``error`` naming the file and key."""

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        file: Path | str,
        prefix: str = "",
        error: ErrorFactory = ProjectError,
    ) -> None:
        self.data = data
        self.file = file
        self.prefix = prefix
        self.error_factory = error

    def dotted(self, name: str) -> str:
        """The dotted key of ``name`` in this table, quoted where TOML needs it."""
        quoted = key(name)
        return f"{self.prefix}.{quoted}" if self.prefix else quoted

    def error(self, message: str, key: str | None, hint: str) -> KernelwheelError:
        """An error at ``key`` of this table (None: the table itself)."""
        where = self.dotted(key) if key is not None else (self.prefix or None)
        return self.error_factory(message, file=self.file, key=where, hint=hint)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def keys(self) -> list[str]:
        return list(self.data)

    def check_keys(
        self,
        known: Sequence[str],
        *,
        homes: Mapping[str, Sequence[str]] | None = None,
        explain: Callable[[str], str | None] | None = None,
    ) -> None:
        """Refuse keys outside ``known``; ``explain(key)`` may give a better hint first."""
        where = f"[{self.prefix}]" if self.prefix else "the top level"
        for key in (name for name in self.data if name not in known):
            hint = (explain(key) if explain else None) or unknown_key_hint(key, known, where, homes)
            raise self.error(f"unknown key {key!r}", key, hint)

    def _typed(self, key: str, kind: type[_V], what: str, hint: str) -> _V | None:
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(f"expected {what}, got {describe(value)}", key, hint)
        return value

    def table(self, key: str, *, hint: str | None = None) -> Located | None:
        dotted = self.dotted(key)
        value = self._typed(key, dict, "a table", hint or f"write it as a [{dotted}] table")
        if value is None:
            return None
        return Located(value, file=self.file, prefix=dotted, error=self.error_factory)

    def required_table(self, key: str, hint: str) -> Located:
        table = self.table(key)
        if table is None:
            raise self.error("missing required key", key, hint)
        return table

    def table_array(self, key: str) -> tuple[Located, ...] | None:
        """The array of tables ``key``, each item located as ``key[index]``; None when absent."""
        dotted = self.dotted(key)
        hint = f"write each item as a [[{dotted}]] table"
        value = self._typed(key, list, "an array of tables", hint)
        if value is None:
            return None
        items: list[Located] = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.error(f"item {index} is {describe(item)}, not a table", key, hint)
            prefix = f"{dotted}[{index}]"
            items.append(Located(item, file=self.file, prefix=prefix, error=self.error_factory))
        return tuple(items)

    def string(self, key: str, *, nonempty: bool = False, hint: str | None = None) -> str | None:
        """The string ``key``, or None when absent; ``hint`` replaces every refusal's fix."""
        raw = self.data.get(key)
        quote = isinstance(raw, (int, float)) and not isinstance(raw, bool)
        fix = f'quote it: {key} = "{raw}"' if quote else f'write it as a string: {key} = "..."'
        value = self._typed(key, str, "a string", hint or fix)
        if value is not None and nonempty:
            self._refuse_blank(key, value, hint or f"give {key} a value, or remove it")
        return value

    def required_string(self, key: str, hint: str, *, nonempty: bool = False) -> str:
        """The string ``key``; ``hint`` is the fix when it is absent (or blank)."""
        value = self.string(key)
        if value is None:
            raise self.error("missing required key", key, hint)
        if nonempty:
            self._refuse_blank(key, value, hint)
        return value

    def _refuse_blank(self, key: str, value: str, hint: str) -> None:
        if not value.strip():
            raise self.error("must not be empty", key, hint)

    def integer(self, key: str, *, low: int | None = None, hint: str) -> int | None:
        value = self._typed(key, int, "an integer", hint)
        if value is not None and low is not None and value < low:
            raise self.error(f"must be at least {low}, got {value}", key, hint)
        return value

    def boolean(self, key: str) -> bool | None:
        hint = f"write {key} = true or {key} = false (no quotes)"
        return self._typed(key, bool, "a boolean", hint)

    def array(self, key: str) -> list[Any] | None:
        return self._typed(key, list, "an array", f"write it as {key} = [...]")

    def string_list(self, key: str, *, unique: bool = False) -> tuple[str, ...] | None:
        """The array of non-blank strings ``key``, or None when absent."""
        raw = self.data.get(key)
        hint = (
            f'wrap it in brackets: {key} = ["{raw}"]'
            if isinstance(raw, str)
            else f'write it as {key} = ["...", "..."]'
        )
        value = self._typed(key, list, "an array of strings", hint)
        if value is None:
            return None
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(
                    f"expected an array of strings, but item {index} is {describe(item)}",
                    key,
                    "quote every item",
                )
            if not item.strip():
                raise self.error(f"item {index} is an empty string", key, "remove the empty item")
            if unique and item in value[:index]:
                raise self.error(f"lists {item!r} twice", key, "remove the duplicate")
        return tuple(value)

    def string_table(self, key: str) -> dict[str, str] | None:
        table = self.table(key)
        if table is None:
            return None
        # table.string gives each name's string or raises
        return {name: text for name in table.keys() if (text := table.string(name)) is not None}

    def version(self, key: str) -> Version | None:
        raw = self.string(key)
        if raw is None:
            return None
        try:
            return Version(raw)
        except InvalidVersion:
            raise self.error(
                f"{raw!r} is not a valid version",
                key,
                f'use a version such as {key} = "2.5" or {key} = "12.4"',
            ) from None

    def version_range(self, low_key: str, high_key: str) -> tuple[Version | None, Version | None]:
        """Inclusive bounds; a minimum above the maximum is refused."""
        low, high = self.version(low_key), self.version(high_key)
        if low is not None and high is not None and low > high:
            raise self.error(
                f"minimum {low} is greater than maximum {high} ({self.dotted(high_key)})",
                low_key,
                "swap or correct the bounds (both are inclusive)",
            )
        return low, high
