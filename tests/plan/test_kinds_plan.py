"""Planning the kinds that are not one wheel per torch: a [tvm-ffi] project's tvm-ffi variants
and a pure-Python project's torch-<backend> variants (built into one wheel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.kinds import (
    NOARCH_BUILD_TOML,
    TVM_FFI_BUILD_TOML,
    write_noarch_project,
    write_tvm_ffi_project,
)
from support.requests import selected_recipes

from kernelwheel.cli import main
from kernelwheel.compat.gpus import Gpus
from kernelwheel.model.capability import parse_all
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Arch
from kernelwheel.plan.defaults import Machine
from kernelwheel.plan.matrix import plan_matrix
from kernelwheel.plan.options import ENV_VARS
from kernelwheel.plan.planning import plan_project


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def test_tvm_ffi_project_plans_one_variant_per_flavour_and_arch(tmp_path: Path) -> None:
    project = load_project(write_tvm_ffi_project(tmp_path / "p"))
    plan = plan_matrix(project, load_recipes())
    assert plan.names == (
        "tvm-ffi01-cpu-x86_64-linux",
        "tvm-ffi01-cpu-aarch64-linux",
        "tvm-ffi01-cu130-x86_64-linux",
        "tvm-ffi01-cu130-aarch64-linux",
    )
    # One backend per variant: the CUDA variant does not compile the CPU kernel.
    assert plan.kernels_for("tvm-ffi01-cpu-x86_64-linux") == ("add_one_cpu",)
    assert plan.kernels_for("tvm-ffi01-cu130-x86_64-linux") == ("add_one_cuda",)
    assert not any(r.variant_name.startswith("torch") for r in plan.rejected)
    assert all(r.tvm_ffi is not None for r in plan.selected)


def test_tvm_ffi_plan_gives_reasons(tmp_path: Path) -> None:
    toml = TVM_FFI_BUILD_TOML.replace('backends = ["cpu", "cuda"]', 'backends = ["cpu", "xpu"]')
    project = load_project(write_tvm_ffi_project(tmp_path / "p", toml))
    plan = plan_matrix(project, load_recipes(), arches=[Arch.X86_64])
    assert plan.names == ("tvm-ffi01-cpu-x86_64-linux",)
    reasons = {r.variant_name: r.reason for r in plan.rejected}
    assert "not among the selected arches" in reasons["tvm-ffi01-cpu-aarch64-linux"]
    assert (
        "backend cuda not in the project's backends (cpu, xpu)"
        in reasons["tvm-ffi01-cu130-x86_64-linux"]
    )
    assert any("backend xpu: the tvm-ffi recipe has no xpu flavour" in n for n in plan.notes)

    toml = TVM_FFI_BUILD_TOML.replace(
        "[kernel.add_one_cuda]", '[general.cuda]\nminver = "13.1"\n\n[kernel.add_one_cuda]'
    )
    project = load_project(write_tvm_ffi_project(tmp_path / "q", toml))
    reasons = {r.variant_name: r.reason for r in plan_matrix(project, load_recipes()).rejected}
    assert "CUDA 13.0 < general cuda minver 13.1" in reasons["tvm-ffi01-cu130-x86_64-linux"]


def test_default_build_of_a_tvm_ffi_project_is_this_machines_variant(tmp_path: Path) -> None:
    root = write_tvm_ffi_project(tmp_path / "p")
    planned = plan_project(root, {})
    gpu = Machine(Arch.X86_64, Gpus(parse_all(["9.0"]), "a test"))
    assert [r.name for r in selected_recipes(planned, machine=gpu)] == [
        "tvm-ffi01-cu130-x86_64-linux"
    ]
    # No GPU: the CPU flavour, which this machine can run.
    none = Machine(Arch.AARCH64, Gpus((), "nvidia-smi: not found"))
    assert [r.name for r in selected_recipes(planned, machine=none)] == [
        "tvm-ffi01-cpu-aarch64-linux"
    ]
    # The variant spelling kernel-builder uses selects it too.
    chosen = [r.name for r in selected_recipes(planned, ["tvm-ffi01-cpu-*"])]
    assert chosen == ["tvm-ffi01-cpu-x86_64-linux", "tvm-ffi01-cpu-aarch64-linux"]


def test_noarch_project_builds_all_backends_by_default(tmp_path: Path) -> None:
    root = write_noarch_project(tmp_path / "p")
    planned = plan_project(root, {})
    assert [r.name for r in selected_recipes(planned)] == ["torch-cpu", "torch-cuda"]
    assert [r.name for r in selected_recipes(planned, ["torch-cuda"])] == ["torch-cuda"]


def test_matrix_json_of_a_tvm_ffi_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_tvm_ffi_project(tmp_path / "p")
    assert main(["matrix", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data["include"][0]
    assert first["name"] == "tvm-ffi01-cpu-x86_64-linux"
    assert first["local_version"] == "tvmffi0.1.cpu"
    assert first["tvm_ffi"] == "0.1.9" and first["torch"] is None
    assert first["kernels"] == ["add_one_cpu"]


def test_matrix_table_of_a_noarch_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_noarch_project(tmp_path / "p", NOARCH_BUILD_TOML)
    assert main(["matrix", str(root)]) == 0
    out = capsys.readouterr().out
    assert "torch-cpu" in out and "torch-cuda" in out
    assert "one py3-none-any wheel" in out
