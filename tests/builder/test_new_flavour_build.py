"""Opt-in (KERNELWHEEL_OPTIN=1 and the ``optin`` marker): a real build of a new flavour, the
example kernel for torch 2.15.0 cu132 (PyPI's torch 2.15.0 and the CUDA 13.2 nvcc wheels of
recipes/cuda.toml, ~4 GB of downloads), checked as a release would check it: its name, its tag,
the CUDA it was compiled with and `kernelwheel check`.

pip's configuration is left out for this build (PIP_CONFIG_FILE=/dev/null), as a machine whose
pip is capped below torch 2.15 (this project's development machines) would not install it.
The wheel meets manylinux_2_28 where the host's glibc is 2.28 (the release's build image); on a
newer host it is kept as linux_x86_64 (--best-effort), as there the compiler links against that
glibc (measured on glibc 2.36: dlopen/dlclose@GLIBC_2.34 in the torch 2.15 cu132 object).
"""

from __future__ import annotations

import os
import platform
import zipfile
from pathlib import Path

import pytest
from support.builds import IMG2GRAY

from kernelwheel.cli import main

OPTIN = os.environ.get("KERNELWHEEL_OPTIN") == "1"
VARIANT = "torch215-cxx11-cu132-x86_64-linux"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.optin,
    pytest.mark.skipif(not OPTIN, reason="opt-in: set KERNELWHEEL_OPTIN=1 (downloads ~4 GB)"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86_64 variant"),
]


def test_torch_215_cu132_builds_with_the_cuda_132_toolchain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no cap on torch
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("KERNELWHEEL_NO_CCACHE", "1")  # compile for real: no reuse, no ccache
    out = tmp_path / "wheelhouse"
    old_glibc = tuple(int(p) for p in platform.libc_ver()[1].split(".")[:2]) <= (2, 28)
    args = ["build", str(IMG2GRAY), "--only", VARIANT, "--output-dir", str(out)]
    code = main(args if old_glibc else [*args, "--best-effort"])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-4000:]
    (wheel,) = out.glob("*.whl")
    assert wheel.name.startswith("img2gray-") and "+torch2.15.cu132.cxx11-cp310-abi3-" in wheel.name
    platform_tag = "manylinux_2_28_x86_64" if old_glibc else "linux_x86_64"
    assert wheel.name.endswith(f"-{platform_tag}.whl")
    # the environment step names torch and the toolkit: the nvcc 13.2 wheels the recipe pins
    shown = captured.out + captured.err
    assert "torch 2.15.0+cu132" in shown and "CUDA 13.2 at " in shown
    assert "compile skipped" not in (out / "logs" / f"{VARIANT}.log").read_text()
    with zipfile.ZipFile(wheel) as zf:
        requires = [
            line
            for name in zf.namelist()
            if name.endswith(".dist-info/METADATA")
            for line in zf.read(name).decode().splitlines()
            if line.startswith("Requires-Dist: torch")
        ]
    assert requires == ["Requires-Dist: torch==2.15.*"]
    if old_glibc:  # kernelwheel check holds a wheel to manylinux_2_28, which a newer host misses
        assert main(["check", str(wheel)]) == 0
