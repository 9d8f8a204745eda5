"""CPython's stable ABI (abi3): which functions and data an abi3 extension may use, from
``data/stable_abi.tsv`` (``scripts/regen_stable_abi.py`` makes it from CPython's
``Misc/stable_abi.toml``, which gives the version each item was added in)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from .policy import data_file

# Feature macros that are defined on Linux release builds of CPython. Items behind other macros
# (MS_WINDOWS, USE_STACKCHECK, Py_REF_DEBUG: Windows-only or debug-build-only) are not exported
# by a Linux release interpreter, so an extension needing them fails to load there.
LINUX_FEATURE_MACROS = frozenset({"HAVE_FORK", "PY_HAVE_THREAD_NATIVE_ID"})


def parse_python_version(text: str) -> tuple[int, int]:
    """Parse "3.9" / "cp39" / "39" -> (3, 9). Raises ValueError."""
    t = text.strip().lower().removeprefix("cp")
    major, _, minor = t.partition(".") if "." in t else (t[:1], "", t[1:])
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"not a Python version: {text!r} (expected e.g. '3.9' or 'cp39')")
    return int(major), int(minor)


@dataclass(frozen=True)
class StableAbiItem:
    name: str
    kind: str  # "function" or "data"
    added: tuple[int, int]
    abi_only: bool = False
    ifdef: str | None = None

    @property
    def added_str(self) -> str:
        return f"{self.added[0]}.{self.added[1]}"

    def on_linux(self) -> bool:
        return self.ifdef is None or self.ifdef in LINUX_FEATURE_MACROS


def is_python_symbol(name: str) -> bool:
    return name.startswith(("Py", "_Py"))


def parse_tsv(text: str, *, source: str = "stable_abi.tsv") -> dict[str, StableAbiItem]:
    items: dict[str, StableAbiItem] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4 or fields[1] not in ("function", "data"):
            raise ValueError(f"{source}:{lineno}: expected name, kind, added, flags: {line!r}")
        name, kind, added, flags = fields
        abi_only = False
        ifdef: str | None = None
        for flag in filter(None, flags.split(",")):
            if flag == "abi_only":
                abi_only = True
            elif flag.startswith("ifdef="):
                ifdef = flag[len("ifdef=") :]
            else:
                raise ValueError(f"{source}:{lineno}: unknown flag {flag!r}")
        items[name] = StableAbiItem(name, kind, parse_python_version(added), abi_only, ifdef)
    return items


@functools.cache
def load_stable_abi() -> Mapping[str, StableAbiItem]:
    """The stable ABI's functions and data by symbol name (from ``data/stable_abi.tsv``)."""
    path = data_file("stable_abi.tsv")
    return parse_tsv(path.read_text(encoding="utf-8"), source=str(path))
