"""Planning stable-ABI builds: one variant per flavour and arch for a backend in
``torch.stable-abi``, built with the newest torch that may; per-torch variants for the rest."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.requests import selected_recipes

from kernelwheel.compat.gpus import Gpus
from kernelwheel.errors import VariantError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.project import KernelProject, load_project
from kernelwheel.model.recipes import RecipeError, Recipes, parse_recipes
from kernelwheel.model.variant import Arch, TorchVersion, Variant
from kernelwheel.plan.defaults import Machine
from kernelwheel.plan.matrix import plan_matrix
from kernelwheel.plan.options import ENV_VARS
from kernelwheel.plan.planning import plan_project, select

KERNELS = """
[kernel.k_cpu]
backend = "cpu"
depends = ["torch"]
src = ["csrc/k.cpp"]

[kernel.k_cuda]
backend = "cuda"
depends = ["torch"]
src = ["csrc/k.cu"]
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def project(tmp_path: Path, torch_extra: str) -> KernelProject:
    root = tmp_path / "demo"
    for rel in ("csrc/k.cu", "csrc/k.cpp", "torch-ext/b.cpp", "torch-ext/demo/__init__.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// x\n")
    toml = (
        '[general]\nname = "demo"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
        'backends = ["cpu", "cuda"]\n\n[torch]\nsrc = ["torch-ext/b.cpp"]\n'
        + textwrap.dedent(torch_extra)
        + KERNELS
    )
    (root / "build.toml").write_text(toml)
    return load_project(root)


def recipes() -> Recipes:
    """torch 2.9 (cu128, cpu), 2.10 (cu128, cpu x86_64 only) and 2.14 (cu130, cpu)."""
    both = ["x86_64", "aarch64"]
    torch = {
        "schema": 1,
        "torch": {
            "2.9": {
                "version": "2.9.1",
                "python-abi": "cp39",
                "cxx-abis": ["cxx11"],
                "flavours": {"cu128": {"arches": both}, "cpu": {"arches": both}},
            },
            "2.10": {
                "version": "2.10.0",
                "python-abi": "cp39",
                "cxx-abis": ["cxx11"],
                "flavours": {"cu128": {"arches": both}, "cpu": {"arches": ["x86_64"]}},
            },
            "2.14": {
                "version": "2.14.1",
                "python-abi": "cp310",
                "cxx-abis": ["cxx11"],
                "flavours": {"cu130": {"arches": both, "on-pypi": both}, "cpu": {"arches": both}},
            },
        },
    }
    cap = ["8.0", "9.0+PTX"]
    cuda = {
        "schema": 1,
        "cuda": {
            "12.8": {"source": "system", "capabilities": cap},
            "13.0": {"source": "system", "capabilities": cap},
        },
    }
    return parse_recipes(torch, cuda)


def reasons(plan_rejected: object) -> dict[str, str]:
    return {r.variant_name: r.reason for r in plan_rejected}  # type: ignore[attr-defined]


def test_stable_backends_get_one_variant_per_flavour_and_arch(tmp_path: Path) -> None:
    r = recipes()
    plan = plan_matrix(project(tmp_path, 'stable-abi = "2.10"\n'), r)
    assert sorted(plan.names) == sorted(
        [
            "torch-stable-abi210-cu128-x86_64-linux",
            "torch-stable-abi210-cu128-aarch64-linux",
            "torch-stable-abi210-cpu-x86_64-linux",
            "torch-stable-abi210-cpu-aarch64-linux",
            "torch-stable-abi210-cu130-x86_64-linux",
            "torch-stable-abi210-cu130-aarch64-linux",
        ]
    )
    built_with = {rec.name: rec.torch_version for rec in plan.selected}
    # The newest torch of each flavour that is at least the ABI version.
    assert built_with["torch-stable-abi210-cu128-x86_64-linux"] == "2.10.0"
    assert built_with["torch-stable-abi210-cu130-x86_64-linux"] == "2.14.1"
    assert built_with["torch-stable-abi210-cpu-x86_64-linux"] == "2.14.1"
    for rec in plan.selected:
        assert rec.variant.stable_abi and rec.variant.cxxabi is None
        assert rec.variant.torch == TorchVersion(2, 10)
        assert rec.variant.torch_requirement() == "torch>=2.10"
        assert rec.variant.local_version.startswith("torch2.10.stable.")
    assert plan.kernels_for("torch-stable-abi210-cpu-x86_64-linux") == ("k_cpu",)
    assert plan.kernels_for("torch-stable-abi210-cu130-x86_64-linux") == ("k_cuda",)
    # Every per-torch variant is left out, saying which stable build replaces it and why.
    why = reasons(plan.rejected)
    assert {v.name for v in r.variants()} == set(why)
    cpu = "backend cpu builds the stable ABI of torch 2.10 (build.toml torch.stable-abi) once, "
    assert why["torch29-cxx11-cpu-x86_64-linux"] == (
        f"{cpu}as torch-stable-abi210-cpu-x86_64-linux; torch 2.9 is older than that ABI"
    )
    assert why["torch210-cxx11-cpu-x86_64-linux"].endswith("that build uses torch 2.14")
    assert why["torch214-cxx11-cpu-x86_64-linux"].endswith("that build uses this torch")


