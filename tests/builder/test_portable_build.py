"""Portable by construction, for real: tests/fixtures/portable_calls (C++ calling std::log2/exp/pow
on doubles, strtol, sscanf, std::stoi, std::cout) built here as a torch 2.13 CPU variant gives a
manylinux_2_28 wheel that `kernelwheel check` passes, whose imports are the old versions, and
whose ops compute what Python computes on fresh random inputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT, build_env
from support.layered import LayeredVenv
from support.wheelread import read_wheel

from kernelwheel.abi._elf import read_elf
from kernelwheel.abi.checker import check_wheel
from kernelwheel.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "portable_calls"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The fixture's CPU variant: (wheelhouse, cache)."""
    root = tmp_path_factory.mktemp("portable")
    wheelhouse, cache = root / "wheelhouse", root / "cache"
    python = build_env(CPU_VARIANT).python  # torch 2.13.0+cpu
    args = ["build", str(FIXTURE), "--variant", CPU_VARIANT, "--python", str(python)]
    assert main([*args, "--output-dir", str(wheelhouse), "--cache-dir", str(cache)]) == 0
    return wheelhouse, cache


@pytest.mark.integration
def test_host_calls_give_a_manylinux_wheel_that_computes_right(
    built: tuple[Path, Path], venv_for: Callable[..., LayeredVenv]
) -> None:
    wheelhouse, cache = built
    (wheel,) = wheelhouse.glob("*.whl")
    assert wheel.name.endswith("-cp310-abi3-manylinux_2_28_x86_64.whl"), wheel.name
    assert check_wheel(wheel).ok
    assert main(["check", str(wheel)]) == 0

    # Compiled with the header made from this machine's libc, forced into every source.
    stage = cache / "work" / "portable_calls" / CPU_VARIANT
    spec = json.loads((stage / "compile.json").read_text())
    header = stage / "include" / "kernelwheel_abi.h"
    flags = spec["cxx_flags"]
    assert flags[flags.index("-include") + 1] == str(header)
    assert '__asm__(".symver log2,log2@GLIBC_2.2.5");' in header.read_text()
    (so_name,) = [n for n in read_wheel(wheel).files if n.endswith(".abi3.so")]
    so = stage / "so.abi3.so"
    so.write_bytes(read_wheel(wheel).files[so_name])
    imports = {s.name: s.version for s in read_elf(so).symbols if not s.defined}
    for name in ("log2", "exp", "pow"):  # GLIBC_2.29 by default on this glibc (>= 2.29)
        assert imports[name] == "GLIBC_2.2.5", (name, imports[name])

    venv = venv_for(CPU_VARIANT)  # torch 2.13.0+cpu
    venv.pip("--no-index", "--find-links", str(wheelhouse), "portable-calls")
    out = venv.run(str(FIXTURE / "tests" / "test_portable_calls.py")).stdout
    assert out.splitlines()[-1] == "OK cpu", out
