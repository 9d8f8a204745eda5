"""tvm-ffi in the model: the variant names (tvm-ffi01-cu130-x86_64-linux), their local labels,
and recipes/tvm-ffi.toml (the pinned apache-tvm-ffi release, its flavours and arches)."""

from __future__ import annotations

import copy
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from kernelwheel.errors import VariantError
from kernelwheel.model.recipes import RecipeError, load_recipes, parse_recipes, tvm_ffi_requirement
from kernelwheel.model.variant import (
    OS,
    Arch,
    Backend,
    BackendKind,
    LocalVersionStyle,
    TorchVersion,
    TvmFfiVersion,
    Variant,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

REPO = Path(__file__).resolve().parents[2]
WHEEL = "apache_tvm_ffi-0.1.9-cp312-abi3-manylinux_2_28_x86_64.whl"


def tvm(backend: str, arch: Arch = Arch.X86_64) -> Variant:
    return Variant(
        None, Backend.parse_token(backend), None, arch, OS.LINUX, tvm_ffi=TvmFfiVersion(0, 1)
    )


# -- variant names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "local", "compact"),
    [
        ("tvm-ffi01-cpu-x86_64-linux", "tvmffi0.1.cpu", "tvmffi01cpu"),
        ("tvm-ffi01-cu130-aarch64-linux", "tvmffi0.1.cu130", "tvmffi01cu130"),
        ("tvm-ffi110-rocm63-x86_64-linux", "tvmffi1.10.rocm63", "tvmffi110rocm63"),
        ("tvm-ffi01-metal-aarch64-darwin", "tvmffi0.1.metal", "tvmffi01metal"),
    ],
)
def test_tvm_ffi_names_and_labels_round_trip(name: str, local: str, compact: str) -> None:
    variant = Variant.parse(name)
    assert variant.tvm_ffi is not None and variant.torch is None
    assert not variant.noarch and variant.cxxabi is None
    assert variant.name == name
    assert variant.local_version == local
    assert variant.local_version_in(LocalVersionStyle.COMPACT) == compact
    for label in (local, compact, local.upper().replace(".", "_")):
        assert Variant.from_local_version(label, arch=variant.arch, os=variant.os) == variant
    Version(f"1.0+{local}")  # a valid PEP 440 local part
    Version(f"1.0+{compact}")


def test_tvm_ffi_variant_wheel_tag_and_version() -> None:
    variant = tvm("cu130")
    assert variant.tvm_ffi == TvmFfiVersion(0, 1) and str(variant.tvm_ffi) == "0.1"
    assert variant.platform_tag() == "manylinux_2_28_x86_64"
    assert variant != Variant.parse("torch-cuda")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("tvm-ffi1-cpu-x86_64-linux", "bad tvm-ffi part 'tvm-ffi1'"),
        ("tvm-ffi-cpu-x86_64-linux", "bad tvm-ffi part"),
        ("tvm-ffi01-cpu-x86_64", "missing the OS part"),
        ("tvm-ffi01-cpu-x86_64-linux-extra", "unexpected extra part"),
        ("tvm-ffi01-cuda-x86_64-linux", "versioned cuda backend"),
        ("tvm-ffi01-cu130-armv7-linux", "unknown arch or OS"),
        ("tvm-ffi01-metal-aarch64-linux", "metal backend exists only on darwin"),
        ("tvm-ffi01-cxx11-cpu-x86_64-linux", "unexpected extra part"),
    ],
)
def test_bad_tvm_ffi_names_say_what_is_wrong(name: str, message: str) -> None:
    with pytest.raises(VariantError, match=message) as info:
        Variant.parse(name)
    assert "tvm-ffi01-cu130-x86_64-linux" in (info.value.hint or "")


