"""The compatibility rules (kernelwheel.compat.rules) in isolation: the facts read from torch,
the refusals, the preference order, and the label formatter kept in step with Variant."""

from __future__ import annotations

import types

import pytest

from kernelwheel.compat import rules as compat
from kernelwheel.compat.builds import build_of, variant_of_wheel
from kernelwheel.model.variant import OS, Arch, Variant


def _torch(version: str, **versions: str | None) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        __version__=version,
        version=types.SimpleNamespace(**{"cuda": None, "hip": None, **versions}),
        _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True),
    )


@pytest.mark.parametrize(
    ("torch", "token", "described"),
    [
        (_torch("2.14.1+cu130", cuda="13.0"), "cu130", "torch 2.14.1+cu130 (CUDA 13.0, cxx11 ABI)"),
        (_torch("2.13.0+cpu"), "cpu", "torch 2.13.0+cpu (CPU, cxx11 ABI)"),
        (_torch("2.7.1+rocm6.3", hip="6.3.42131-fa1d09cbd"), "rocm63", "(ROCm 6.3, cxx11 ABI)"),
        (_torch("2.8.0+xpu", xpu="20250101"), "xpu20251", "(xpu20251, cxx11 ABI)"),
    ],
)
def test_torch_facts(torch: types.SimpleNamespace, token: str, described: str) -> None:
    facts = compat.torch_facts(torch)
    assert facts.token == token and described in facts.describe()


@pytest.mark.parametrize(
    "name",
    [
        "torch214-cxx11-cu130-x86_64-linux",
        "torch210-cxx11-cu128-aarch64-linux",
        "torch213-cxx98-cpu-x86_64-linux",
        "torch27-cxx11-rocm63-x86_64-linux",
        "torch28-cxx11-xpu20251-x86_64-linux",
    ],
)
def test_label_agrees_with_variant_and_both_spellings_read_back(name: str) -> None:
    """The guard's formatter (compat.label) in both spellings parses back to the variant the
    running torch needs, and its dotted form is Variant.local_version."""
    v = Variant.parse(name)
    assert v.torch is not None and v.backend is not None
    build = build_of(v)
    running = compat.Torch(
        f"{v.torch}.0",
        build.kind,
        build.version,
        v.cxxabi is not None and v.cxxabi.value == "cxx11",
    )
    assert compat.label(running, compact=False) == v.local_version
    compact = compat.label(running, compact=True)
    assert Variant.from_local_version(compact, arch=v.arch, os=v.os) == v
    assert compat.problems(build, running) == []


@pytest.mark.parametrize(
    ("filename", "name"),
    [
        ("k-1+torch210cu130cxx11-cp310-abi3-linux_x86_64.whl", "torch210-cxx11-cu130-x86_64-linux"),
        (
            "k-1+torch2.10.cu130.cxx11-cp310-abi3-linux_x86_64.whl",
            "torch210-cxx11-cu130-x86_64-linux",
        ),
        (
            "k-1+torch29cpucxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
            "torch29-cxx11-cpu-aarch64-linux",
        ),
        ("k-1+torch28metal-cp39-abi3-macosx_11_0_arm64.whl", "torch28-metal-aarch64-darwin"),
    ],
)
def test_both_spellings_of_a_wheel_name_give_one_variant(filename: str, name: str) -> None:
    assert variant_of_wheel(filename) == Variant.parse(name)