def test_a_project_may_mix_stable_and_per_torch_backends(tmp_path: Path) -> None:
    plan = plan_matrix(project(tmp_path, '[torch.stable-abi]\ncuda = "2.14"\n'), recipes())
    names = set(plan.names)
    stable = {"torch-stable-abi214-cu130-x86_64-linux", "torch-stable-abi214-cu130-aarch64-linux"}
    assert stable <= names
    # cpu keeps one wheel per torch; CUDA 12.8 has no torch >= 2.14, so no stable cu128 build.
    assert {"torch29-cxx11-cpu-x86_64-linux", "torch214-cxx11-cpu-aarch64-linux"} <= names
    assert not any("cu128" in n for n in names)
    assert not any(n.startswith("torch-stable-abi214-cpu") for n in names)
    why = reasons(plan.rejected)
    assert why["torch-stable-abi214-cu128-x86_64-linux"] == (
        "no torch >= 2.14 can build it: the recipes have no torch >= 2.14 with cu128 for x86_64"
    )
    assert "torch 2.10 is older than that ABI" in why["torch210-cxx11-cu128-x86_64-linux"]


def test_torch_bounds_and_arch_filter_choose_the_build_torch(tmp_path: Path) -> None:
    proj = project(tmp_path, 'maxver = "2.13"\nstable-abi = "2.10"\n')
    plan = plan_matrix(proj, recipes(), arches=[Arch.X86_64])
    built_with = {rec.name: rec.torch_version for rec in plan.selected}
    # torch 2.14 is above maxver: cpu builds with 2.10; cu130 exists only in 2.14.
    assert built_with == {
        "torch-stable-abi210-cu128-x86_64-linux": "2.10.0",
        "torch-stable-abi210-cpu-x86_64-linux": "2.10.0",
    }
    why = reasons(plan.rejected)
    assert why["torch-stable-abi210-cu130-x86_64-linux"] == (
        "no torch >= 2.10 can build it: torch 2.14 > torch.maxver 2.13 (build.toml)"
    )
    # Every reason against the newest candidate is named.
    assert why["torch-stable-abi210-cpu-aarch64-linux"] == (
        "no torch >= 2.10 can build it: torch 2.14 > torch.maxver 2.13 (build.toml); "
        "arch aarch64 not among the selected arches (x86_64)"
    )


def test_recipe_for_a_stable_variant_builds_with_a_torch_no_older_than_its_abi() -> None:
    r = recipes()
    stable = Variant.parse("torch-stable-abi210-cpu-aarch64-linux")
    assert r.stable_build(stable) == TorchVersion(2, 14)  # 2.10 has no aarch64 cpu build
    rec = r.recipe_for(stable)
    assert (rec.torch_version, rec.python_abi, rec.name) == ("2.14.1", "cp310", stable.name)
    assert rec.torch_requirement == "torch==2.14.1+cpu"
    abi29 = Variant.parse("torch-stable-abi29-cpu-x86_64-linux")
    assert r.recipe_for(abi29, build=TorchVersion(2, 9)).torch_version == "2.9.1"
    abi210 = Variant.parse("torch-stable-abi210-cpu-x86_64-linux")
    with pytest.raises(RecipeError, match="older torch 2.9 cannot provide") as info:
        r.recipe_for(abi210, build=TorchVersion(2, 9))
    assert info.value.hint == "build it with torch 2.10 or newer"
    per_torch = Variant.parse("torch210-cxx11-cpu-x86_64-linux")
    with pytest.raises(VariantError, match="only stable-ABI variants choose"):
        r.recipe_for(per_torch, build=TorchVersion(2, 14))
    with pytest.raises(RecipeError, match=r"no torch >= 2\.15 in the recipes has a cpu build"):
        r.recipe_for(Variant.parse("torch-stable-abi215-cpu-x86_64-linux"))


def test_default_and_named_variants_of_a_stable_project(tmp_path: Path) -> None:
    proj = project(tmp_path, 'stable-abi = "2.10"\n')
    planned = plan_project(proj.root, {})
    machine = Machine(Arch.X86_64, Gpus(parse_all(["9.0"]), "a test"))
    (default,) = select(planned, machine=machine).recipes
    assert default.name == "torch-stable-abi210-cu132-x86_64-linux"
    # `build --variant NAME` finds it in the plan (real recipes: built with torch 2.14.1).
    (rec,) = selected_recipes(planned, ["torch-stable-abi210-cpu-x86_64-linux"])
    assert (rec.name, rec.torch_version) == ("torch-stable-abi210-cpu-x86_64-linux", "2.15.0")


def test_a_metal_kernel_in_the_stable_abi_table_plans_a_darwin_variant(tmp_path: Path) -> None:
    # Each stable-ABI variant keeps the OS of the builds it stands for (metal is macOS only).
    from kernelwheel.model.recipes import load_recipes

    p = project(tmp_path, 'stable-abi = "2.11"\n')
    (p.root / "csrc" / "k.mm").write_text("// x\n")
    text = (p.root / "build.toml").read_text().replace('"cpu", "cuda"]', '"cpu", "cuda", "metal"]')
    text += '\n[kernel.k_metal]\nbackend = "metal"\ndepends = ["torch"]\nsrc = ["csrc/k.mm"]\n'
    (p.root / "build.toml").write_text(text)
    names = plan_matrix(load_project(p.root), load_recipes()).names
    assert "torch-stable-abi211-metal-aarch64-darwin" in names
    assert "torch-stable-abi211-cpu-x86_64-linux" in names
