"""docs/options.md, data/options.toml and the flags stay in step: the page's table is made
from the table (scripts/options_doc.py); every option is documented with its TOML key,
environment variable and flag, no row documents an option that does not exist, and every
documented flag is one `kernelwheel build` accepts."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from types import ModuleType

import pytest

from kernelwheel.cli import make_parser
from kernelwheel.errors import KernelwheelError
from kernelwheel.plan.options import DEFAULT_OPTIONS, OPTIONS, OptionDef, Options, _load_options

DOC = Path(__file__).resolve().parents[2] / "docs" / "options.md"
SCRIPT = DOC.parents[1] / "scripts" / "options_doc.py"


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


def test_every_short_form_of_a_build_flag_is_documented() -> None:
    """`kernelwheel build --help` shows ``-o`` and ``-j`` (the README uses ``-j auto``): the
    table's flag cell shows each one as --help does, ``--jobs N, -j N``."""
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    build = sub.choices["build"]  # type: ignore[index]
    cells = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        parts = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(parts) == 5 and parts[2].startswith("`--"):
            cells[parts[2].strip("`").split()[0]] = parts[2]
    shorts = 0
    for action in build._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if not long or long[0] not in cells:
            continue
        for short in (s for s in action.option_strings if not s.startswith("--")):
            shorts += 1
            value = f" {action.metavar}" if action.metavar else ""
            assert f", {short}{value}`" in cells[long[0]], (short, cells[long[0]])
    assert shorts >= 2


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("options_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_is_made_from_options_toml() -> None:
    """Issue 40 item 3: the page's table is exactly what scripts/options_doc.py makes from
    data/options.toml; after an edit of either, `python scripts/options_doc.py` rewrites it."""
    page = DOC.read_text(encoding="utf-8")
    assert _script().render(page) == page, "run: python scripts/options_doc.py"


def test_the_script_puts_back_a_drifted_row_and_check_fails_on_it(tmp_path: Path) -> None:
    page = tmp_path / "options.md"
    good = DOC.read_text(encoding="utf-8")
    page.write_text(good.replace("| `plat` |", "| `platform` |"), encoding="utf-8")
    check = [sys.executable, str(SCRIPT), "--check", str(page)]
    assert subprocess.run(check, capture_output=True).returncode == 1
    assert subprocess.run([sys.executable, str(SCRIPT), str(page)]).returncode == 0
    assert page.read_text(encoding="utf-8") == good
    assert subprocess.run(check, capture_output=True).returncode == 0


def test_each_flag_is_made_from_its_row() -> None:
    """The flags of `kernelwheel build` are the table's: name, short form, value, repeatable,
    on/off direction, the variable named in its help."""
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    build = sub.choices["build"]  # type: ignore[index]
    by_dest = {a.dest: a for a in build._actions}
    for option in OPTIONS:
        action = by_dest[option.name]
        assert action.option_strings[0] == option.flag
        assert (option.short in action.option_strings) if option.short else True
        assert action.metavar == option.metavar
        assert isinstance(action, argparse._AppendAction) == option.repeat
        assert action.default is None  # "not given": the lower layers show through
        if option.env:
            assert f"[env: {option.env}" in (action.help or "")
    assert by_dest["repair"].const is False and by_dest["no_ccache"].const is True


def test_every_options_field_has_one_row_and_on_off_defaults_are_the_real_ones() -> None:
    names = [o.name for o in OPTIONS]
    assert sorted(names) == sorted(f.name for f in fields(Options) if f.name != "sources")
    assert len(set(names)) == len(names)
    for option in OPTIONS:  # an on/off row's default is made from its flag: --no-X, true
        if option.metavar is None:
            real = getattr(DEFAULT_OPTIONS, option.name)
            assert option.default == f"`{str(real).lower()}`", option.name


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ('convert = "path"\nhelp = "h"\nmetvar = "X"', "metvar"),
        ('metavar = "DIR"\nhelp = "h"', "no converter 'recipes'"),
        ('convert = "path"\nmetavar = "DIR"', "help"),
    ],
)
def test_a_bad_row_names_its_file_and_key(row: str, expected: str) -> None:
    with pytest.raises(KernelwheelError, match=expected) as info:
        _load_options(f"[selection.recipes]\n{row}\n", "options.toml")
    assert "options.toml" in str(info.value)


def test_the_cuda_home_default_names_every_place_a_build_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--cuda-home`'s default (its --help and docs/options.md's row) names each origin of
    toolchain/envs' one search, in its order, after the environment's toolchain packages."""
    from kernelwheel.toolchain import envs

    monkeypatch.setenv("CUDA_HOME", "/opt/cuda")
    monkeypatch.setattr(envs.shutil, "which", lambda name: "/opt/bin/nvcc")
    named = {"CUDA_HOME": "`CUDA_HOME`", "recipe system-paths": "`system-paths`", "PATH": "`PATH`"}
    expected = ["the toolchain packages"]
    for origin, path in envs.installed_toolkits("12.6", [Path("/srv/cuda-12.6")]):
        expected.append(named.get(origin) or f"`{str(path).replace('12.6', 'X.Y')}`")
    default = next(o for o in OPTIONS if o.name == "cuda_home").default
    assert all(text in default for text in expected), (default, expected)
    found = [default.index(text) for text in expected]
    assert found == sorted(found), (default, expected)
