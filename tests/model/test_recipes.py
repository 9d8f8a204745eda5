"""Tests for kernelwheel.model.recipes: bundled data, recipe_for, digests, validation."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelwheel.model.capability import CudaCapability, joined
from kernelwheel.model.recipes import RecipeError, load_recipes, parse_recipes
from kernelwheel.model.variant import Arch, Backend, BackendKind, TorchVersion, Variant

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

REPO = Path(__file__).resolve().parents[2]
HASH_X = "a" * 64
HASH_A = "b" * 64


def mini() -> tuple[dict[str, Any], dict[str, Any]]:
    """A small, valid torch.toml / cuda.toml pair."""
    torch = {
        "schema": 1,
        "torch": {
            "2.9": {
                "version": "2.9.1",
                "python-abi": "cp39",
                "cxx-abis": ["cxx11"],
                "flavours": {
                    "cu128": {"arches": ["x86_64"], "on-pypi": ["x86_64"]},
                    "cpu": {"arches": ["x86_64", "aarch64"], "on-pypi": ["aarch64"]},
                },
            },
            "2.14": {
                "version": "2.14.1",
                "python-abi": "cp310",
                "cxx-abis": ["cxx11"],
                "flavours": {
                    "cu130": {"arches": ["x86_64", "aarch64"], "on-pypi": ["x86_64"]},
                    "cpu": {"arches": ["x86_64"]},
                },
            },
        },
    }
    cuda = {
        "schema": 1,
        "cuda": {
            "12.8": {"source": "system", "capabilities": ["8.0", "9.0+PTX"]},
            "13.0": {
                "source": "pypi",
                "arches": ["x86_64", "aarch64"],
                "capabilities": ["8.0", "12.0+PTX"],
                "packages": [
                    {
                        "name": "nvidia-cuda-nvcc",
                        "version": "13.0.88",
                        "sha256": {"x86_64": HASH_X, "aarch64": HASH_A},
                    }
                ],
            },
        },
    }
    return torch, cuda


def error_of(torch: dict[str, Any], cuda: dict[str, Any]) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        parse_recipes(torch, cuda, origin="/r")
    return info.value


# -- the bundled data ---------------------------------------------------------------------------


def test_bundled_recipes_load_from_the_repository_folder() -> None:
    recipes = load_recipes()
    assert Path(recipes.origin).resolve() == (REPO / "recipes").resolve()
    assert [str(r.series) for r in recipes.torch] == [f"2.{m}" for m in range(7, 16)]
    assert load_recipes(REPO / "recipes") == recipes


def test_bundled_torch_facts() -> None:
    recipes = load_recipes()
    exact = {str(r.series): r.version for r in recipes.torch}
    assert exact["2.7"] == "2.7.1" and exact["2.9"] == "2.9.1" and exact["2.14"] == "2.14.1"
    assert exact["2.15"] == "2.15.0"
    for recipe in recipes.torch:
        assert [a.value for a in recipe.cxx_abis] == ["cxx11"]  # cxx98 stopped after 2.6
        # measured: torch >= 2.11 forces Py_LIMITED_API=0x030A0000 (docs/matrix-run.md)
        assert recipe.python_abi == ("cp310" if recipe.series >= TorchVersion(2, 11) else "cp39")
        cuda = [f.backend for f in recipe.flavours if f.backend.kind is BackendKind.CUDA]
        # the flavours PyTorch publishes (kernel-builder's record; recipes/torch.toml)
        if recipe.series >= TorchVersion(2, 12):
            assert cuda == [Backend.parse_token(t) for t in ("cu126", "cu130", "cu132")]
        elif recipe.series == TorchVersion(2, 11):
            assert cuda == [Backend.parse_token(t) for t in ("cu126", "cu128", "cu130")]
        elif recipe.series >= TorchVersion(2, 8):
            assert Backend.parse_token("cu128") in cuda
        assert any(f.backend.kind is BackendKind.CPU for f in recipe.flavours)


def test_recipe_for_cuda13_variant_pins_a_hashed_pypi_toolchain() -> None:
    recipes = load_recipes()
    for arch in ("x86_64", "aarch64"):
        recipe = recipes.recipe_for(Variant.parse(f"torch214-cxx11-cu130-{arch}-linux"))
        assert recipe.torch_requirement == "torch===2.14.1"
        assert recipe.index_url is None
        assert recipe.python_abi == "cp310"
        assert recipe.cuda is not None and recipe.cuda.source == "pypi"
        assert recipe.cuda.version == "13.0" and recipe.cuda.arch is Arch(arch)
        names = {p.name for p in recipe.cuda.packages}
        assert names == {
            "nvidia-cuda-nvcc",
            "nvidia-nvvm",
            "nvidia-cuda-crt",
            "nvidia-cuda-cccl",
            "nvidia-cuda-runtime",
        }
        assert all(p.sha256 for p in recipe.cuda.packages)
        assert all(
            "==13.0." in line and "--hash=sha256:" in line for line in recipe.cuda.requirements()
        )
        assert joined(recipe.cuda.capabilities[-2:]) == "12.0, 12.1+PTX"
        assert CudaCapability(7, 0) not in recipe.cuda.capabilities
    x86 = recipes.recipe_for(Variant.parse("torch214-cxx11-cu130-x86_64-linux"))
    arm = recipes.recipe_for(Variant.parse("torch214-cxx11-cu130-aarch64-linux"))
    assert x86.cuda is not None and arm.cuda is not None
    assert x86.cuda.packages[0].sha256 != arm.cuda.packages[0].sha256


def test_recipe_for_cpu_and_cuda12_variants() -> None:
    recipes = load_recipes()
    cpu = recipes.recipe_for(Variant.parse("torch213-cxx11-cpu-x86_64-linux"))
    assert cpu.torch_requirement == "torch==2.13.0+cpu"
    assert cpu.index_url == "https://download.pytorch.org/whl/cpu"
    assert cpu.cuda is None and cpu.python_abi == "cp310"
    arm_cpu = recipes.recipe_for(Variant.parse("torch29-cxx11-cpu-aarch64-linux"))
    assert (arm_cpu.torch_requirement, arm_cpu.index_url) == ("torch===2.9.1", None)
    cu128 = recipes.recipe_for(Variant.parse("torch28-cxx11-cu128-x86_64-linux"))
    assert cu128.torch_requirement == "torch===2.8.0"
    assert cu128.cuda is not None and cu128.cuda.source == "system"
    assert cu128.cuda.packages == ()
    assert CudaCapability(10, 1) in cu128.cuda.capabilities
    cu118 = recipes.recipe_for(Variant.parse("torch27-cxx11-cu118-x86_64-linux"))
    assert cu118.torch_requirement == "torch==2.7.1+cu118"
    assert cu118.index_url == "https://download.pytorch.org/whl/cu118"
    assert cu118.cuda is not None and str(cu118.cuda.capabilities[-1]) == "9.0+PTX"


def test_recipe_for_noarch_variant() -> None:
    recipe = load_recipes().recipe_for(Variant.parse("torch-cuda"))
    assert recipe.torch_requirement is None and recipe.cuda is None
    assert recipe.python_abi == "py3"
    assert recipe.to_dict()["backend"] == "cuda"


def test_the_targets_are_the_capabilities_without_ptx() -> None:
    recipe = load_recipes().recipe_for(Variant.parse("torch214-cxx11-cu130-x86_64-linux"))
    assert recipe.cuda is not None and CudaCapability(12, 1, ptx=True) in recipe.cuda.capabilities
    assert "12.1" in recipe.cuda.targets and "12.1+PTX" not in recipe.cuda.targets
    assert len(recipe.cuda.targets) == len(recipe.cuda.capabilities)


def test_recipe_for_uncovered_variants_names_file_and_key() -> None:
    recipes = load_recipes()
    with pytest.raises(RecipeError) as info:
        recipes.recipe_for(Variant.parse("torch26-cxx98-cu124-x86_64-linux"))
    assert 'torch."2.6"' in str(info.value) and "torch.toml" in str(info.value)
    assert "2.7, 2.8" in str(info.value)
    with pytest.raises(RecipeError, match="no build for arch aarch64"):
        recipes.recipe_for(Variant.parse("torch27-cxx11-cu118-aarch64-linux"))
    with pytest.raises(RecipeError, match="no cu118 flavour"):
        recipes.recipe_for(Variant.parse("torch214-cxx11-cu118-x86_64-linux"))
    with pytest.raises(RecipeError, match="C\\+\\+ ABI cxx98"):
        recipes.recipe_for(Variant.parse("torch214-cxx98-cu130-x86_64-linux"))


def test_digest_is_stable_and_tracks_the_environment() -> None:
    torch, cuda = mini()
    a = parse_recipes(torch, cuda)
    b = parse_recipes(copy.deepcopy(torch), copy.deepcopy(cuda), origin="/elsewhere")
    name = "torch214-cxx11-cu130-x86_64-linux"
    first = a.recipe_for(Variant.parse(name)).digest()
    assert len(first) == 64 and first == b.recipe_for(Variant.parse(name)).digest()
    assert first != a.recipe_for(Variant.parse("torch214-cxx11-cu130-aarch64-linux")).digest()
    # Capabilities change compile flags, not the environment.
    cuda2 = copy.deepcopy(cuda)
    cuda2["cuda"]["13.0"]["capabilities"] = ["9.0"]
    assert parse_recipes(torch, cuda2).recipe_for(Variant.parse(name)).digest() == first
    # A new pin or hash does.
    cuda3 = copy.deepcopy(cuda)
    cuda3["cuda"]["13.0"]["packages"][0]["sha256"]["x86_64"] = "c" * 64
    assert parse_recipes(torch, cuda3).recipe_for(Variant.parse(name)).digest() != first
    torch2 = copy.deepcopy(torch)
    torch2["torch"]["2.14"]["version"] = "2.14.0"
    assert parse_recipes(torch2, cuda).recipe_for(Variant.parse(name)).digest() != first


def test_variants_enumerates_the_data_in_order() -> None:
    torch, cuda = mini()
    names = [v.name for v in parse_recipes(torch, cuda).variants()]
    assert names == [
        "torch29-cxx11-cu128-x86_64-linux",
        "torch29-cxx11-cpu-x86_64-linux",
        "torch29-cxx11-cpu-aarch64-linux",
        "torch214-cxx11-cu130-x86_64-linux",
        "torch214-cxx11-cu130-aarch64-linux",
        "torch214-cxx11-cpu-x86_64-linux",
    ]


def test_rocm_xpu_and_metal_flavours_use_pytorchs_labels_and_macos() -> None:
    torch, cuda = mini()
    torch["torch"]["2.14"]["flavours"].update(
        rocm71={"arches": ["x86_64"]},
        xpu20260={"arches": ["x86_64"]},
        metal={"arches": ["aarch64"], "on-pypi": ["aarch64"]},
    )
    recipes = parse_recipes(torch, cuda)
    names = [v.name for v in recipes.variants()][-3:]
    assert names == [
        "torch214-cxx11-rocm71-x86_64-linux",
        "torch214-cxx11-xpu20260-x86_64-linux",
        "torch214-metal-aarch64-darwin",  # macOS: one variant, no C++ ABI
    ]
    rocm, xpu, metal = (recipes.recipe_for(Variant.parse(n)) for n in names)
    # PyTorch names these builds rocm7.1 and xpu (its local version and its index folder).
    assert (rocm.torch_requirement, rocm.index_url) == (
        "torch==2.14.1+rocm7.1",
        "https://download.pytorch.org/whl/rocm7.1",
    )
    assert (xpu.torch_requirement, xpu.index_url) == (
        "torch==2.14.1+xpu",
        "https://download.pytorch.org/whl/xpu",
    )
    assert (metal.torch_requirement, metal.index_url, metal.cuda) == ("torch===2.14.1", None, None)
    with pytest.raises(RecipeError, match=r"OS darwin \(cpu builds are linux\)"):
        recipes.recipe_for(Variant.parse("torch214-cpu-x86_64-darwin"))


def test_bundled_rocm_xpu_metal_flavours_are_kernel_builders() -> None:
    recipes = load_recipes()
    by_series = {
        str(r.series): sorted(f.backend.token for f in r.flavours if f.backend.kind not in (
            BackendKind.CUDA, BackendKind.CPU))
        for r in recipes.torch
    }  # fmt: skip
    assert by_series["2.12"] == ["metal", "rocm71", "rocm72", "xpu20253"]
    assert by_series["2.13"] == ["metal", "rocm71", "rocm72", "xpu20260"]
    assert by_series["2.14"] == []


def test_index_url_override_and_template() -> None:
    torch, cuda = mini()
    torch["pytorch-index"] = "https://mirror.example/{flavour}/simple"
    torch["torch"]["2.14"]["flavours"]["cpu"]["index-url"] = "https://cpu.example/simple"
    recipes = parse_recipes(torch, cuda)
    arm = recipes.recipe_for(Variant.parse("torch214-cxx11-cu130-aarch64-linux"))
    assert arm.index_url == "https://mirror.example/cu130/simple"
    assert arm.torch_requirement == "torch==2.14.1+cu130"
    cpu = recipes.recipe_for(Variant.parse("torch214-cxx11-cpu-x86_64-linux"))
    assert cpu.index_url == "https://cpu.example/simple"


# -- validation ---------------------------------------------------------------------------------


def test_unknown_key_suggests_the_right_one() -> None:
    torch, cuda = mini()
    torch["torch"]["2.14"]["python_abi"] = "cp310"
    err = error_of(torch, cuda)
    assert "/r/torch.toml" in str(err) and 'torch."2.14".python_abi' in str(err)
    assert "did you mean 'python-abi'" in str(err)


@pytest.mark.parametrize(
    ("edit", "key", "text"),
    [
        (lambda t, c: t.update(schema=2), "schema", "schema must be 1"),
        (lambda t, c: t["torch"].update({"2": {"14": {}}}), 'torch."2"', "not MAJOR.MINOR"),
        (
            lambda t, c: t["torch"]["2.14"].update(version="2.13.0"),
            'torch."2.14".version',
            "not a release of torch 2.14",
        ),
        (
            lambda t, c: t["torch"]["2.14"].update(version="2.14.1+cu130"),
            'torch."2.14".version',
            "not a release",
        ),
        (
            lambda t, c: t["torch"]["2.14"].update({"python-abi": "abi3"}),
            'torch."2.14".python-abi',
            "invalid python-abi",
        ),
        (
            lambda t, c: t["torch"]["2.14"].update({"cxx-abis": ["cxx14"]}),
            'torch."2.14".cxx-abis',
            "unknown C++ ABI",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"].update(cu13={"arches": ["x86_64"]}),
            'torch."2.14".flavours.cu13',
            "",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"].update(cuda={"arches": ["x86_64"]}),
            'torch."2.14".flavours.cuda',
            "not a torch build PyTorch publishes",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"].update(neuron={"arches": ["x86_64"]}),
            'torch."2.14".flavours.neuron',
            "vendors' packages",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"].update(cann83={"arches": ["aarch64"]}),
            'torch."2.14".flavours.cann83',
            "not a torch build PyTorch publishes",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"]["cpu"].update({"on-pypi": ["aarch64"]}),
            'torch."2.14".flavours.cpu.on-pypi',
            "not in arches",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"]["cpu"].update(arches=["arm64"]),
            'torch."2.14".flavours.cpu.arches',
            "unknown arch 'arm64'",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"].update(cu126={"arches": ["x86_64"]}),
            'torch."2.14".flavours.cu126',
            "CUDA 12.6 has no toolchain",
        ),
        (
            lambda t, c: t["torch"]["2.9"]["flavours"]["cu128"].update(arches=["aarch64"]),
            'torch."2.9".flavours.cu128.on-pypi',
            "not in arches",
        ),
        (
            lambda t, c: c["cuda"]["13.0"]["packages"][0]["sha256"].pop("aarch64"),
            'cuda."13.0".packages[0].sha256',
            "no sha256 for aarch64",
        ),
        (
            lambda t, c: c["cuda"]["13.0"]["packages"][0]["sha256"].update(x86_64="XYZ"),
            'cuda."13.0".packages[0].sha256.x86_64',
            "not a sha256",
        ),
        (
            lambda t, c: c["cuda"]["13.0"].update(capabilities=["sm_80"]),
            'cuda."13.0".capabilities',
            "invalid CUDA capability 'sm_80'",
        ),
        (
            lambda t, c: c["cuda"]["13.0"].update(source="conda"),
            'cuda."13.0".source',
            "unknown source",
        ),
        (
            lambda t, c: c["cuda"]["12.8"].update(packages=[]),
            'cuda."12.8".packages',
            "system toolchain takes no packages",
        ),
        (
            lambda t, c: c["cuda"]["13.0"].update(packages=[]),
            'cuda."13.0".packages',
            "needs packages",
        ),
        (
            lambda t, c: c["cuda"]["13.0"]["packages"].append(
                {"name": "NVIDIA_cuda_nvcc", "version": "13.0.88"}
            ),
            'cuda."13.0".packages',
            "lists a package twice",
        ),
        (lambda t, c: t.update(schema=True), "schema", "schema must be 1"),
        (
            lambda t, c: t.update({"pytorch-index": "https://mirror.example/{flavor}"}),
            "pytorch-index",
            "unknown placeholder",
        ),
        (
            lambda t, c: t["torch"]["2.14"].update(version=""),
            'torch."2.14".version',
            "must not be empty",
        ),
        (
            lambda t, c: t["torch"]["2.14"].pop("python-abi"),
            'torch."2.14".python-abi',
            "missing required key",
        ),
        (
            lambda t, c: t["torch"]["2.14"]["flavours"]["cpu"].update(arches=["x86_64"] * 2),
            'torch."2.14".flavours.cpu.arches',
            "lists 'x86_64' twice",
        ),
        (
            lambda t, c: c["cuda"]["13.0"].update(packages="nvidia-cuda-nvcc"),
            'cuda."13.0".packages',
            "expected an array of tables",
        ),
        (
            lambda t, c: c["cuda"]["13.0"]["packages"][0].update(version=13),
            'cuda."13.0".packages[0].version',
            "expected a string, got an integer (13)",
        ),
    ],
)
def test_validation_errors_name_key_and_fix(edit: Any, key: str, text: str) -> None:
    torch, cuda = mini()
    edit(torch, cuda)
    err = error_of(torch, cuda)
    assert f": {key}: " in str(err), str(err)
    assert text in str(err)
    assert err.hint, "every error says how to fix it"


def test_cuda_flavour_arch_without_toolchain_pins() -> None:
    torch, cuda = mini()
    cuda["cuda"]["13.0"]["arches"] = ["x86_64"]
    for package in cuda["cuda"]["13.0"]["packages"]:
        package["sha256"].pop("aarch64")
    err = error_of(torch, cuda)
    assert 'torch."2.14".flavours.cu130' in str(err)
    assert "no pins for aarch64" in str(err)


def test_unhashed_pins_are_allowed_but_reported() -> None:
    torch, cuda = mini()
    del cuda["cuda"]["13.0"]["packages"][0]["sha256"]
    recipe = parse_recipes(torch, cuda).recipe_for(
        Variant.parse("torch214-cxx11-cu130-x86_64-linux")
    )
    assert recipe.cuda is not None and not all(p.sha256 for p in recipe.cuda.packages)
    assert recipe.cuda.requirements() == ("nvidia-cuda-nvcc==13.0.88",)


def test_load_recipes_from_a_folder(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="is not a folder"):
        load_recipes(tmp_path / "missing")
    (tmp_path / "torch.toml").write_text((REPO / "recipes/torch.toml").read_text())
    with pytest.raises(RecipeError, match="cuda.toml: not found"):
        load_recipes(tmp_path)
    (tmp_path / "cuda.toml").write_text("[cuda\n")
    with pytest.raises(RecipeError, match="invalid TOML"):
        load_recipes(tmp_path)
    (tmp_path / "cuda.toml").write_text((REPO / "recipes/cuda.toml").read_text())
    assert len(load_recipes(tmp_path).variants()) == len(load_recipes().variants())


def test_every_subpackage_ships_in_the_wheel() -> None:
    """pyproject.toml lists packages explicitly (for the recipes mapping); keep it complete."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(data["tool"]["setuptools"]["packages"])
    src = REPO / "src"
    found = {".".join(init.parent.relative_to(src).parts) for init in src.rglob("__init__.py")}
    missing = sorted(found - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    assert "kernelwheel.recipe_data" in listed


# -- torch 2.15, the CUDA flavours of each torch, build images (issue 32 items 3 and 4) ---------


def test_torch_215_is_pypis_cu132_with_a_hashed_cuda_132_toolchain() -> None:
    recipes = load_recipes()
    for arch in ("x86_64", "aarch64"):
        recipe = recipes.recipe_for(Variant.parse(f"torch215-cxx11-cu132-{arch}-linux"))
        # PyPI's plain torch 2.15.0 is the CUDA 13.2 build on both arches (its METADATA)
        assert (recipe.torch_requirement, recipe.index_url) == ("torch===2.15.0", None)
        assert recipe.python_abi == "cp310"
        assert recipe.cuda is not None and recipe.cuda.version == "13.2"
        assert recipe.cuda.source == "pypi" and all(p.sha256 for p in recipe.cuda.packages)
        assert {f"{p.name}=={p.version}" for p in recipe.cuda.packages} == {
            f"{name}==13.2.86"
            for name in (
                "nvidia-cuda-nvcc",
                "nvidia-nvvm",
                "nvidia-cuda-crt",
                "nvidia-cuda-cccl",
                "nvidia-cuda-runtime",
            )
        }
        assert recipe.image == f"quay.io/pypa/manylinux_2_28_{arch}:2025.09.19-1"
    cpu = recipes.recipe_for(Variant.parse("torch215-cxx11-cpu-x86_64-linux"))
    assert (cpu.torch_requirement, cpu.index_url) == (
        "torch==2.15.0+cpu",
        "https://download.pytorch.org/whl/cpu",
    )


@pytest.mark.parametrize("series", ["2.14", "2.15"])
def test_each_cuda_flavour_of_torch_214_and_215_has_its_toolchain_source_and_image(
    series: str,
) -> None:
    recipes = load_recipes()
    compact = series.replace(".", "")
    toolchains = {"cu126": ("12.6", "system"), "cu130": ("13.0", "pypi"), "cu132": ("13.2", "pypi")}
    on_pypi = "cu130" if series == "2.14" else "cu132"
    for token, (cuda, source) in toolchains.items():
        recipe = recipes.recipe_for(Variant.parse(f"torch{compact}-cxx11-{token}-x86_64-linux"))
        assert recipe.cuda is not None and (recipe.cuda.version, recipe.cuda.source) == (
            cuda,
            source,
        )
        if token == on_pypi:
            assert recipe.index_url is None
        else:  # PyTorch's per-CUDA index, with its local label
            assert recipe.index_url == f"https://download.pytorch.org/whl/{token}"
            assert recipe.torch_requirement is not None
            assert recipe.torch_requirement.endswith(f"+{token}")
        if source == "system":
            assert recipe.image == f"nvidia/cuda:{cuda}.3-devel-rockylinux8"
        else:
            assert recipe.image is not None and "manylinux_2_28_x86_64" in recipe.image


def test_images_are_validated_and_given_per_variant() -> None:
    torch, cuda = mini()
    torch["build-image"] = {"x86_64": "quay.io/pypa/manylinux_2_28_x86_64:1"}
    cuda["cuda"]["12.8"]["image"] = "nvidia/cuda:12.8.1-devel-rockylinux8"
    recipes = parse_recipes(torch, cuda)
    image = {v.name: recipes.recipe_for(v).image for v in recipes.variants()}
    assert image["torch29-cxx11-cu128-x86_64-linux"] == "nvidia/cuda:12.8.1-devel-rockylinux8"
    assert image["torch214-cxx11-cu130-x86_64-linux"] == "quay.io/pypa/manylinux_2_28_x86_64:1"
    assert image["torch214-cxx11-cu130-aarch64-linux"] is None  # no aarch64 build-image
    assert recipes.recipe_for(Variant.parse("torch29-cxx11-cpu-x86_64-linux")).to_dict()[
        "image"
    ] == ("quay.io/pypa/manylinux_2_28_x86_64:1")

    torch["build-image"] = {"x86_64": "quay.io/pypa/manylinux:latest"}
    message = str(error_of(torch, cuda))
    assert "not a pinned image" in message and "build-image.x86_64" in message
    torch["build-image"] = {"arm": "a/b:1"}
    assert "unknown arch 'arm'" in str(error_of(torch, cuda))
    del torch["build-image"]
    cuda["cuda"]["13.0"]["image"] = "nvidia/cuda:13.0.0-devel-rockylinux8"
    assert "a pypi toolchain takes no image" in str(error_of(torch, cuda))
