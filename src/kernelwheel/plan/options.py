"""Build options and where they come from: one precedence, lowest first.

1. defaults (below);
2. ``[tool.kernelwheel]`` in the kernel's ``pyproject.toml``, when the project has one;
3. ``KERNELWHEEL_*`` environment variables;
4. command-line flags.

A layer replaces the value of the layers below it; it never merges with them (``--skip X``
replaces a ``skip`` set in pyproject.toml). ``--only`` is command-line only; when given it
ignores ``build``, ``skip`` and ``archs`` from every layer (the name says the arch).

Options (TOML key / environment variable / flag, default):

- ``build`` / ``KERNELWHEEL_BUILD`` / ``--build GLOB``, default ``*``;
- ``skip`` / ``KERNELWHEEL_SKIP`` / ``--skip GLOB``, default none;
- ``archs`` / ``KERNELWHEEL_ARCHS`` / ``--arch ARCH``, default ``all``;
- ``--only NAME`` (command line only), default none;
- ``recipes`` / ``KERNELWHEEL_RECIPES`` / ``--recipes DIR``, default the bundled recipes;
- ``output-dir`` / ``KERNELWHEEL_OUTPUT_DIR`` / ``--output-dir DIR``, default ``wheelhouse``;
- ``cache-dir`` / ``KERNELWHEEL_CACHE_DIR`` / ``--cache-dir DIR``, default: the builder's;
- ``jobs`` / ``KERNELWHEEL_JOBS`` / ``--jobs N``, default ``auto``.

Values: ``build``/``skip`` are glob patterns over Hub variant names with brace expansion (see
:mod:`kernelwheel.plan.selector`), written as a TOML string or array, or space-separated in the
environment; several flags add up within the command line. ``archs`` is ``all``, ``auto``/
``native`` (the machine's own arch) or arch names (``x86_64``, ``aarch64``), space- or
comma-separated. ``jobs`` is a positive integer or ``auto``. Paths in pyproject.toml are relative
to its folder; paths from the environment or the command line are relative to the working
directory. An empty environment variable counts as unset.

:func:`resolve_options` returns a frozen :class:`Options` that records, per option, the layer
that set it (``Options.source``), so messages can name ``KERNELWHEEL_SKIP`` or ``--skip``.
The same text, for users: docs/options.md.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._toml import read_toml
from ..errors import ProjectError, UsageError
from ..model.variant import Arch
from .selector import Selector, expand_braces, split_patterns

__all__ = [
    "DEFAULT_OPTIONS",
    "ENV_VARS",
    "PYPROJECT",
    "Options",
    "resolve_options",
]

PYPROJECT = "pyproject.toml"
TOOL_TABLE = "tool.kernelwheel"
ARCH_KEYWORDS = ("all", "auto", "native")

# option name (the Options field) -> (TOML key, environment variable or None, CLI flag)
_NAMES: dict[str, tuple[str, str | None, str]] = {
    "build": ("build", "KERNELWHEEL_BUILD", "--build"),
    "skip": ("skip", "KERNELWHEEL_SKIP", "--skip"),
    "archs": ("archs", "KERNELWHEEL_ARCHS", "--arch"),
    "only": ("only", None, "--only"),
    "recipes": ("recipes", "KERNELWHEEL_RECIPES", "--recipes"),
    "output_dir": ("output-dir", "KERNELWHEEL_OUTPUT_DIR", "--output-dir"),
    "cache_dir": ("cache-dir", "KERNELWHEEL_CACHE_DIR", "--cache-dir"),
    "jobs": ("jobs", "KERNELWHEEL_JOBS", "--jobs"),
}
ENV_VARS: tuple[str, ...] = tuple(env for _, env, _ in _NAMES.values() if env)
_TOML_KEYS = {toml: name for name, (toml, _, _) in _NAMES.items() if name != "only"}


@dataclass(frozen=True)
class Options:
    """Resolved options. ``sources`` maps each option set above its default to the label of the
    layer that set it (``--skip``, ``KERNELWHEEL_SKIP``, ``[tool.kernelwheel] skip``)."""

    build: tuple[str, ...] = ("*",)
    skip: tuple[str, ...] = ()
    archs: tuple[str, ...] = ("all",)
    only: str | None = None
    recipes: Path | None = None
    output_dir: Path = Path("wheelhouse")
    cache_dir: Path | None = None
    jobs: int | None = None  # None: fit the machine
    sources: tuple[tuple[str, str], ...] = field(default=())

    def source(self, name: str) -> str:
        """The layer that set option ``name``: a flag, an env var, the TOML key, or 'default'."""
        return dict(self.sources).get(name, "default")

    def selector(self) -> Selector:
        """The variant selector, its messages naming where build/skip/only came from."""
        return Selector(
            build=self.build,
            skip=self.skip,
            only=self.only,
            build_label=self._label("build"),
            skip_label=self._label("skip"),
            only_label="--only",
        )

    def _label(self, name: str) -> str:
        source = self.source(name)
        return name if source == "default" else source

    def arch_filter(self, host: Arch | None = None) -> tuple[Arch, ...] | None:
        """The arches to plan for, None for all. ``--only`` disables the filter; ``auto`` and
        ``native`` mean ``host`` (default: this machine's arch)."""
        if self.only is not None or "all" in self.archs:
            return None
        out: list[Arch] = []
        for item in self.archs:
            arch = (host or Arch.host()) if item in ("auto", "native") else Arch(item)
            if arch not in out:
                out.append(arch)
        return tuple(out)


DEFAULT_OPTIONS = Options()



def resolve_options(
    project_dir: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, Any] | None = None,
) -> Options:
    """Resolve the options of the kernel in ``project_dir`` (its ``pyproject.toml``, if any),
    the environment ``env`` (default ``os.environ``) and the parsed flags ``cli`` (option name
    -> value; None or absent means the flag was not given)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    if project_dir is not None:
        pyproject = Path(project_dir) / PYPROJECT
        if pyproject.is_file():
            for name, (value, label) in _from_pyproject(pyproject).items():
                values[name], sources[name] = value, label

    environ = os.environ if env is None else env
    for name, (_, var, _) in _NAMES.items():
        if var is None:
            continue
        raw = environ.get(var, "")
        if raw.strip():
            values[name] = _convert(name, raw, var, None, Path.cwd())
            sources[name] = var

    for name, raw in (cli or {}).items():
        if name not in _NAMES:
            raise UsageError(f"unknown option {name!r}", hint=f"known options: {', '.join(_NAMES)}")
        if raw is None or (isinstance(raw, (list, tuple)) and not raw):
            continue
        flag = _NAMES[name][2]
        values[name] = _convert(name, raw, flag, None, Path.cwd())
        sources[name] = flag

    if values.get("only") is not None:
        for ignored in ("build", "skip", "archs"):
            values.pop(ignored, None)
            sources.pop(ignored, None)
    options = Options(**values, sources=tuple(sorted(sources.items())))
    options.selector()  # validate patterns now, naming their source
    return options


# Sub-tables of [tool.kernelwheel] that belong to other commands, not to build options.
_OTHER_COMMANDS_KEYS = frozenset({"dependencies"})


def _from_pyproject(pyproject: Path) -> dict[str, tuple[Any, str]]:
    data = read_toml(pyproject)
    table = data.get("tool", {}).get("kernelwheel")
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ProjectError(
            "expected a table", file=pyproject, key=TOOL_TABLE, hint="write [tool.kernelwheel]"
        )
    out: dict[str, tuple[Any, str]] = {}
    for key, raw in table.items():
        if key in _OTHER_COMMANDS_KEYS:
            continue  # read by another command (kernelwheel lock / download)
        dotted = f"{TOOL_TABLE}.{key}"
        name = _TOML_KEYS.get(key)
        if name is None:
            close = difflib.get_close_matches(key.replace("_", "-"), list(_TOML_KEYS), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            if key == "only":
                hint = "--only is a command-line flag only; "
            raise ProjectError(
                f"unknown key {key!r}",
                file=pyproject,
                key=dotted,
                hint=hint + f"keys: {', '.join(_TOML_KEYS)}",
            )
        value = _convert(name, raw, f"[tool.kernelwheel] {key}", pyproject, pyproject.parent)
        out[name] = (value, f"[tool.kernelwheel] {key}")
    return out


def _convert(name: str, raw: Any, label: str, file: Path | None, base: Path) -> Any:
    """Check and convert one raw value (TOML value, env string, or CLI value)."""

    def fail(message: str, hint: str) -> Exception:
        if file is not None:
            return ProjectError(
                message, file=file, key=f"{TOOL_TABLE}.{_NAMES[name][0]}", hint=hint
            )
        return UsageError(f"{label}: {message}", hint=hint)

    converter = _CONVERTERS[name]
    return converter(raw, fail, base)


_Fail = Callable[[str, str], Exception]


def _strings(raw: Any, fail: _Fail, example: str) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, Sequence) and all(isinstance(item, str) for item in raw):
        return list(raw)
    raise fail(f"expected a string or a list of strings, got {raw!r}", f"e.g. {example}")


def _patterns(raw: Any, fail: _Fail, base: Path, *, allow_empty: bool = False) -> tuple[str, ...]:
    items = [p for text in _strings(raw, fail, "'torch2{13,14}-*'") for p in split_patterns(text)]
    if not items and not allow_empty:
        raise fail("lists no pattern", "give at least one glob, e.g. 'torch214-*' (or '*')")
    for pattern in items:
        try:
            expand_braces(pattern)
        except UsageError as exc:
            raise fail(exc.message, exc.hint or "") from None
    return tuple(items)


def _skip(raw: Any, fail: _Fail, base: Path) -> tuple[str, ...]:
    return _patterns(raw, fail, base, allow_empty=True)


def _archs(raw: Any, fail: _Fail, base: Path) -> tuple[str, ...]:
    texts = _strings(raw, fail, "'x86_64 aarch64'")
    items = [t for text in texts for t in text.replace(",", " ").split()]
    if not items:
        raise fail("lists no arch", "use all, auto, or x86_64/aarch64")
    valid = (*ARCH_KEYWORDS, *(a.value for a in Arch))
    for item in items:
        if item not in valid:
            close = difflib.get_close_matches(item.lower(), valid, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise fail(f"unknown arch {item!r}", hint + f"use one of: {', '.join(valid)}")
    return tuple(dict.fromkeys(items))


def _only(raw: Any, fail: _Fail, base: Path) -> str:
    if not isinstance(raw, str) or not raw.strip() or len(raw.split()) != 1:
        raise fail(
            f"expected one variant name, got {raw!r}", "e.g. torch214-cxx11-cu130-x86_64-linux"
        )
    return raw.strip()


def _path(raw: Any, fail: _Fail, base: Path) -> Path:
    if isinstance(raw, Path):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        raise fail(f"expected a path, got {raw!r}", "e.g. 'wheelhouse'")
    path = Path(raw).expanduser()
    return path if path.is_absolute() else base / path


def _jobs(raw: Any, fail: _Fail, base: Path) -> int | None:
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return None
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and raw.strip().isdigit():
        value = int(raw)
    if value is None or value < 1:
        raise fail(f"expected a positive integer or 'auto', got {raw!r}", "e.g. 4 or auto")
    return value


_CONVERTERS: dict[str, Callable[[Any, _Fail, Path], Any]] = {
    "build": _patterns,
    "skip": _skip,
    "archs": _archs,
    "only": _only,
    "recipes": _path,
    "output_dir": _path,
    "cache_dir": _path,
    "jobs": _jobs,
}
