"""Per-kernel CUDA capabilities: kernel-builder's loose intersection of a kernel's list with the
variant's defaults, what it drops (reported), and the recipes' defaults per CUDA version."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from packaging.version import Version

from kernelwheel.compile.capabilities import (
    for_kernel,
    gencode_flags,
    loose_intersection,
    sort_capabilities,
    targets_of,
    unsupported,
)
from kernelwheel.model.capability import CudaCapability, parse_all
from kernelwheel.model.recipes import load_recipes

CU13 = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX")
CU128 = ("7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0+PTX")
OLDER = ("7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX")


def _texts(capabilities: Iterable[CudaCapability]) -> tuple[str, ...]:
    return tuple(str(c) for c in capabilities)


def test_targets_drop_ptx_and_sort() -> None:
    assert _texts(targets_of(parse_all(CU13)))[-2:] == ("12.0", "12.1")
    assert _texts(sort_capabilities(parse_all(["10.0", "9.0a", "9.0", "8.0", "9.0"]))) == (
        "8.0",
        "9.0",
        "9.0a",
        "10.0",
    )


@pytest.mark.parametrize(
    ("wanted", "targets", "expected"),
    [
        # each target takes the highest listed capability of its major at or below it
        (["8.0", "8.6"], ["8.0", "8.6", "8.7", "8.9", "9.0"], ("8.0", "8.6")),
        # an arch-specific form is kept when its base is a target, and serves it alone
        (["7.5", "8.0", "8.6", "9.0", "9.0a"], ["8.0", "8.9", "9.0"], ("8.0", "8.6", "9.0a")),
        (["10.0f"], ["9.0", "10.0", "12.0"], ("10.0f",)),
        (["10.0a"], ["9.0", "12.0"], ()),
        # SASS does not cross majors, PTX does
        (["8.0"], ["9.0"], ()),
        (["8.0+PTX"], ["9.0"], ("8.0+PTX",)),
        (["8.0+PTX", "9.0"], ["8.0", "9.0", "12.0"], ("8.0+PTX", "9.0")),
        # a lower capability of the same major serves a target; a higher one does not
        (["7.0"], ["7.5"], ("7.0",)),
        (["10.1"], ["10.0", "11.0", "12.0"], ()),
    ],
)
def test_loose_intersection(
    wanted: list[str], targets: list[str], expected: tuple[str, ...]
) -> None:
    assert _texts(loose_intersection(parse_all(wanted), parse_all(targets))) == expected


def test_a_kernel_without_a_list_takes_the_defaults_with_their_ptx() -> None:
    chosen = for_kernel("k", (), parse_all(CU13))
    assert _texts(chosen.capabilities) == CU13 and chosen.dropped == ()


def test_what_the_toolkit_builds_for_no_target_is_reported() -> None:
    chosen = for_kernel(
        "k", parse_all(["8.0", "9.0a", "10.0", "10.1", "12.0+PTX"]), parse_all(CU13)
    )
    assert _texts(chosen.capabilities) == ("8.0", "9.0a", "10.0", "12.0+PTX")
    assert _texts(chosen.dropped) == ("10.1",)
    # under CUDA 12.8 10.1 is a target of its own
    assert _texts(for_kernel("k", parse_all(["10.1"]), parse_all(CU128)).capabilities) == ("10.1",)


def test_nothing_left_is_an_empty_list_the_plan_refuses() -> None:
    chosen = for_kernel("k", parse_all(["12.1"]), parse_all(OLDER))
    assert chosen.capabilities == () and _texts(chosen.dropped) == ("12.1",)


def test_unsupported_looks_at_the_base_capability() -> None:
    supported = ("7.5", "8.0", "9.0", "10.0", "12.0")
    listed = parse_all(["9.0a", "10.0f+PTX", "12.0+PTX", "7.0", "8.9"])
    assert _texts(unsupported(listed, supported)) == ("7.0", "8.9")


def test_gencode_flags_with_ptx() -> None:
    assert gencode_flags(parse_all(["8.0", "9.0a", "12.0+PTX"])) == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_120,code=sm_120",
        "-gencode=arch=compute_120,code=compute_120",
    ]


def _kernel_builder_defaults(cuda: str) -> tuple[str, ...]:
    """kernel-builder's default list for an nvcc version (its CMake preamble's three cases)."""
    if Version(cuda) >= Version("13.0"):
        return CU13
    if Version(cuda) >= Version("12.8"):
        return CU128
    return OLDER


def test_every_recipe_has_kernel_builders_defaults_for_its_cuda() -> None:
    cuda = load_recipes().cuda
    for recipe in cuda:
        assert _texts(recipe.capabilities) == _kernel_builder_defaults(recipe.version), (
            recipe.version
        )
    assert {"12.8", "13.0"} <= {recipe.version for recipe in cuda}
