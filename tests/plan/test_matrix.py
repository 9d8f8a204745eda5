"""Tests for kernelwheel.plan.matrix (planning over small projects) and `kernelwheel matrix`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kernelwheel.cli import main
from kernelwheel.errors import UsageError
from kernelwheel.model.project import KernelProject, load_project
from kernelwheel.model.recipes import Recipes, load_recipes, parse_recipes
from kernelwheel.model.variant import Arch
from kernelwheel.plan.matrix import MatrixPlan, plan_matrix
from kernelwheel.plan.options import ENV_VARS
from kernelwheel.plan.planning import plan_project
from kernelwheel.plan.selector import Selector

TORCH = '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
CUDA = '[kernel.k_cuda]\nbackend = "cuda"\nsrc = ["csrc/k.cu"]\n'
CPU = '[kernel.k_cpu]\nbackend = "cpu"\nsrc = ["csrc/k.cpp"]\n'


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def project(tmp_path: Path, body: str, *, general: str = "") -> KernelProject:
    """A kernel-builder layout named 'demo' with the given build.toml sections."""
    root = tmp_path / "demo"
    for rel in ("csrc/k.cu", "csrc/k.cpp", "csrc/k2.cu", "torch-ext/torch_binding.cpp"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// x\n")
    (root / "torch-ext/demo").mkdir(parents=True, exist_ok=True)
    (root / "torch-ext/demo/__init__.py").write_text("")
    toml = f'[general]\nname = "demo"\n{textwrap.dedent(general)}\n{textwrap.dedent(body)}'
    (root / "build.toml").write_text(toml)
    return load_project(root)


def recipes() -> Recipes:
    """torch 2.8 (cu126, cu128, cpu) and 2.14 (cu130, cpu), x86_64 and aarch64."""
    cap = ["8.0", "9.0+PTX"]
    hashes = {"x86_64": "a" * 64, "aarch64": "b" * 64}
    both = ["x86_64", "aarch64"]
    torch = {
        "schema": 1,
        "torch": {
            "2.8": {
                "version": "2.8.0",
                "python-abi": "cp39",
                "cxx-abis": ["cxx11"],
                "flavours": {
                    "cu126": {"arches": ["x86_64"]},
                    "cu128": {"arches": both, "on-pypi": ["x86_64"]},
                    "cpu": {"arches": both},
                },
            },
            "2.14": {
                "version": "2.14.1",
                "python-abi": "cp310",
                "cxx-abis": ["cxx11"],
                "flavours": {"cu130": {"arches": both, "on-pypi": both}, "cpu": {"arches": both}},
            },
        },
    }
    cuda = {
        "schema": 1,
        "cuda": {
            "12.6": {"source": "system", "capabilities": cap},
            "12.8": {"source": "system", "capabilities": cap},
            "13.0": {
                "source": "pypi",
                "arches": both,
                "capabilities": cap,
                "packages": [{"name": "nvidia-cuda-nvcc", "version": "13.0.88", "sha256": hashes}],
            },
        },
    }
    return parse_recipes(torch, cuda)


def reasons(plan: MatrixPlan) -> dict[str, str]:
    return {r.variant_name: r.reason for r in plan.rejected}


def check_partition(plan: MatrixPlan, recipes: Recipes) -> None:
    """Every considered variant is either selected or rejected, exactly once."""
    names = [*plan.names, *(r.variant_name for r in plan.rejected)]
    assert sorted(names) == sorted(v.name for v in recipes.variants())


def test_cuda_and_cpu_kernels_plan_every_variant(tmp_path: Path) -> None:
    r = recipes()
    plan = plan_matrix(project(tmp_path, TORCH + CUDA + CPU), r)
    assert plan.rejected == ()
    assert len(plan.selected) == len(r.variants()) == 9
    # One backend per variant (kernel-builder's rule); with-cpu-kernels adds the CPU kernels.
    assert plan.kernels_for("torch214-cxx11-cu130-x86_64-linux") == ("k_cuda",)
    assert plan.kernels_for("torch214-cxx11-cpu-x86_64-linux") == ("k_cpu",)
    both = plan_matrix(project(tmp_path, TORCH + CUDA + CPU), r, with_cpu_kernels=True)
    assert both.kernels_for("torch214-cxx11-cu130-x86_64-linux") == ("k_cuda", "k_cpu")
    notes = " ".join(plan.notes)
    assert "CUDA 12.8 toolchain is 'system'" in notes and "CUDA 13.0" not in notes


def test_cuda_only_kernel_gets_no_cpu_variants(tmp_path: Path) -> None:
    r = recipes()
    plan = plan_matrix(project(tmp_path, TORCH + CUDA), r)
    assert all("-cu" in name for name in plan.names)
    why = reasons(plan)
    assert (
        why["torch214-cxx11-cpu-x86_64-linux"] == "backend cpu not in the project's backends (cuda)"
    )
    check_partition(plan, r)


def test_cpu_only_kernel_gets_only_cpu_variants(tmp_path: Path) -> None:
    plan = plan_matrix(project(tmp_path, TORCH + CPU), recipes())
    assert plan.names == (
        "torch28-cxx11-cpu-x86_64-linux",
        "torch28-cxx11-cpu-aarch64-linux",
        "torch214-cxx11-cpu-x86_64-linux",
        "torch214-cxx11-cpu-aarch64-linux",
    )
    assert plan.notes == ()


def test_declared_backend_without_kernels_is_rejected(tmp_path: Path) -> None:
    plan = plan_matrix(
        project(tmp_path, TORCH + CUDA, general='backends = ["cuda", "cpu"]'), recipes()
    )
    assert reasons(plan)["torch28-cxx11-cpu-x86_64-linux"] == (
        'no [kernel.*] section has backend = "cpu"'
    )


def test_a_kernel_of_a_backend_the_project_does_not_build_is_named_where_one_is_missing(
    tmp_path: Path,
) -> None:
    # backend = "rocm" written for the CUDA kernel: its variants were left out as having no
    # CUDA kernel, the kernel that was meant said nowhere
    rocm = CUDA.replace('backend = "cuda"', 'backend = "rocm"')
    plan = plan_matrix(
        project(tmp_path, TORCH + CPU + rocm, general='backends = ["cpu", "cuda"]'), recipes()
    )
    assert reasons(plan)["torch28-cxx11-cu128-x86_64-linux"] == (
        'no [kernel.*] section has backend = "cuda"; [kernel.k_cuda] has backend = "rocm", '
        "which general.backends does not list"
    )


def test_torch_bounds_are_inclusive_at_their_precision(tmp_path: Path) -> None:
    body = TORCH + 'minver = "2.9"\n' + CUDA
    plan = plan_matrix(project(tmp_path, body), recipes())
    assert all(name.startswith("torch214-") for name in plan.names)
    assert reasons(plan)["torch28-cxx11-cu128-x86_64-linux"] == (
        "torch 2.8 < torch.minver 2.9 (build.toml)"
    )

    body = TORCH + 'maxver = "2.8"\n' + CUDA  # admits 2.8.0 and any 2.8.x
    plan = plan_matrix(project(tmp_path, body), recipes())
    assert all(name.startswith("torch28-") for name in plan.names) and plan.names
    assert reasons(plan)["torch214-cxx11-cu130-x86_64-linux"] == (
        "torch 2.14 > torch.maxver 2.8 (build.toml)"
    )

    body = TORCH + 'minver = "2.14.2"\n' + CUDA
    plan = plan_matrix(project(tmp_path, body), recipes())
    assert plan.selected == ()
    assert (
        "torch 2.14.1 < torch.minver 2.14.2" in reasons(plan)["torch214-cxx11-cu130-x86_64-linux"]
    )


def test_general_cuda_bounds(tmp_path: Path) -> None:
    general = '[general.cuda]\nminver = "12.8"\nmaxver = "12.9"\n'
    plan = plan_matrix(project(tmp_path, TORCH + CUDA + CPU, general=general), recipes())
    why = reasons(plan)
    assert why["torch28-cxx11-cu126-x86_64-linux"] == (
        "CUDA 12.6 < general cuda minver 12.8 (build.toml)"
    )
    assert why["torch214-cxx11-cu130-aarch64-linux"] == (
        "CUDA 13.0 > general cuda maxver 12.9 (build.toml)"
    )
    assert "torch28-cxx11-cu128-aarch64-linux" in plan.names
    assert "torch214-cxx11-cpu-x86_64-linux" in plan.names  # CPU variants have no CUDA


def test_per_kernel_cuda_minver(tmp_path: Path) -> None:
    new = '[kernel.k_new]\nbackend = "cuda"\nsrc = ["csrc/k2.cu"]\ncuda-minver = "12.8"\n'
    plan = plan_matrix(project(tmp_path, TORCH + CUDA + new), recipes())
    # The older kernel keeps CUDA 12.6 in the matrix; the newer one is compiled from 12.8 on.
    assert plan.kernels_for("torch28-cxx11-cu126-x86_64-linux") == ("k_cuda",)
    assert plan.kernels_for("torch28-cxx11-cu128-x86_64-linux") == ("k_cuda", "k_new")

    plan = plan_matrix(project(tmp_path, TORCH + new), recipes())
    assert reasons(plan)["torch28-cxx11-cu126-x86_64-linux"] == (
        "CUDA 12.6 < kernel.k_new.cuda-minver 12.8 (build.toml)"
    )


def test_arch_filter_and_several_reasons(tmp_path: Path) -> None:
    body = TORCH + 'minver = "2.9"\n' + CUDA
    plan = plan_matrix(project(tmp_path, body), recipes(), arches=[Arch.X86_64])
    assert plan.names == ("torch214-cxx11-cu130-x86_64-linux",)
    why = reasons(plan)
    assert why["torch214-cxx11-cu130-aarch64-linux"] == (
        "arch aarch64 not among the selected arches (x86_64)"
    )
    assert why["torch28-cxx11-cu128-aarch64-linux"] == (
        "torch 2.8 < torch.minver 2.9 (build.toml); "
        "arch aarch64 not among the selected arches (x86_64)"
    )


def test_noarch_projects(tmp_path: Path) -> None:
    plan = plan_matrix(project(tmp_path, "", general='backends = ["cuda", "cpu"]'), recipes())
    assert plan.names == ("torch-cpu", "torch-cuda")
    assert plan.rejected == () and plan.kernels_for("torch-cuda") == ()
    assert all(r.python_abi == "py3" and r.torch_requirement is None for r in plan.selected)
    plan = plan_matrix(project(tmp_path / "u", ""), recipes())
    assert plan.names == ("torch-universal",)


def test_backend_without_recipes_is_a_note(tmp_path: Path) -> None:
    rocm = '[kernel.k_rocm]\nbackend = "rocm"\nsrc = ["csrc/k.cu"]\n'
    plan = plan_matrix(project(tmp_path, TORCH + rocm + CPU), recipes())
    assert all("-cpu-" in name for name in plan.names)
    assert any("recipes have no rocm builds" in note for note in plan.notes)


def test_select_moves_deselected_variants_to_rejected(tmp_path: Path) -> None:
    r = recipes()
    plan = plan_matrix(project(tmp_path, TORCH + CUDA + CPU), r)
    chosen = plan.select(Selector(build=("torch2{8,14}-*-cpu-*",), skip=("*-aarch64-*",)))
    assert chosen.names == ("torch28-cxx11-cpu-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux")
    assert [name for name, _ in chosen.kernels] == list(chosen.names)
    why = reasons(chosen)
    assert why["torch214-cxx11-cpu-aarch64-linux"] == "skipped by skip '*-aarch64-*'"
    assert why["torch214-cxx11-cu130-x86_64-linux"].startswith("not matched by build")
    check_partition(chosen, r)
    with pytest.raises(UsageError, match="left out"):
        plan_matrix(project(tmp_path, TORCH + CPU), r).select(
            Selector(only="torch214-cxx11-cu130-x86_64-linux")
        )


def test_bundled_recipes_plan_for_img2gray_like_kernel(tmp_path: Path) -> None:
    r = load_recipes()
    plan = plan_matrix(project(tmp_path, TORCH + CUDA + CPU), r)
    assert "torch214-cxx11-cu130-x86_64-linux" in plan.names
    assert "torch213-cxx11-cpu-x86_64-linux" in plan.names
    check_partition(plan, r)


# -- the command --------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_matrix_command_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = project(tmp_path, TORCH + 'minver = "2.13"\n' + CUDA + CPU)
    code, out, _ = run_cli(
        capsys, "matrix", str(kernel.root), "--json", "--build", "torch214-*", "--arch", "all"
    )
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    by_name = {entry["name"]: entry for entry in data["include"]}
    assert set(by_name) == {
        f"torch214-cxx11-{flavour}-{arch}-linux"
        for flavour in ("cu126", "cu130", "cu132", "cpu")
        for arch in ("x86_64", "aarch64")
    }
    cu = by_name["torch214-cxx11-cu130-aarch64-linux"]
    assert cu["runner"] == "ubuntu-24.04-arm"
    assert cu["local_version"] == "torch2.14.cu130.cxx11"
    assert (cu["torch"], cu["backend"], cu["cuda"], cu["cxxabi"]) == (
        "2.14.1",
        "cu130",
        "13.0",
        "cxx11",
    )
    assert (cu["arch"], cu["os"], cu["python_abi"]) == ("aarch64", "linux", "cp310")
    assert cu["kernels"] == ["k_cuda"]  # one backend per variant
    assert len(cu["env_digest"]) == 64
    assert by_name["torch214-cxx11-cpu-x86_64-linux"]["runner"] == "ubuntu-24.04"
    assert by_name["torch214-cxx11-cpu-x86_64-linux"]["cuda"] is None
    # each flavour with its toolchain, its torch's source and the image that carries both
    assert cu["image"] == "quay.io/pypa/manylinux_2_28_aarch64:2025.09.19-1"
    old = by_name["torch214-cxx11-cu126-x86_64-linux"]
    assert (old["toolchain"], old["cuda"], old["image"]) == (
        "system",
        "12.6",
        "nvidia/cuda:12.6.3-devel-rockylinux8",
    )
    assert (old["torch_requirement"], old["index_url"]) == (
        "torch==2.14.1+cu126",
        "https://download.pytorch.org/whl/cu126",
    )
    new = by_name["torch214-cxx11-cu132-x86_64-linux"]
    assert (new["toolchain"], new["cuda"], new["torch_requirement"]) == (
        "pypi",
        "13.2",
        "torch==2.14.1+cu132",
    )
    rejected = {entry["name"]: entry["reason"] for entry in data["rejected"]}
    assert rejected["torch27-cxx11-cu118-x86_64-linux"].startswith("torch 2.7 < torch.minver")
    assert rejected["torch213-cxx11-cpu-x86_64-linux"].startswith("not matched by --build")


def test_matrix_command_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = project(tmp_path, TORCH + CPU)
    code, out, _ = run_cli(capsys, "matrix", str(kernel.root), "--skip", "*-aarch64-*")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("demo: ")
    row = next(line for line in lines if line.startswith("torch213-cxx11-cpu-x86_64-linux "))
    assert "torch2.13.cpu.cxx11" in row and "torch==2.13.0+cpu" in row and "cp310" in row
    assert any("skipped by --skip '*-aarch64-*'" in line for line in lines)
    assert any("backend cuda not in the project's backends (cpu)" in line for line in lines)


def test_matrix_command_selector_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = project(tmp_path, TORCH + CPU)
    code, _, err = run_cli(capsys, "matrix", str(kernel.root), "--build", "torch29-*-cu*")
    assert code == UsageError.exit_code
    assert "--build pattern 'torch29-*-cu*'" in err and "torch214-cxx11-cpu-x86_64-linux" in err
    monkeypatch.setenv("KERNELWHEEL_BUILD", "torch3*")
    code, _, err = run_cli(capsys, "matrix", str(kernel.root))
    assert code == UsageError.exit_code and "KERNELWHEEL_BUILD pattern 'torch3*'" in err
    code, _, err = run_cli(capsys, "matrix", str(kernel.root), "--only", "torch214-nope")
    assert code == UsageError.exit_code and "--only 'torch214-nope'" in err


def test_plan_project_resolves_every_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = project(tmp_path, TORCH + CPU)
    (kernel.root / "pyproject.toml").write_text(
        '[tool.kernelwheel]\nskip = "*-aarch64-*"\njobs = 3\n'
    )
    monkeypatch.setenv("KERNELWHEEL_BUILD", "torch214-*")
    cli = {"build": None, "skip": None, "output_dir": "out", "jobs": None}
    planned = plan_project(kernel.root, cli)
    assert planned.plan.names == ("torch214-cxx11-cpu-x86_64-linux",)
    assert planned.options.jobs == 3 and planned.options.output_dir == Path.cwd() / "out"
    assert planned.options.source("build") == "KERNELWHEEL_BUILD"
    assert len(planned.full.selected) > len(planned.plan.selected)


def test_matrix_shows_local_versions_in_the_configured_style(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = project(tmp_path, TORCH + CPU)
    (kernel.root / "pyproject.toml").write_text(
        '[tool.kernelwheel]\nlocal-version-style = "compact"\n'
    )
    args = ("matrix", str(kernel.root), "--build", "torch214-*", "--arch", "x86_64")
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "torch214cpucxx11" in out and "torch2.14.cpu.cxx11" not in out
    code, out, _ = run_cli(capsys, *args, "--json")
    labels = [entry["local_version"] for entry in json.loads(out)["include"]]
    assert code == 0 and labels == ["torch214cpucxx11"]