def test_refusals_and_preferences() -> None:
    cu13 = compat.Torch("2.14.1+cu130", compat.CUDA, (13, 0), True)
    cpu = compat.Torch("2.14.1+cpu", compat.CPU, None, True)
    cu128 = build_of(Variant.parse("torch214-cxx11-cu128-x86_64-linux"))
    cu131 = build_of(Variant.parse("torch214-cxx11-cu131-x86_64-linux"))
    cpu_build = build_of(Variant.parse("torch214-cxx11-cpu-x86_64-linux"))
    noarch_cuda = build_of(Variant.parse("torch-cuda"))
    stable = build_of(Variant.parse("torch-stable-abi210-cu130-x86_64-linux"))
    assert compat.problems(cu128, cu13) == ["CUDA major version (built with CUDA 12.8)"]
    assert compat.problems(cu131, cu13) == []  # same CUDA major
    assert compat.problems(noarch_cuda, cpu) == ["backend (a cuda build; this torch has no CUDA)"]
    assert compat.problems(stable, cu13) == []
    assert compat.problems(stable, compat.Torch("2.9.1", compat.CUDA, (13, 0), True)) == [
        "torch version (built for torch >= 2.10)"
    ]
    assert compat.problems(cpu_build, cu13) == []  # loads: CPU ops
    order = [build_of(Variant.parse("torch214-cxx11-cu130-x86_64-linux")), cu131, noarch_cuda]
    order += [build_of(None), cpu_build]
    assert [compat.preference(b, cu13) for b in order] == sorted(
        compat.preference(b, cu13) for b in order
    )
    assert [compat.kind_of(b, cu13) for b in order] == [
        compat.PER_TORCH,
        compat.PER_TORCH,
        compat.NOARCH,
        compat.UNIVERSAL,
        compat.CPU_FALLBACK,
    ]
    assert variant_of_wheel("k-1-py3-none-any.whl") is None
    assert build_of(variant_of_wheel("k-1+universal-py3-none-any.whl")) == build_of(None)
    assert Variant.from_local_version("torch210cu130cxx11", arch=Arch.X86_64, os=OS.LINUX).torch


def _build(name: str) -> compat.Build:
    return build_of(Variant.parse(name))


def test_kinds_are_preferred_per_torch_stable_tvm_ffi_noarch_universal() -> None:
    """The order of huggingface/kernels' variant choice (per-torch first, as issue 20 fixes it),
    each kind recognised from its variant name."""
    cu13 = compat.Torch("2.14.1+cu130", compat.CUDA, (13, 0), True)
    names = [
        "torch214-cxx11-cu130-x86_64-linux",
        "torch214-cxx11-cu131-x86_64-linux",
        "torch-stable-abi212-cu130-x86_64-linux",
        "torch-stable-abi210-cu130-x86_64-linux",
        "torch-stable-abi210-cu131-x86_64-linux",
        "tvm-ffi01-cu130-x86_64-linux",
        "torch-cuda",
        "torch-universal",
        "torch-stable-abi210-cpu-x86_64-linux",
    ]
    builds = [_build(n) for n in names]
    assert all(compat.problems(b, cu13) == [] for b in builds)
    ranked = sorted(builds, key=lambda b: compat.preference(b, cu13))
    assert ranked == builds
    assert [compat.kind_of(b, cu13) for b in builds] == [
        compat.PER_TORCH,
        compat.PER_TORCH,
        compat.STABLE_ABI,
        compat.STABLE_ABI,
        compat.STABLE_ABI,
        compat.TVM_FFI,
        compat.NOARCH,
        compat.UNIVERSAL,
        compat.CPU_FALLBACK,
    ]


def test_a_tvm_ffi_wheel_is_read_as_tvm_ffi_not_noarch() -> None:
    build = build_of(variant_of_wheel("k-1+tvmffi0.1.cu130-py3-none-manylinux_2_28_x86_64.whl"))
    assert build == compat.Build(None, compat.CUDA, (13, 0), None, False, (0, 1))
    assert compat.describe_build(build) == "apache-tvm-ffi 0.1 (no torch), CUDA 13.0"
    cpu = compat.Torch("2.13.0+cpu", compat.CPU, None, True)
    assert compat.problems(build, cpu) == ["backend (a cu130 build; this torch has no CUDA)"]
    cpu_build = build_of(Variant.parse("tvm-ffi01-cpu-x86_64-linux"))
    assert compat.problems(cpu_build, cpu) == []
    assert compat.kind_of(cpu_build, cpu) == compat.TVM_FFI


@pytest.mark.parametrize(
    ("name", "torch", "problem"),
    [
        (
            "torch-stable-abi214-cpu-x86_64-linux",
            compat.Torch("2.13.0+cpu", compat.CPU, None, True),
            "torch version (built for torch >= 2.14)",
        ),
        (
            "torch-stable-abi210-cu130-x86_64-linux",
            compat.Torch("2.14.1+cu128", compat.CUDA, (12, 8), True),
            "CUDA major version (built with CUDA 13.0)",
        ),
        (
            "torch-stable-abi210-cu130-x86_64-linux",
            compat.Torch("2.14.1+cpu", compat.CPU, None, True),
            "backend (a cu130 build; this torch has no CUDA)",
        ),
    ],
)
def test_stable_abi_refusals(name: str, torch: compat.Torch, problem: str) -> None:
    assert compat.problems(_build(name), torch) == [problem]
