"""Choose variants by Hub name, the way cibuildwheel chooses build identifiers (docs/building.md).
A selector that matches nothing is a UsageError listing the names that exist, so a typo never
silently builds nothing."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import bracex

from ..errors import UsageError

_SHOWN = 8  # left-out names listed in a message before "and N more"
MAX_EXPANSION = 1000  # patterns one selector may expand to
# Reasons every plan has (a recipe of a backend the project does not build): true, but never
# why a plan is empty; shown after the others.
_EXPECTED = "not in the project's backends"


def split_patterns(text: str) -> tuple[str, ...]:
    """Split a selector string on whitespace (as env vars and TOML strings write them)."""
    return tuple(text.split())


@functools.lru_cache(maxsize=256)
def expand_braces(pattern: str) -> tuple[str, ...]:
    """``{a,b}`` alternatives (nested) and ``{0..4}`` ranges expanded, without duplicates;
    unbalanced braces, or more than :data:`MAX_EXPANSION` patterns (exponential in the number
    of groups), are a UsageError."""
    depth = 0
    for char in pattern:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            break
    if depth != 0:
        raise UsageError(
            f"selector {pattern!r} has unbalanced braces",
            hint="write alternatives as {a,b}, e.g. 'torch2{13,14}-*'",
        )
    try:
        expanded = bracex.expand(pattern, limit=MAX_EXPANSION)
    except bracex.ExpansionLimitException:
        raise UsageError(
            f"selector {pattern[:80]!r}{'…' if len(pattern) > 80 else ''} expands to more than "
            f"{MAX_EXPANSION} patterns",
            hint="use fewer brace groups; a '*' or '?' matches many names at once",
        ) from None
    return tuple(dict.fromkeys(expanded))


@dataclass(frozen=True)
class Selector:
    """``build``/``skip`` globs and ``only``; the labels name where each came from
    (``--build``, ``KERNELWHEEL_BUILD``...) in error messages."""

    build: tuple[str, ...] = ("*",)
    skip: tuple[str, ...] = ()
    only: str | None = None
    build_label: str = "build"
    skip_label: str = "skip"

    def __post_init__(self) -> None:
        for label, patterns in ((self.build_label, self.build), (self.skip_label, self.skip)):
            if isinstance(patterns, str):
                raise UsageError(
                    f"{label} must be a sequence of patterns, got the string {patterns!r}",
                    hint="split it with selector.split_patterns()",
                )
            for pattern in patterns:
                if not pattern or pattern != pattern.strip():
                    raise UsageError(
                        f"{label} has an empty or blank-padded pattern {pattern!r}",
                        hint="separate patterns with spaces, e.g. 'torch214-* torch213-*'",
                    )
                expand_braces(pattern)  # validates braces now, not at first use
        if not self.build:
            raise UsageError(f"{self.build_label} lists no pattern", hint="use '*' for all")
        if self.only is not None and not self.only.strip():
            raise UsageError("--only is empty", hint="give one exact variant name")

    @staticmethod
    def _match(pattern: str, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in expand_braces(pattern))

    def matches(self, name: str) -> bool:
        return self.why_not(name) is None

    def why_not(self, name: str) -> str | None:
        """Why ``name`` is not selected, or None when it is."""
        if self.only is not None:
            return None if name == self.only else f"not --only {self.only}"
        if not any(self._match(p, name) for p in self.build):
            return f"not matched by {self.build_label} {' '.join(self.build)!r}"
        skipped = next((p for p in self.skip if self._match(p, name)), None)
        return None if skipped is None else f"skipped by {self.skip_label} {skipped!r}"

    def select(
        self, names: Sequence[str], *, left_out: Mapping[str, str] | None = None
    ) -> tuple[str, ...]:
        """The selected ``names``, in order; a selector matching nothing is a UsageError naming
        the ``left_out`` names (-> their reasons) it matches."""
        left_out = left_out or {}
        if not names:
            raise UsageError(
                "no variant to select from: the kernel's plan is empty"
                + (f" ({len(left_out)} left out)" if left_out else ""),
                hint=_why_empty(left_out),
            )
        if self.only is not None:
            if self.only in names:
                return (self.only,)
            reason = left_out.get(self.only)
            why = "is not a variant of this kernel" if reason is None else f"was left out: {reason}"
            raise UsageError(
                f"--only {self.only!r} {why}", hint=f"choose one of: {', '.join(names)}"
            )
        for pattern in self.build:
            if any(self._match(pattern, n) for n in names):
                continue
            hit = [n for n in left_out if self._match(pattern, n)]
            if hit:
                shown = "; ".join(f"{n} ({left_out[n]})" for n in hit[:_SHOWN])
                more = f", and {len(hit) - _SHOWN} more" if len(hit) > _SHOWN else ""
                raise UsageError(
                    f"{self.build_label} pattern {pattern!r} matches only variants that were "
                    f"left out",
                    hint=f"left out: {shown}{more}; available: {', '.join(names)}",
                )
            raise UsageError(
                f"{self.build_label} pattern {pattern!r} matches no variant",
                hint=_comma_hint(self.build_label, pattern) + f"available: {', '.join(names)}",
            )
        chosen = tuple(n for n in names if self.matches(n))
        if not chosen:
            raise UsageError(
                f"{self.build_label} {' '.join(self.build)!r} with {self.skip_label} "
                f"{' '.join(self.skip)!r} selects no variant",
                hint=f"narrow {self.skip_label}; available: {', '.join(names)}",
            )
        return chosen


def _comma_hint(label: str, pattern: str) -> str:
    """A ``,`` outside braces is read as part of one name: say how to give several."""
    bare = pattern
    while bare != (bare := re.sub(r"\{[^{}]*\}", "", bare)):
        pass
    if "," not in bare:
        return ""
    first, second = pattern.split(",")[:2]
    several = (
        f"{label} {first} {label} {second}"
        if label == "--variant"
        else f"{label} '{first} {second}'"
    )
    return (
        f"a ',' outside braces is part of the one pattern: give each pattern on its own "
        f"({several}) or join alternatives in braces, '{{A,B}}'; "
    )


def _why_empty(left_out: Mapping[str, str]) -> str:
    """Why nothing is left: each kind of reason once, with its count and an example; the
    backends the project does not build last."""
    if not left_out:
        return "the recipes hold no variant for this project"
    groups: dict[str, list[str]] = {}
    for name, reason in left_out.items():
        groups.setdefault(re.sub(r"[0-9]+(?:\.[0-9]+)*", "#", reason), []).append(name)
    ordered = sorted(
        groups.values(), key=lambda names: (_EXPECTED in left_out[names[0]], -len(names))
    )
    parts = [
        f"{len(names)} variant(s): {left_out[names[0]]} (e.g. {names[0]})" for names in ordered
    ]
    return (
        "left out: "
        + "; ".join(parts[:_SHOWN])
        + (f"; and {len(parts) - _SHOWN} other reason(s)" if len(parts) > _SHOWN else "")
    )
