"""kernelwheel's ABI data files are read through the located reader: a broken file is an
AbiDataError naming the file and key (not a ValueError or a TypeError)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelwheel.abi.policy import AbiDataError, load_kernel_libraries
from kernelwheel.errors import UsageError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from regen_stable_abi import items_from_stable_abi_toml  # noqa: E402


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[provided]\ntorch = ['libtorch.so', 3]\n", "provided.torch: expected an array of str"),
        ('[forbidden]\n"libpython*.so" = 1\n', 'forbidden."libpython*.so": expected a string'),
        ("[toolchain]\nGLIBCXX = []\n", "toolchain.GLIBCXX: expected a table"),
        ("[grafted]\n", "grafted: unknown key 'grafted'"),
        ("[provided\n", "invalid TOML"),
    ],
)
def test_broken_abi_policy_names_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "abi_policy.toml"
    path.write_text(text)
    with pytest.raises(AbiDataError) as info:
        load_kernel_libraries(path)
    assert str(info.value).startswith(f"{path}: ") and expected in str(info.value)
    assert isinstance(info.value, UsageError) and info.value.hint


def test_bundled_abi_policy_loads() -> None:
    libraries = load_kernel_libraries()
    assert libraries.provided_by("libtorch.so") == "torch"
    assert libraries.first_release("GLIBCXX_3.4.29") is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[function.Py_X\n", "stable_abi.toml: invalid TOML"),
        ("[function.Py_X]\nadded = 3.2\n", "function.Py_X.added: expected a string"),
        ("[function.Py_X]\nadded = 'x'\n", "function.Py_X.added: not a Python version: 'x'"),
        ("[data.Py_Y]\nadded = '3.2'\nabi_only = 1\n", "data.Py_Y.abi_only: expected a boolean"),
    ],
)
def test_broken_stable_abi_toml(text: str, expected: str) -> None:
    with pytest.raises(AbiDataError) as info:
        items_from_stable_abi_toml(text)
    assert expected in str(info.value)
