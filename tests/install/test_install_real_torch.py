"""``kernelwheel install`` with the real torch 2.13.0+cpu and real img2gray builds: out of a
wheelhouse that also holds the CUDA 13.0 build for torch 2.14, it picks the CPU build for 2.13,
leaves torch alone, and the op runs."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from support.builds import CHECK_OP, CPU_VARIANT, CUDA_VARIANT, Built
from support.layered import LayeredVenv

from kernelwheel.cli import main
from kernelwheel.model.variant import Variant

pytestmark = pytest.mark.integration


def test_install_picks_the_cpu_213_build_and_the_op_runs(
    built: Built,
    venv_for: Callable[..., LayeredVenv],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert {CPU_VARIANT, CUDA_VARIANT} <= set(built.wheels)  # both builds are candidates
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    venv = venv_for(CPU_VARIANT)
    torch_before = venv.installed_version("torch")
    args = ["--find-links", str(built.wheelhouse), "--no-index", "--python", str(venv.python)]
    assert main(["install", "img2gray", *args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (pkg,) = report["packages"]
    assert pkg["wheel"] == built.wheels[CPU_VARIANT].name
    assert report["environment"]["torch"] == torch_before and torch_before.startswith("2.13.0")
    assert any(r["wheel"] == built.wheels[CUDA_VARIANT].name for r in pkg["rejected"])
    local = Variant.parse(CPU_VARIANT).local_version
    assert venv.installed_version("img2gray") == f"0.1.0+{local}"
    assert venv.installed_version("torch") == torch_before
    assert "OK" in venv.run("-c", CHECK_OP).stdout
