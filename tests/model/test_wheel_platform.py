"""One parser of wheel platform tags (model/variant.WheelPlatform), and the three readers of a
wheel file name (install's selection, the static index, `kernelwheel index`) agreeing on it."""

from __future__ import annotations

import pytest

from kernelwheel.cli.index import variant_of
from kernelwheel.compat.builds import variant_of_wheel
from kernelwheel.errors import VariantError
from kernelwheel.model.variant import OS, Arch, WheelPlatform
from kernelwheel.wheels.index import flavours_of

X86, ARM = Arch.X86_64, Arch.AARCH64


@pytest.mark.parametrize(
    ("tag", "arch", "system"),
    [
        ("manylinux_2_28_x86_64", X86, OS.LINUX),
        ("manylinux2014_aarch64", ARM, OS.LINUX),
        ("musllinux_1_2_aarch64", ARM, OS.LINUX),
        ("linux_x86_64", X86, OS.LINUX),
        ("macosx_11_0_arm64", ARM, OS.DARWIN),
        ("macosx_10_9_x86_64", X86, OS.DARWIN),
        ("win_amd64", X86, OS.WINDOWS),
        ("win_arm64", ARM, OS.WINDOWS),
        ("any", None, None),
    ],
)
def test_platforms_with_kernel_variants(tag: str, arch: Arch | None, system: OS | None) -> None:
    assert WheelPlatform.parse(tag) == WheelPlatform(arch, system)


@pytest.mark.parametrize(
    "tag",
    [
        "linux_i686",
        "manylinux2014_i686",
        "manylinux2014_ppc64le",
        "linux_armv7l",
        "win32",
        "macosx_11_0_universal2",
        "x86_64",  # no OS
        "freebsd_13_x86_64",
    ],
)
def test_platforms_without_kernel_variants(tag: str) -> None:
    assert WheelPlatform.parse(tag) is None


def test_arch_synonyms() -> None:
    assert Arch.from_synonym("AMD64") is X86 and Arch.from_synonym("arm64") is ARM
    assert Arch.from_synonym("aarch64") is ARM and Arch.from_synonym("i686") is None


def test_a_multi_platform_wheel_names_one_platform_or_none() -> None:
    same = ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    assert WheelPlatform.of_tags(same) == WheelPlatform(X86, OS.LINUX)
    assert WheelPlatform.of_tags(["manylinux_2_17_x86_64", "manylinux_2_17_aarch64"]) is None
    assert WheelPlatform.of_tags(["linux_i686"]) is None


LOCAL = "0.1.0+torch2.14.cpu.cxx11-cp310-abi3"


@pytest.mark.parametrize(
    ("wheel_tail", "hub_name", "flavour"),
    [
        ("cpu.cxx11-cp310-abi3-manylinux_2_28_x86_64", "torch214-cxx11-cpu-x86_64-linux", "cpu"),
        ("cpu.cxx11-cp310-abi3-manylinux_2_28_aarch64", "torch214-cxx11-cpu-aarch64-linux", "cpu"),
        # macOS's arm64 is aarch64 (cli/index's reader gave no variant, unaware of the synonym)
        ("metal-cp310-abi3-macosx_11_0_arm64", "torch214-metal-aarch64-darwin", "metal"),
    ],
)
def test_the_wheel_name_readers_agree(wheel_tail: str, hub_name: str, flavour: str) -> None:
    name = f"img2gray-0.1.0+torch2.14.{wheel_tail}.whl"
    variant = variant_of_wheel(name)
    assert variant is not None and variant.name == hub_name
    assert variant_of(name) == hub_name
    assert flavours_of(name)[0] == flavour


def test_an_i686_wheel_is_no_variant_of_any_arch() -> None:
    """install's reader took it for an x86_64 variant, the index's for none."""
    name = f"img2gray-{LOCAL}-linux_i686.whl"
    with pytest.raises(VariantError, match="linux_i686 names no kernel variant's platform"):
        variant_of_wheel(name)
    assert variant_of(name) is None
    flavour, _, reason = flavours_of(name)
    assert flavour is None and "linux_i686 names no kernel variant's platform" in reason
