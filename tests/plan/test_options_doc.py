"""docs/options.md and plan.options.OPTIONS stay in step: every option is documented with its
TOML key, environment variable and flag, no row documents an option that does not exist, and
every documented flag is one `kernelwheel build` accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelwheel.cli import make_parser
from kernelwheel.plan.options import DEFAULT_OPTIONS, OPTIONS, OptionDef

DOC = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def _cell(text: str) -> str | None:
    """`build` -> build, `--build GLOB` -> --build, — -> None."""
    text = text.strip()
    if text == "—":
        return None
    match = re.fullmatch(r"`([^` ]+)(?: [^`]*)?`", text)
    assert match, f"docs/options.md: cell {text!r} is neither `code` nor —"
    return match.group(1)


def documented() -> list[tuple[str | None, str | None, str, str, str]]:
    """(TOML key, env var, flag, default, meaning) per row of the 'All options' table."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index("## All options")
    rows = []
    for line in lines[start:]:
        if line.startswith("## ") and rows:
            break
        if not line.startswith("| `") and not line.startswith("| —"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 5, f"docs/options.md: {line!r} does not have 5 columns"
        flag = _cell(cells[2])
        assert flag is not None
        rows.append((_cell(cells[0]), _cell(cells[1]), flag, cells[3], cells[4]))
    return rows


def test_every_option_is_documented_and_nothing_else() -> None:
    rows = documented()
    expected = [(o.toml, o.env, o.flag) for o in OPTIONS]
    assert sorted(map(str, ((t, e, f) for t, e, f, _, _ in rows))) == sorted(map(str, expected))
    assert len(rows) == len(OPTIONS)  # no option twice


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_each_row_has_a_default_and_a_meaning(option: OptionDef) -> None:
    row = next(r for r in documented() if r[2] == option.flag)
    assert row[3] and row[4], row


def test_documented_defaults_of_simple_options_are_the_real_ones() -> None:
    rows = {flag: default for _, _, flag, default, _ in documented()}
    assert rows["--plat"] == f"`{DEFAULT_OPTIONS.plat}`"
    assert rows["--local-version-style"] == f"`{DEFAULT_OPTIONS.local_version_style.value}`"
    assert rows["--output-dir"] == f"`{DEFAULT_OPTIONS.output_dir}`"
    assert rows["--no-index"] == "`false`" and not DEFAULT_OPTIONS.no_index
    assert rows["--no-repair"] == "`true`" and DEFAULT_OPTIONS.repair
    assert rows["--best-effort"] == "`false`" and not DEFAULT_OPTIONS.best_effort
    assert rows["--jobs"] == "`auto`" and DEFAULT_OPTIONS.jobs is None


def test_every_documented_flag_is_a_build_flag() -> None:
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    build = sub.choices["build"]  # type: ignore[index]
    known = {s for action in build._actions for s in action.option_strings}
    for _, _, flag, _, _ in documented():
        assert flag in known, f"{flag} is documented but 'kernelwheel build' does not take it"
