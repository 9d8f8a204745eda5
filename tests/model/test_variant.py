"""Variant value types: Hub names, local version labels, requirements and platform tags."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.version import Version

from kernelwheel.errors import VariantError
from kernelwheel.model.variant import (
    OS,
    Arch,
    Backend,
    BackendKind,
    CxxAbi,
    LocalVersionStyle,
    TorchVersion,
    Variant,
)

CUDA, ROCM, XPU, CPU, METAL = (
    BackendKind.CUDA,
    BackendKind.ROCM,
    BackendKind.XPU,
    BackendKind.CPU,
    BackendKind.METAL,
)
NEURON, TPU, CANN = BackendKind.NEURON, BackendKind.TPU, BackendKind.CANN
X86, ARM = Arch.X86_64, Arch.AARCH64
LINUX, DARWIN, WINDOWS = OS.LINUX, OS.DARWIN, OS.WINDOWS
CXX11, CXX98 = CxxAbi.CXX11, CxxAbi.CXX98


def T(major: int, minor: int) -> TorchVersion:
    return TorchVersion(major, minor)


def B(kind: BackendKind, *version: int) -> Backend:
    return Backend(kind, tuple(version) if version else None)


def noarch(kind: BackendKind | None) -> Variant:
    return Variant(None, None if kind is None else Backend(kind), None, None, None)


# ---------------------------------------------------------------------------------------------
# Strategies: every axis, valid combinations only.

torch_versions = st.builds(
    TorchVersion,
    major=st.integers(1, 9),
    minor=st.one_of(st.integers(0, 9), st.integers(10, 40)),  # two-digit minors on purpose
)
cuda_versions = st.tuples(st.integers(11, 13), st.integers(0, 9)).filter(lambda v: v >= (11, 8))
backend_by_kind = {
    CUDA: cuda_versions.map(lambda v: Backend(CUDA, v)),
    ROCM: st.tuples(st.integers(1, 20), st.integers(0, 9)).map(lambda v: Backend(ROCM, v)),
    XPU: st.tuples(st.integers(2024, 2030), st.integers(0, 15)).map(lambda v: Backend(XPU, v)),
    CPU: st.just(Backend(CPU)),
    METAL: st.just(Backend(METAL)),
    NEURON: st.just(Backend(NEURON)),
    TPU: st.just(Backend(TPU)),
    CANN: st.tuples(st.integers(1, 20), st.integers(0, 9)).map(lambda v: Backend(CANN, v)),
}
kinds_by_os = {
    LINUX: [CUDA, ROCM, XPU, CPU, NEURON, TPU, CANN],
    WINDOWS: [CUDA, XPU, CPU],
    DARWIN: [METAL, CPU],
}


@st.composite
def binary_variants(draw: st.DrawFn, os: OS | None = None) -> Variant:
    os_ = os if os is not None else draw(st.sampled_from(OS))
    backend = draw(st.sampled_from(kinds_by_os[os_]).flatmap(lambda k: backend_by_kind[k]))
    cxxabi = draw(st.sampled_from([None, CXX11, CXX98])) if os_ is LINUX else None
    return Variant(
        torch=draw(torch_versions),
        backend=backend,
        cxxabi=cxxabi,
        arch=draw(st.sampled_from(Arch)),
        os=os_,
        stable_abi=draw(st.booleans()),
    )


noarch_variants = st.sampled_from([None, *BackendKind]).map(noarch)
variants = st.one_of(binary_variants(), noarch_variants)


# ---------------------------------------------------------------------------------------------
# TorchVersion


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2.7", T(2, 7)), ("2.10", T(2, 10)), ("2.10.1", T(2, 10)), ("2.10.0+cu130", T(2, 10))],
)
def test_torch_version_parse(text: str, expected: TorchVersion) -> None:
    assert TorchVersion.parse(text) == expected


@pytest.mark.parametrize("text", ["", "2", "210", "two.ten", "2.x", "10.1"])
def test_torch_version_parse_rejects(text: str) -> None:
    with pytest.raises(VariantError, match="e.g."):
        TorchVersion.parse(text)


def test_torch_version_parse_points_compact_input_to_from_compact() -> None:
    with pytest.raises(VariantError, match="from_compact"):
        TorchVersion.parse("210")


@pytest.mark.parametrize(
    ("compact", "expected"),
    [("27", T(2, 7)), ("210", T(2, 10)), ("213", T(2, 13)), ("20", T(2, 0)), ("19", T(1, 9))],
)
def test_torch_version_compact(compact: str, expected: TorchVersion) -> None:
    assert TorchVersion.from_compact(compact) == expected
    assert expected.compact == compact


def test_torch_version_str_and_order() -> None:
    assert str(T(2, 10)) == "2.10"
    assert T(2, 9) < T(2, 10) < T(3, 0)
    assert TorchVersion.from_compact("210") == T(2, 10)  # never 21.0: the major is one digit


@pytest.mark.parametrize("compact", ["", "2", "205", "2x", "x27", "2.7"])
def test_torch_version_from_compact_rejects(compact: str) -> None:
    with pytest.raises(VariantError, match=repr(compact).replace(".", r"\.")):
        TorchVersion.from_compact(compact)


@pytest.mark.parametrize(("major", "minor"), [(10, 0), (-1, 0), (2, -1), (True, 1), (2, "7")])
def test_torch_version_rejects_bad_fields(major: object, minor: object) -> None:
    with pytest.raises(VariantError):
        TorchVersion(major, minor)  # type: ignore[arg-type]


@given(torch_versions)
def test_torch_version_round_trips(t: TorchVersion) -> None:
    assert TorchVersion.from_compact(t.compact) == t
    assert TorchVersion.parse(str(t)) == t


# ---------------------------------------------------------------------------------------------
# Backend


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("cu128", B(CUDA, 12, 8)),
        ("cu130", B(CUDA, 13, 0)),
        ("cu118", B(CUDA, 11, 8)),
        ("rocm63", B(ROCM, 6, 3)),
        ("xpu20251", B(XPU, 2025, 1)),
        ("cpu", B(CPU)),
        ("metal", B(METAL)),
        ("cuda", B(CUDA)),
    ],
)
def test_backend_token_round_trip(token: str, expected: Backend) -> None:
    assert Backend.parse_token(token) == expected
    assert expected.token == token
    assert str(expected) == token


@pytest.mark.parametrize(
    ("token", "expected"),
    [("rocm6.3", B(ROCM, 6, 3)), ("cu12.8", B(CUDA, 12, 8)), ("xpu2025.1", B(XPU, 2025, 1))],
)
def test_backend_accepts_dotted_input(token: str, expected: Backend) -> None:
    assert Backend.parse_token(token) == expected
    assert "." not in expected.token


@pytest.mark.parametrize(
    "token", ["", "cu", "cu1", "cu08", "cucpu", "curocm63", "rocm6.10", "xpu2025", "gpu"]
)
def test_backend_rejects(token: str) -> None:
    with pytest.raises(VariantError) as info:
        Backend.parse_token(token)
    assert repr(token) in str(info.value) and "cu128" in str(info.value)


@pytest.mark.parametrize(
    ("kind", "version"),
    [(CPU, (1, 0)), (METAL, (3, 0)), (CUDA, (12, 10)), (CUDA, (12,)), (CUDA, (12, 8, 1)),
     (XPU, (25, 1)), (ROCM, (0, 3)), (CUDA, [12, 8])],
)  # fmt: skip
def test_backend_rejects_bad_versions(kind: BackendKind, version: object) -> None:
    with pytest.raises(VariantError):
        Backend(kind, version)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("token", "expected"),
    [("cann83", B(CANN, 8, 3)), ("cann8.3", B(CANN, 8, 3)), ("npu", B(CANN)), ("cann", B(CANN)),
     ("neuron", B(NEURON)), ("tpu", B(TPU)), ("rocm71", B(ROCM, 7, 1)),
     ("xpu20260", B(XPU, 2026, 0))],
)  # fmt: skip
def test_backend_tokens_of_every_kernel_builder_backend(token: str, expected: Backend) -> None:
    assert Backend.parse_token(token) == expected
    # One spelling is written: CANN's versionless backend is npu (torch-npu), never cann.
    assert Backend.parse_token(expected.token) == expected
    assert expected.token != "cann"


def test_backend_kinds_are_kernel_builders_backends_with_display_names() -> None:
    assert sorted(k.value for k in BackendKind) == [
        "cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu"
    ]  # fmt: skip
    assert [BackendKind.ROCM.display_name, METAL.display_name, CANN.display_name] == [
        "ROCm",
        "Metal",
        "CANN",
    ]


def test_backend_rejects_plain_string_kind() -> None:
    with pytest.raises(VariantError, match="BackendKind"):
        Backend("cuda")  # type: ignore[arg-type]


def test_cuda_version() -> None:
    assert B(CUDA, 12, 8).cuda_version == "12.8"
    assert B(CUDA, 13, 0).cuda_version == "13.0"
    for backend in (B(ROCM, 6, 3), B(CPU), B(CUDA)):
        with pytest.raises(VariantError, match=backend.token):
            _ = backend.cuda_version


def test_backend_order_puts_versionless_first() -> None:
    mixed = [B(CUDA, 12, 8), B(CUDA), B(CUDA, 11, 8), B(CUDA, 13, 0)]
    assert sorted(mixed) == [B(CUDA), B(CUDA, 11, 8), B(CUDA, 12, 8), B(CUDA, 13, 0)]
    assert B(CUDA, 12, 8) <= B(CUDA, 12, 8) < B(CUDA, 12, 9)


@given(st.sampled_from(BackendKind).flatmap(lambda k: backend_by_kind[k]))
def test_backend_token_round_trips(backend: Backend) -> None:
    assert Backend.parse_token(backend.token) == backend


# ---------------------------------------------------------------------------------------------
# Hub names

HUB_NAMES = {
    "torch27-cxx11-cu128-x86_64-linux": Variant(T(2, 7), B(CUDA, 12, 8), CXX11, X86, LINUX),
    "torch210-cxx11-cu130-x86_64-linux": Variant(T(2, 10), B(CUDA, 13, 0), CXX11, X86, LINUX),
    "torch26-cxx98-cu118-aarch64-linux": Variant(T(2, 6), B(CUDA, 11, 8), CXX98, ARM, LINUX),
    "torch27-cxx11-rocm63-x86_64-linux": Variant(T(2, 7), B(ROCM, 6, 3), CXX11, X86, LINUX),
    "torch28-cxx11-xpu20251-x86_64-linux": Variant(T(2, 8), B(XPU, 2025, 1), CXX11, X86, LINUX),
    "torch213-cxx11-cpu-x86_64-linux": Variant(T(2, 13), B(CPU), CXX11, X86, LINUX),
    "torch211-cu128-x86_64-windows": Variant(T(2, 11), B(CUDA, 12, 8), None, X86, WINDOWS),
    "torch28-metal-aarch64-darwin": Variant(T(2, 8), B(METAL), None, ARM, DARWIN),
    "torch29-cu130-x86_64-linux": Variant(T(2, 9), B(CUDA, 13, 0), None, X86, LINUX),
    "torch-universal": noarch(None),
    "torch-cpu": noarch(CPU),
    "torch-cuda": noarch(CUDA),
    "torch-rocm": noarch(ROCM),
    "torch-metal": noarch(METAL),
    "torch-xpu": noarch(XPU),
    "torch-neuron": noarch(NEURON),
    "torch-tpu": noarch(TPU),
    "torch-npu": noarch(CANN),  # CANN's noarch variant is named for its device, as in kernels
    "torch213-cxx11-rocm71-x86_64-linux": Variant(T(2, 13), B(ROCM, 7, 1), CXX11, X86, LINUX),
    "torch212-cxx11-xpu20253-x86_64-linux": Variant(T(2, 12), B(XPU, 2025, 3), CXX11, X86, LINUX),
    "torch213-metal-aarch64-darwin": Variant(T(2, 13), B(METAL), None, ARM, DARWIN),
    "torch211-cxx11-tpu-x86_64-linux": Variant(T(2, 11), B(TPU), CXX11, X86, LINUX),
    "torch29-cxx11-neuron-x86_64-linux": Variant(T(2, 9), B(NEURON), CXX11, X86, LINUX),
    "torch29-cxx11-cann83-aarch64-linux": Variant(T(2, 9), B(CANN, 8, 3), CXX11, ARM, LINUX),
    "torch-stable-abi210-cu130-x86_64-linux": Variant(
        T(2, 10), B(CUDA, 13, 0), None, X86, LINUX, stable_abi=True
    ),
    "torch-stable-abi29-cxx11-cu128-aarch64-linux": Variant(
        T(2, 9), B(CUDA, 12, 8), CXX11, ARM, LINUX, stable_abi=True
    ),
}


@pytest.mark.parametrize(("name", "expected"), HUB_NAMES.items(), ids=list(HUB_NAMES))
def test_hub_name_round_trip(name: str, expected: Variant) -> None:
    parsed = Variant.parse(name)
    assert parsed == expected
    assert parsed.name == name
    assert str(parsed) == name
    assert parsed.noarch == (name.count("-") == 1)


# (name, text the message must contain: the bad part)
BAD_NAMES = [
    ("torch2-cxx11-cu128-x86_64-linux", "'torch2'"),
    ("torch27-cxx12-cu128-x86_64-linux", "'cxx12'"),
    ("torch27-cxx11-cu128-riscv-linux", "'riscv'"),
    ("torch27-cxx11-cu128-x86_64", "missing the OS part"),
    ("torch27-cxx11-x86_64-linux", "missing the arch part"),
    ("torch27-cxx11-cu128", "missing the arch and OS parts"),
    ("torch27", "missing the {backend}-{arch}-{os} parts"),
    ("torch27-cxx11-cu128-x86_64-linux-extra", "'extra'"),
    ("", "empty"),
    ("torch27-metal-x86_64-linux", "metal"),
    ("torch27-cxx11-cu128-x86_64-freebsd", "'freebsd'"),
    ("torch27-cxx11-gpu12-x86_64-linux", "'gpu12'"),
    ("torch27-cxx11-cucpu-x86_64-linux", "'cucpu'"),
    ("torch27-cxx11-cuda-x86_64-linux", "'cuda'"),
    ("torch205-cxx11-cu128-x86_64-linux", "'torch205'"),
    ("torchXY-cxx11-cu128-x86_64-linux", "'torchXY'"),
    ("pytorch27-cxx11-cu128-x86_64-linux", "'pytorch27'"),
    ("Torch27-cxx11-cu128-x86_64-linux", "'Torch27'"),
    ("torch-gpu", "'gpu'"),
    ("torch-stable-abi2-cu130-x86_64-linux", "'torch-stable-abi2'"),
    ("torch-stable-cu130-x86_64-linux", "'stable-cu130-x86_64-linux'"),
    ("torch211-cxx11-cu128-x86_64-windows", "'cxx11'"),
    ("torch28-cu128-aarch64-darwin", "'cu128'"),
    ("torch28-rocm63-x86_64-windows", "rocm"),
    ("torch27-cxx11-rocm6.10-x86_64-linux", "'rocm6.10'"),
    ("torch29-neuron-aarch64-darwin", "'neuron'"),
    ("torch29-cann83-x86_64-windows", "cann"),
    ("torch29-cxx11-cann-x86_64-linux", "'cann'"),
    ("torch29-cxx11-npu-x86_64-linux", "versioned cann backend such as 'cann83'"),
    ("torch-cann83", "'cann83'"),
]


@pytest.mark.parametrize(
    ("name", "bad_part"), BAD_NAMES, ids=[n or "<empty>" for n, _ in BAD_NAMES]
)
def test_bad_hub_names(name: str, bad_part: str) -> None:
    with pytest.raises(VariantError) as info:
        Variant.parse(name)
    message = str(info.value)
    assert bad_part in message
    assert repr(name) in message
    assert "e.g. 'torch" in message  # a valid example to copy
    example = message.split("e.g. ")[1].split("'")[1]
    if example.startswith("torch"):
        Variant.parse(example)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(VariantError, match="must be a str"):
        Variant.parse(None)  # type: ignore[arg-type]


@given(variants)
def test_name_round_trips(v: Variant) -> None:
    assert Variant.parse(v.name) == v
    assert Variant.parse(v.name).name == v.name


# ---------------------------------------------------------------------------------------------
# Local version labels

LOCALS = {
    "torch27-cxx11-cu128-x86_64-linux": "torch2.7.cu128.cxx11",
    "torch210-cxx11-cu130-x86_64-linux": "torch2.10.cu130.cxx11",
    "torch213-cxx11-cpu-x86_64-linux": "torch2.13.cpu.cxx11",
    "torch27-cxx11-rocm63-x86_64-linux": "torch2.7.rocm63.cxx11",
    "torch28-cxx11-xpu20251-x86_64-linux": "torch2.8.xpu20251.cxx11",
    "torch211-cu128-x86_64-windows": "torch2.11.cu128",
    "torch28-metal-aarch64-darwin": "torch2.8.metal",
    "torch-stable-abi210-cu130-x86_64-linux": "torch2.10.stable.cu130",
    "torch-stable-abi29-cxx11-cu128-aarch64-linux": "torch2.9.stable.cu128.cxx11",
    "torch-universal": "universal",
    "torch-cpu": "cpu",
    "torch-cuda": "cuda",
    "torch-rocm": "rocm",
    "torch-metal": "metal",
    "torch-xpu": "xpu",
    "torch-neuron": "neuron",
    "torch-tpu": "tpu",
    "torch-npu": "npu",
    "torch213-cxx11-rocm71-x86_64-linux": "torch2.13.rocm71.cxx11",
    "torch29-cxx11-cann83-aarch64-linux": "torch2.9.cann83.cxx11",
    "torch211-cxx11-tpu-x86_64-linux": "torch2.11.tpu.cxx11",
}


@pytest.mark.parametrize(("name", "local"), LOCALS.items(), ids=list(LOCALS))
def test_local_version_round_trip(name: str, local: str) -> None:
    v = Variant.parse(name)
    assert v.local_version == local
    assert Variant.from_local_version(local, arch=v.arch, os=v.os) == v


@pytest.mark.parametrize(
    ("legacy", "expected"),
    [
        ("torch27cu128cxx11", "torch27-cxx11-cu128-x86_64-linux"),
        ("torch26cu118cxx98", "torch26-cxx98-cu118-x86_64-linux"),
        ("torch210cu130cxx11", "torch210-cxx11-cu130-x86_64-linux"),
        ("torch27cu128", "torch27-cu128-x86_64-linux"),
        ("torch27rocm63cxx11", "torch27-cxx11-rocm63-x86_64-linux"),
        ("torch213cpucxx11", "torch213-cxx11-cpu-x86_64-linux"),
        ("TORCH27CU128CXX11", "torch27-cxx11-cu128-x86_64-linux"),
        ("torch27-cu128-cxx11", "torch27-cxx11-cu128-x86_64-linux"),
    ],
)
def test_legacy_compact_local_versions(legacy: str, expected: str) -> None:
    assert Variant.from_local_version(legacy, arch=X86, os=LINUX) == Variant.parse(expected)


def test_seed_wheel_local_version_reads_back() -> None:
    # img2grey-1.1.2+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl
    local = Version("1.1.2+torch27cu128cxx11").local
    assert local is not None
    v = Variant.from_local_version(local, arch=X86, os=LINUX)
    assert v.name == "torch27-cxx11-cu128-x86_64-linux"
    assert v.local_version == "torch2.7.cu128.cxx11"


@pytest.mark.parametrize(
    "spelling",
    ["torch2.10.cu130.cxx11", "TORCH2.10.CU130.CXX11", "torch2-10-cu130-cxx11",
     "torch2_10_cu130_cxx11", "Torch2.10-cu130_cxx11", "torch2.010.cu130.cxx11"],
)  # fmt: skip
def test_local_version_pep440_spellings(spelling: str) -> None:
    expected = Variant.parse("torch210-cxx11-cu130-x86_64-linux")
    assert Variant.from_local_version(spelling, arch=X86, os=LINUX) == expected


BAD_LOCALS = [
    ("", "expected torch{MAJ}.{MIN}"),
    ("torch2.7", "expected torch{MAJ}.{MIN}"),
    ("torch2.7.cucpu.cxx11", "'cucpu'"),
    ("torch27cucpucxx11", "expected torch{MAJ}.{MIN}"),
    ("torch2.7.curocm63", "'curocm63'"),
    ("torch2.7.cu128.cxx12", "'cxx12'"),
    ("torch2.7.rocm6.3", "expected torch{MAJ}.{MIN}"),
    ("torch2cu128cxx11", "'2'"),
    ("torch205cu128", "'205'"),
    ("torch2.7.cu128.cxx11.extra", "expected torch{MAJ}.{MIN}"),
    ("torch2.7.cuda", "'cuda'"),
    ("gpu", "expected torch{MAJ}.{MIN}"),
]


@pytest.mark.parametrize(
    ("local", "bad_part"), BAD_LOCALS, ids=[b or "<empty>" for b, _ in BAD_LOCALS]
)
def test_bad_local_versions(local: str, bad_part: str) -> None:
    with pytest.raises(VariantError) as info:
        Variant.from_local_version(local, arch=X86, os=LINUX)
    message = str(info.value)
    assert bad_part in message and repr(local) in message
    assert "e.g. " in message


def test_local_version_platform_comes_from_the_caller() -> None:
    with pytest.raises(VariantError, match="needs arch= and os="):
        Variant.from_local_version("torch2.7.cu128.cxx11", arch=None, os=None)
    with pytest.raises(VariantError, match="noarch label takes arch=None"):
        Variant.from_local_version("cuda", arch=X86, os=LINUX)
    with pytest.raises(VariantError, match="metal"):
        Variant.from_local_version("torch2.8.metal", arch=X86, os=LINUX)
    darwin = Variant.from_local_version("torch2.8.metal", arch=ARM, os=DARWIN)
    assert darwin.name == "torch28-metal-aarch64-darwin"


@given(variants)
def test_local_version_round_trips(v: Variant) -> None:
    local = v.local_version
    assert Variant.from_local_version(local, arch=v.arch, os=v.os) == v
    version = Version(f"1.0+{local}")
    assert str(version) == f"1.0+{local}"
    assert version.local == local
    assert "cucpu" not in local and "curocm" not in local and "cuxpu" not in local


@given(variants, st.data())
def test_local_version_normalised_spellings(v: Variant, data: st.DataObject) -> None:
    pieces = v.local_version.split(".")
    n = len(pieces) - 1
    seps = data.draw(st.lists(st.sampled_from(".-_"), min_size=n, max_size=n))
    spelled = pieces[0] + "".join(sep + piece for sep, piece in zip(seps, pieces[1:], strict=True))
    if data.draw(st.booleans()):
        spelled = spelled.upper()
    assert Variant.from_local_version(spelled, arch=v.arch, os=v.os) == v
    normalised = Version(f"1.0+{spelled}").local
    assert normalised == v.local_version


@given(binary_variants(), torch_versions, torch_versions)
def test_local_version_orders_by_torch(v: Variant, a: TorchVersion, b: TorchVersion) -> None:
    va = Version(f"1.0+{replace(v, torch=a).local_version}")
    vb = Version(f"1.0+{replace(v, torch=b).local_version}")
    assert (va < vb) == (a < b)
    assert (va == vb) == (a == b)


def test_local_version_orders_two_digit_minor_numerically() -> None:
    v = Variant.parse("torch29-cxx11-cu130-x86_64-linux")
    assert Version(f"1.0+{replace(v, torch=T(2, 10)).local_version}") > Version(
        f"1.0+{v.local_version}"
    )


@given(binary_variants(os=LINUX), cuda_versions, cuda_versions)
def test_local_version_orders_by_cuda(v: Variant, a: tuple[int, int], b: tuple[int, int]) -> None:
    va = Version(f"1.0+{replace(v, backend=Backend(CUDA, a)).local_version}")
    vb = Version(f"1.0+{replace(v, backend=Backend(CUDA, b)).local_version}")
    assert (va < vb) == (a < b)


# ---------------------------------------------------------------------------------------------
# Requirements, platform tags, construction


@pytest.mark.parametrize(
    ("name", "requirement"),
    [
        ("torch27-cxx11-cu128-x86_64-linux", "torch==2.7.*"),
        ("torch210-cxx11-cu130-x86_64-linux", "torch==2.10.*"),
        ("torch27-cxx11-rocm63-x86_64-linux", "torch==2.7.*"),
        ("torch28-cxx11-xpu20251-x86_64-linux", "torch==2.8.*"),
        ("torch213-cxx11-cpu-x86_64-linux", "torch==2.13.*"),
        ("torch28-metal-aarch64-darwin", "torch==2.8.*"),
        ("torch-stable-abi210-cu130-x86_64-linux", "torch>=2.10"),
        ("torch-universal", "torch"),
        ("torch-cuda", "torch"),
        ("torch-metal", "torch"),
    ],
)
def test_torch_requirement(name: str, requirement: str) -> None:
    assert Variant.parse(name).torch_requirement() == requirement


@given(variants)
def test_torch_requirement_selects_the_right_torch(v: Variant) -> None:
    spec = Requirement(v.torch_requirement()).specifier
    if v.torch is None:
        assert str(spec) == ""
        return
    t = v.torch
    assert spec.contains(f"{t}.3")
    assert spec.contains(f"{t.major}.{t.minor + 1}.0") == v.stable_abi
    if t.minor > 0:
        assert not spec.contains(f"{t.major}.{t.minor - 1}.0")


@pytest.mark.parametrize(
    ("name", "manylinux", "tag"),
    [
        ("torch27-cxx11-cu128-x86_64-linux", "manylinux_2_28", "manylinux_2_28_x86_64"),
        ("torch26-cxx98-cu118-aarch64-linux", "manylinux_2_28", "manylinux_2_28_aarch64"),
        ("torch27-cxx11-cu128-x86_64-linux", "manylinux2014", "manylinux2014_x86_64"),
        ("torch27-cxx11-cu128-x86_64-linux", None, "linux_x86_64"),
        ("torch26-cxx98-cu118-aarch64-linux", None, "linux_aarch64"),
        ("torch28-metal-aarch64-darwin", "manylinux_2_28", "macosx_11_0_arm64"),
        ("torch28-cpu-x86_64-darwin", "manylinux_2_28", "macosx_10_15_x86_64"),
        ("torch211-cu128-x86_64-windows", "manylinux_2_28", "win_amd64"),
        ("torch211-cpu-aarch64-windows", None, "win_arm64"),
        ("torch-universal", "manylinux_2_28", "any"),
        ("torch-cuda", None, "any"),
    ],
)
def test_platform_tag(name: str, manylinux: str | None, tag: str) -> None:
    assert Variant.parse(name).platform_tag(manylinux) == tag


def test_platform_tag_default_and_bad_policy() -> None:
    v = Variant.parse("torch27-cxx11-cu128-x86_64-linux")
    assert v.platform_tag() == "manylinux_2_28_x86_64"
    with pytest.raises(VariantError, match="'manylinux_2_28_x86_64'"):
        v.platform_tag("manylinux_2_28_x86_64")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(torch=None, backend=B(CUDA, 12, 8), cxxabi=None, arch=None, os=None), "version"),
        (dict(torch=None, backend=None, cxxabi=None, arch=X86, os=None), "arch"),
        (dict(torch=None, backend=None, cxxabi=None, arch=None, os=LINUX), "os"),
        (dict(torch=None, backend=None, cxxabi=CXX11, arch=None, os=None), "cxxabi"),
        (dict(torch=None, backend=B(CPU), cxxabi=None, arch=None, os=None, stable_abi=True),
         "stable_abi"),
        (dict(torch=T(2, 7), backend=None, cxxabi=None, arch=X86, os=LINUX), "backend"),
        (dict(torch=T(2, 7), backend=B(CUDA, 12, 8), cxxabi=None, arch=None, os=LINUX), "arch"),
        (dict(torch=T(2, 7), backend=B(CUDA, 12, 8), cxxabi=None, arch=X86, os=None), "os"),
        (dict(torch=T(2, 7), backend=B(METAL), cxxabi=None, arch=ARM, os=WINDOWS), "metal"),
        (dict(torch=T(2, 7), backend=B(XPU, 2025, 1), cxxabi=None, arch=ARM, os=DARWIN),
         "darwin"),
        (dict(torch=T(2, 7), backend=B(ROCM, 6, 3), cxxabi=None, arch=X86, os=WINDOWS), "rocm"),
        (dict(torch=T(2, 7), backend=B(CPU), cxxabi=CXX11, arch=ARM, os=DARWIN), "cxx11"),
        (dict(torch="2.7", backend=B(CPU), cxxabi=None, arch=X86, os=LINUX), "TorchVersion"),
        (dict(torch=T(2, 7), backend="cu128", cxxabi=None, arch=X86, os=LINUX), "Backend"),
        (dict(torch=T(2, 7), backend=B(CPU), cxxabi="cxx11", arch=X86, os=LINUX), "CxxAbi"),
        (dict(torch=T(2, 7), backend=B(CPU), cxxabi=None, arch="x86_64", os=LINUX), "Arch"),
        (dict(torch=T(2, 7), backend=B(CPU), cxxabi=None, arch=X86, os="linux"), "OS"),
        (dict(torch=T(2, 7), backend=B(CPU), cxxabi=None, arch=X86, os=LINUX, stable_abi=1),
         "bool"),
    ],
)  # fmt: skip
def test_variant_rejects_bad_combinations(fields: dict[str, object], message: str) -> None:
    with pytest.raises(VariantError, match=message):
        Variant(**fields)  # type: ignore[arg-type]


def test_replace_validates_and_keeps_other_fields() -> None:
    v = Variant.parse("torch27-cxx11-cu128-x86_64-linux")
    assert replace(v, torch=T(2, 10)).name == "torch210-cxx11-cu128-x86_64-linux"
    assert replace(v, stable_abi=True, cxxabi=None).name == "torch-stable-abi27-cu128-x86_64-linux"
    with pytest.raises(VariantError, match="metal"):
        replace(v, backend=B(METAL))


def test_variants_are_hashable_values() -> None:
    names = list(HUB_NAMES)
    assert len({Variant.parse(n) for n in names + names}) == len(names)


COMPACT = {
    "torch27-cxx11-cu128-x86_64-linux": "torch27cu128cxx11",
    "torch210-cxx11-cu130-x86_64-linux": "torch210cu130cxx11",
    "torch29-cxx11-cpu-x86_64-linux": "torch29cpucxx11",
    "torch27-cxx11-rocm63-x86_64-linux": "torch27rocm63cxx11",
    "torch29-cxx11-xpu20251-x86_64-linux": "torch29xpu20251cxx11",
    "torch28-metal-aarch64-darwin": "torch28metal",
}


@pytest.mark.parametrize(("name", "label"), COMPACT.items(), ids=list(COMPACT))
def test_compact_style_is_the_designs_form_and_reads_back(name: str, label: str) -> None:
    variant = Variant.parse(name)
    assert variant.local_version_in(LocalVersionStyle.COMPACT) == label
    assert variant.local_version_in(LocalVersionStyle.DOTTED) == variant.local_version
    for style in LocalVersionStyle:
        text = variant.local_version_in(style)
        assert Variant.from_local_version(text, arch=variant.arch, os=variant.os) == variant


def test_noarch_labels_are_the_same_in_both_styles() -> None:
    for name in ("torch-cuda", "torch-universal"):
        variant = Variant.parse(name)
        labels = {variant.local_version_in(style) for style in LocalVersionStyle}
        assert labels == {variant.local_version}


def test_why_dotted_is_the_default_pep440_order() -> None:
    """Dotted orders torch minors numerically; compact compares one string segment."""
    names = ["torch29-cxx11-cu130-x86_64-linux", "torch210-cxx11-cu130-x86_64-linux"]
    names.append("torch214-cxx11-cu130-x86_64-linux")

    def order(style: LocalVersionStyle) -> list[str]:
        versions = [f"1.0+{Variant.parse(n).local_version_in(style)}" for n in names]
        return [str(v) for v in sorted(Version(v) for v in versions)]

    assert order(LocalVersionStyle.DOTTED) == [
        "1.0+torch2.9.cu130.cxx11",
        "1.0+torch2.10.cu130.cxx11",
        "1.0+torch2.14.cu130.cxx11",
    ]
    assert order(LocalVersionStyle.COMPACT) == [
        "1.0+torch210cu130cxx11",
        "1.0+torch214cu130cxx11",
        "1.0+torch29cu130cxx11",
    ]