def test_a_tvm_ffi_variant_has_no_torch_parts() -> None:
    cpu = Backend(BackendKind.CPU)
    version = TvmFfiVersion(0, 1)
    with pytest.raises(VariantError, match="no torch"):
        Variant(TorchVersion(2, 10), cpu, None, Arch.X86_64, OS.LINUX, tvm_ffi=version)
    with pytest.raises(VariantError, match="no cxxabi"):
        replace(
            Variant.parse("tvm-ffi01-cpu-x86_64-linux"),
            cxxabi=Variant.parse("torch210-cxx11-cpu-x86_64-linux").cxxabi,
        )
    with pytest.raises(VariantError, match="needs an arch"):
        Variant(None, cpu, None, None, OS.LINUX, tvm_ffi=version)
    with pytest.raises(VariantError, match="TvmFfiVersion"):
        Variant(None, cpu, None, Arch.X86_64, OS.LINUX, tvm_ffi=(0, 1))  # type: ignore[arg-type]
    with pytest.raises(VariantError, match="tvmffi0.1.cpu.*needs an arch"):
        Variant.from_local_version("tvmffi0.1.cpu", arch=None, os=None)


# -- recipes/tvm-ffi.toml -----------------------------------------------------------------------


def bundled_data() -> dict[str, Any]:
    return tomllib.loads((REPO / "recipes" / "tvm-ffi.toml").read_text())


def parse(tvm_data: dict[str, Any]) -> Any:
    torch = tomllib.loads((REPO / "recipes" / "torch.toml").read_text())
    cuda = tomllib.loads((REPO / "recipes" / "cuda.toml").read_text())
    return parse_recipes(torch, cuda, origin="/r", tvm_ffi_data=tvm_data)


def test_bundled_tvm_ffi_recipe() -> None:
    recipes = load_recipes()
    assert recipes.tvm_ffi is not None
    assert recipes.tvm_ffi.version == "0.1.9"
    names = [v.name for v in recipes.tvm_ffi_variants()]
    assert names == [
        "tvm-ffi01-cpu-x86_64-linux",
        "tvm-ffi01-cpu-aarch64-linux",
        "tvm-ffi01-cu130-x86_64-linux",
        "tvm-ffi01-cu130-aarch64-linux",
    ]
    # Every Python/arch wheel of the release is hashed, so any build machine installs it
    # with --require-hashes.
    files = [name for name, _ in recipes.tvm_ffi.wheels]
    for arch in ("x86_64", "aarch64"):
        assert {f.split("-")[2] for f in files if arch in f} == {"cp39", "cp310", "cp311", "cp312"}


def test_recipe_for_a_tvm_ffi_variant() -> None:
    recipes = load_recipes()
    cpu = recipes.recipe_for(tvm("cpu"))
    assert cpu.tvm_ffi is recipes.tvm_ffi and cpu.cuda is None
    assert cpu.torch_requirement is None and cpu.python_abi == "py3"
    assert cpu.to_dict()["tvm_ffi"] == "0.1.9"
    line = cpu.tvm_ffi.requirement_line
    assert line.startswith("apache-tvm-ffi==0.1.9 --hash=sha256:")
    assert line.count("--hash=sha256:") == 8
    runtime = Requirement(tvm_ffi_requirement(cpu.tvm_ffi.version))
    assert runtime.name == "apache-tvm-ffi"
    assert "0.1.9" in runtime.specifier and "0.1.15" in runtime.specifier
    assert "0.2.0" not in runtime.specifier and "0.1.8" not in runtime.specifier

    cuda = recipes.recipe_for(tvm("cu130", Arch.AARCH64))
    assert cuda.cuda is not None and cuda.cuda.version == "13.0" and cuda.cuda.packages
    assert all(p.sha256 for p in cuda.cuda.packages)
    assert cuda.tvm_ffi is not None
    assert cuda.tvm_ffi.requires_for(Backend.parse_token("cu130")) == (
        "nvidia-cuda-runtime>=13.0,<14",
    )
    assert cuda.tvm_ffi.requires_for(Backend.parse_token("cpu")) == ()
    assert cpu.digest() != cuda.digest()
    # torch variants keep the digests they had before tvm-ffi existed: no tvm_ffi key.
    torch_variant = recipes.recipe_for(Variant.parse("torch214-cxx11-cpu-x86_64-linux"))
    assert "tvm_ffi" not in torch_variant.environment_spec()


