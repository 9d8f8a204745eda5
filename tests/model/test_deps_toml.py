"""Tests for kernelwheel.model.deps: the bundled deps.toml and its validation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kernelwheel.model.deps import DEPS_TOML, Provider, load_deps, parse_deps
from kernelwheel.model.recipes import RecipeError

REPO = Path(__file__).resolve().parents[2]
HASH = "c" * 64
# The names kernel-builder's Dependency enum accepts (kernels-data src/config/deps.rs), and the
# CUTLASS release its nix-builder pins for each.
KERNEL_BUILDER = {
    "torch": None,
    "cutlass_2_10": "2.10.0",
    "cutlass_3_5": "3.5.1",
    "cutlass_3_6": "3.6.0",
    "cutlass_3_8": "3.8.0",
    "cutlass_3_9": "3.9.2",
    "cutlass_4_0": "4.0.0",
    "cutlass_4_4": "4.4.2",
    "cutlass_4_5": "4.5.2",
    "sycl_tla": None,
    "metal-cpp": None,
}


def mini() -> dict[str, Any]:
    return {
        "schema": 1,
        "deps": {
            "torch": {"provider": "environment"},
            "cutlass_3_8": {
                "provider": "headers",
                "library": "cutlass",
                "version": "3.8.0",
                "pypi": {
                    "name": "nvidia-cutlass",
                    "version": "3.8.0.0",
                    "sha256": HASH,
                    "include": ["cutlass_library/source/include"],
                },
            },
            "cutlass_3_9": {"provider": "headers", "library": "cutlass", "version": "3.9.2"},
            "sycl_tla": {"provider": "unsupported", "reason": "no SYCL compiler"},
        },
    }


def test_bundled_table_covers_kernel_builders_names_and_releases() -> None:
    table = load_deps()
    assert set(table.names) == set(KERNEL_BUILDER)
    for name, release in KERNEL_BUILDER.items():
        dep = table.get(name)
        assert dep is not None and dep.version == release, name
    torch = table.get("torch")
    assert torch is not None and torch.provider is Provider.ENVIRONMENT
    for name in ("sycl_tla", "metal-cpp"):
        dep = table.get(name)
        assert dep is not None and dep.provider is Provider.UNSUPPORTED and dep.reason


def test_bundled_pins_are_the_pypi_releases_that_exist() -> None:
    """nvidia-cutlass on PyPI has 3.5.1.0, 3.6.0.0 and 3.8.0.0 of kernel-builder's releases."""
    table = load_deps()
    pinned = {d.name: d.wheel.version for d in table.deps if d.wheel is not None}
    assert pinned == {"cutlass_3_5": "3.5.1.0", "cutlass_3_6": "3.6.0.0", "cutlass_3_8": "3.8.0.0"}
    dep = table.get("cutlass_3_8")
    wheel = dep.wheel if dep is not None else None
    assert wheel is not None and wheel.requirement_line == (
        "nvidia-cutlass==3.8.0.0 --hash=sha256:"
        "013147221a63500205da233ae02e6262463917f3fe39cb09efbca37bfd1c39f9"
    )
    assert wheel.include == (
        "cutlass_library/source/include",
        "cutlass_library/source/tools/util/include",
    )


def test_a_recipes_folder_without_deps_toml_uses_the_bundled_one(tmp_path: Path) -> None:
    assert load_deps(tmp_path).names == load_deps().names
    (tmp_path / DEPS_TOML).write_text(
        'schema = 1\n[deps.torch]\nprovider = "environment"\n', encoding="utf-8"
    )
    table = load_deps(tmp_path)
    assert table.names == ("torch",) and table.origin == str(tmp_path / DEPS_TOML)
    (tmp_path / DEPS_TOML).write_text("[deps\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="invalid TOML"):
        load_deps(tmp_path)


def test_suggests_the_closest_name() -> None:
    hint = parse_deps(mini()).suggest("cutlass-3_8")
    assert hint.startswith("did you mean 'cutlass_3_8'?") and "sycl_tla" in hint


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(RecipeError) as info:
        parse_deps(data, origin="recipes/deps.toml")
    return str(info.value)


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(mini())
    table = data
    for key in path[:-1]:
        table = table[key]
    if value is None:
        del table[path[-1]]
    else:
        table[path[-1]] = value
    return data


PYPI = ("deps", "cutlass_3_8", "pypi")


@pytest.mark.parametrize(
    ("path", "value", "key", "message"),
    [
        (("schema",), 2, "schema", "schema must be 1"),
        (
            ("deps", "Bad Name"),
            {"provider": "environment"},
            'deps."Bad Name"',
            "invalid dependency",
        ),
        (("deps", "torch", "provider"), "pip", "deps.torch.provider", "unknown provider"),
        (("deps", "torch", "version"), "1.0.0", "deps.torch.version", "takes no version"),
        (("deps", "sycl_tla", "reason"), None, "deps.sycl_tla.reason", "missing required key"),
        (("deps", "cutlass_3_9", "library"), "cccl", "deps.cutlass_3_9.library", "unknown lib"),
        (("deps", "cutlass_3_9", "version"), "3.9", "deps.cutlass_3_9.version", "MAJOR.MINOR"),
        (("deps", "cutlass_3_9", "reason"), "x", "deps.cutlass_3_9.reason", "takes no reason"),
        (("deps", "cutlass_3_9", "pypi"), "yes", "deps.cutlass_3_9.pypi", "expected a table"),
        ((*PYPI, "version"), "3.9.0.0", f"{'.'.join(PYPI)}.version", "not a PyPI release of"),
        ((*PYPI, "sha256"), "ABC", f"{'.'.join(PYPI)}.sha256", "not a sha256"),
        ((*PYPI, "include"), [], f"{'.'.join(PYPI)}.include", "at least one folder"),
        ((*PYPI, "include"), ["../x"], f"{'.'.join(PYPI)}.include", "relative POSIX path"),
        ((*PYPI, "includes"), ["x"], f"{'.'.join(PYPI)}.includes", "did you mean 'include'"),
        ((*PYPI, "include"), "x", f"{'.'.join(PYPI)}.include", "expected an array of strings"),
        (("deps", "cutlass_3_9", "version"), "", "deps.cutlass_3_9.version", "must not be empty"),
        (("deps",), None, "deps", "missing required key"),
    ],
)
def test_each_mistake_names_file_key_and_fix(
    path: tuple[str, ...], value: Any, key: str, message: str
) -> None:
    text = _error(_with(path, value))
    assert text.startswith(f"recipes/deps.toml: {key}: "), text
    assert message in text and "fix:" in text
