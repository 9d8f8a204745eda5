"""``kernelwheel index`` with stable-ABI, tvm-ffi and noarch wheels: which per-torch and flavour
indexes list them (no pip; the pip side is tests/wheels/test_index.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.tags import Tag

from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.index import build_index, flavours_of

X86 = "manylinux_2_28_x86_64"


def _wheel(out: Path, name: str, version: str, tag: Tag) -> str:
    spec = WheelSpec(name, version, tag, {f"{name}/__init__.py": b""})
    return write_wheel(spec, out).name


@pytest.fixture(scope="module")
def flavours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    root = tmp_path_factory.mktemp("kinds")
    out = root / "wh"
    abi3 = Tag("cp39", "abi3", X86)
    made = {
        "k213": _wheel(out, "k", "1.0.0+torch2.13.cu130.cxx11", abi3),
        "k214": _wheel(out, "k", "1.0.0+torch2.14.cu130.cxx11", abi3),
        "k214cpu": _wheel(out, "k", "1.0.0+torch2.14.cpu.cxx11", abi3),
        "s210": _wheel(out, "k", "2.0.0+torch2.10.stable.cu130", abi3),
        "s215": _wheel(out, "k", "2.0.0+torch2.15.stable.cu130", abi3),
        "s210cu128": _wheel(out, "k", "2.0.0+torch2.10.stable.cu128", abi3),
        "tvm": _wheel(out, "t", "1.0.0+tvmffi0.1.cu130", Tag("py3", "none", X86)),
        "tvmcpu": _wheel(out, "t", "1.0.0+tvmffi0.1.cpu", Tag("py3", "none", X86)),
        "noarch": _wheel(out, "n", "1.0.0", Tag("py3", "none", "any")),
    }
    result = build_index(out, root / "site")
    by_file = {v: k for k, v in made.items()}
    return {f: {by_file[w] for w in ws} for f, ws in result.flavours.items()}


def test_a_stable_abi_wheel_is_in_every_per_torch_index_at_or_above_its_floor(
    flavours: dict[str, set[str]],
) -> None:
    assert flavours["torch2.14/cu130"] == {"k214", "s210", "tvm", "noarch"}
    assert flavours["torch2.13/cu130"] == {"k213", "s210", "tvm", "noarch"}
    assert flavours["torch2.10/cu130"] == {"s210", "tvm", "noarch"}
    assert flavours["torch2.15/cu130"] == {"s215", "tvm", "noarch"}  # the newest floor <= 2.15
    assert flavours["torch2.10/cu128"] == {"s210cu128", "noarch"}  # same flavour only
    assert flavours["torch2.14/cpu"] == {"k214cpu", "tvmcpu", "noarch"}


def test_tvm_ffi_and_noarch_wheels_go_into_the_flavours_they_serve(
    flavours: dict[str, set[str]],
) -> None:
    assert flavours["cu130"] == {"k213", "k214", "s210", "s215", "tvm", "noarch"}
    assert flavours["cpu"] == {"k214cpu", "tvmcpu", "noarch"}
    assert flavours["cu128"] == {"s210cu128", "noarch"}
    assert flavours_of(f"t-1.0.0+tvmffi0.1.cu130-py3-none-{X86}.whl")[0] == "cu130"
