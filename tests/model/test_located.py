"""Tests for kernelwheel._toml.Located: the getters the recipes, [tool.kernelwheel] and
[tool.kernels] readers use (build.toml's are covered in test_build_toml_editions.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kernelwheel._toml import Located
from kernelwheel.errors import ProjectError


def doc(data: dict[str, object], prefix: str = "") -> Located:
    return Located(data, file="f.toml", prefix=prefix)


def message(call: Callable[[], object]) -> str:
    with pytest.raises(ProjectError) as info:
        call()
    return str(info.value)


def test_dotted_keys_are_quoted_where_toml_needs_it() -> None:
    deps = doc({"drbh/img2gray": 1.5}, prefix="tool.kernels.dependencies")
    assert deps.dotted("version") == "tool.kernels.dependencies.version"
    assert deps.dotted("drbh/img2gray") == 'tool.kernels.dependencies."drbh/img2gray"'
    text = message(lambda: deps.string("drbh/img2gray"))
    assert text.startswith('f.toml: tool.kernels.dependencies."drbh/img2gray": expected a string')
    torch = doc({"torch": {"2.14": {"version": "2.14.1"}}}).table("torch")
    assert torch is not None
    release = torch.table("2.14")
    assert release is not None and release.prefix == 'torch."2.14"'


def test_table_hint_and_required_table() -> None:
    table = doc({"deps": "x"}, prefix="tool")
    text = message(lambda: table.table("deps", hint="write [tool.deps] with lines a = 1"))
    assert "tool.deps: expected a table, got a string ('x')" in text
    assert "fix: write [tool.deps] with lines a = 1" in text
    text = message(lambda: table.required_table("other", 'add a [tool.other."1.0"] table'))
    assert "tool.other: missing required key" in text and 'add a [tool.other."1.0"]' in text


def test_table_array() -> None:
    data = {"packages": [{"name": "a"}, {"name": "b"}], "bad": [{}, 3], "one": "x"}
    table = doc(data, prefix="t")
    items = table.table_array("packages")
    assert items is not None and [i.string("name") for i in items] == ["a", "b"]
    assert items[1].dotted("name") == "t.packages[1].name"
    assert table.table_array("missing") is None
    text = message(lambda: table.table_array("bad"))
    assert "t.bad: item 1 is an integer (3), not a table" in text and "[[t.bad]]" in text
    assert "t.one: expected an array of tables, got a string ('x')" in message(
        lambda: table.table_array("one")
    )


def test_nonempty_strings_and_hints() -> None:
    table = doc({"path": " ", "n": 3, "name": ""}, prefix="t")
    assert table.string("path") == " "  # blank strings are allowed unless refused
    text = message(lambda: table.string("path", nonempty=True, hint="a folder, e.g. '../x'"))
    assert "t.path: must not be empty" in text and "a folder, e.g." in text
    text = message(lambda: table.string("n", hint="a folder, e.g. '../x'"))
    assert "expected a string, got an integer (3)" in text and "fix: a folder, e.g." in text
    assert 'fix: quote it: n = "3"' in message(lambda: table.string("n"))
    text = message(lambda: table.required_string("name", 'e.g. name = "x"', nonempty=True))
    assert "t.name: must not be empty" in text and 'e.g. name = "x"' in text
    assert table.required_string("name", "unused") == ""


def test_unique_string_lists_and_string_tables() -> None:
    data = {"arches": ["x86_64", "aarch64", "x86_64"], "forbidden": {"a": "b", "c": 1}}
    table = doc(data, prefix="t")
    assert table.string_list("arches") == ("x86_64", "aarch64", "x86_64")
    text = message(lambda: table.string_list("arches", unique=True))
    assert "t.arches: lists 'x86_64' twice" in text and "remove the duplicate" in text
    assert "t.forbidden.c: expected a string, got an integer (1)" in message(
        lambda: table.string_table("forbidden")
    )
    assert doc({"t": {"a": "b"}}).string_table("t") == {"a": "b"}
    assert doc({}).string_table("t") is None