def test_uncovered_tvm_ffi_variants_name_the_file() -> None:
    recipes = load_recipes()
    with pytest.raises(RecipeError, match="has no build tvm-ffi01-cu126") as info:
        recipes.recipe_for(tvm("cu126"))
    assert "tvm-ffi.toml" in str(info.value)
    without = parse_recipes(*_torch_cuda(), origin="/r")
    assert without.tvm_ffi is None and without.tvm_ffi_variants() == ()
    with pytest.raises(RecipeError, match="no tvm-ffi recipe"):
        without.recipe_for(tvm("cpu"))


def _torch_cuda() -> tuple[dict[str, Any], dict[str, Any]]:
    torch = tomllib.loads((REPO / "recipes" / "torch.toml").read_text())
    cuda = tomllib.loads((REPO / "recipes" / "cuda.toml").read_text())
    return torch, cuda


def edited(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(bundled_data())
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "key", "text"),
    [
        (("tvm-ffi", "version"), "zero", "tvm-ffi.version", "not an apache-tvm-ffi release"),
        (("tvm-ffi", "version"), "0.1.9+local", "tvm-ffi.version", "not an apache-tvm-ffi"),
        (("tvm-ffi", "versoin"), "0.1.9", "tvm-ffi.versoin", "did you mean 'version'"),
        (("tvm-ffi", "flavours", "rocm63"), {"arches": ["x86_64"]}, "flavours.rocm63", "not a "),
        (("tvm-ffi", "flavours", "cu126"), {"arches": ["x86_64"]}, "flavours.cu126", "CUDA 12.6"),
        (("tvm-ffi", "flavours", "cpu"), {"arches": []}, "flavours.cpu.arches", "must not be"),
        (("tvm-ffi", "flavours", "cpu"), {"arches": ["x86"]}, "cpu.arches", "unknown arch"),
        (
            ("tvm-ffi", "flavours", "cpu"),
            {"arches": ["x86_64"], "requires": ["not a requirement!"]},
            "flavours.cpu.requires",
            "is not a requirement",
        ),
        (("tvm-ffi", "wheels", WHEEL), "abc", WHEEL, "not a sha256"),
        (
            ("tvm-ffi", "wheels", "apache_tvm_ffi-0.1.8-cp312-abi3-manylinux_2_28_x86_64.whl"),
            "a" * 64,
            "0.1.8",
            "is not a wheel of apache-tvm-ffi 0.1.9",
        ),
        (("tvm-ffi", "wheels", "torch-2.0.0-py3-none-any.whl"), "a" * 64, "torch", "not a wheel"),
        (("tvm-ffi", "wheels"), {}, "tvm-ffi.wheels", "lists no wheel"),
        (("schema",), 2, "schema", "schema must be 1"),
    ],
)
def test_tvm_ffi_toml_errors_name_the_key(
    path: tuple[str, ...], value: Any, key: str, text: str
) -> None:
    # CUDA 12.6 is a system toolchain covering every arch, so a cu126 flavour is accepted;
    # CUDA 12.4 has no toolchain at all.
    if path[-1] == "cu126":
        path = (*path[:-1], "cu124")
        key, text = "flavours.cu124", "CUDA 12.4 has no toolchain"
    with pytest.raises(RecipeError) as info:
        parse(edited(path, value))
    message = str(info.value)
    assert "/r/tvm-ffi.toml" in message
    assert key in message and text in message, message


def test_load_recipes_reads_tvm_ffi_toml_when_present(tmp_path: Path) -> None:
    for name in ("torch.toml", "cuda.toml"):
        (tmp_path / name).write_text((REPO / "recipes" / name).read_text())
    assert load_recipes(tmp_path).tvm_ffi is None
    (tmp_path / "tvm-ffi.toml").write_text((REPO / "recipes" / "tvm-ffi.toml").read_text())
    assert load_recipes(tmp_path).tvm_ffi == load_recipes().tvm_ffi
