"""One parser of CUDA capabilities (model/capability.CudaCapability), and every reader of one
(build.toml, the recipes, --cuda-capabilities / [tool.kernelwheel]) refusing the same values."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwheel.errors import ProjectError, UsageError, VariantError
from kernelwheel.model.capability import CudaCapability
from kernelwheel.model.project import load_project
from kernelwheel.plan.options import resolve_options

GOOD = ["8.0", "9.0a", "10.0f", "12.0+PTX", "10.3a+PTX", "99.9"]
BAD = ["0.0", "9.10", "9", "90", "sm_90a", "9.0b", "9.0+ptx", "09.0", "9.0 ", "", "9.0PTX"]


@pytest.mark.parametrize("text", GOOD)
def test_parse_and_format_round_trip(text: str) -> None:
    assert str(CudaCapability.parse(text)) == text


def test_parts() -> None:
    cap = CudaCapability.parse("10.3a+PTX")
    assert (cap.major, cap.minor, cap.suffix, cap.ptx) == (10, 3, "a", True)
    assert cap.base == "10.3" and cap.digits == "103a"
    order = sorted(
        map(CudaCapability.parse, ["10.0", "9.0f", "9.0", "9.0a+PTX", "8.9"]),
        key=lambda c: c.sort_key,
    )
    assert [str(c) for c in order] == ["8.9", "9.0", "9.0a+PTX", "9.0f", "10.0"]


@pytest.mark.parametrize("text", BAD)
def test_invalid(text: str) -> None:
    with pytest.raises(VariantError, match="invalid CUDA capability"):
        CudaCapability.parse(text)


def test_a_digits_form_gets_its_dotted_spelling() -> None:
    with pytest.raises(VariantError) as info:
        CudaCapability.parse("sm_90a")
    assert info.value.hint == 'write it as "9.0a"'


BUILD_TOML = """
[general]
name = "kk"
backends = ["cuda"]
[torch]
src = ["b.cpp"]
[kernel.k]
backend = "cuda"
src = ["k.cu"]
cuda-capabilities = ["{cap}"]
"""


def _project(root: Path, cap: str) -> Path:
    (root / "torch-ext" / "kk").mkdir(parents=True)
    (root / "torch-ext" / "kk" / "__init__.py").write_text("")
    (root / "b.cpp").write_text("")
    (root / "k.cu").write_text("")
    (root / "build.toml").write_text(BUILD_TOML.format(cap=cap))
    return root


@pytest.mark.parametrize("text", ["0.0", "9.10", "sm_90"])
def test_build_toml_and_the_option_refuse_the_same(tmp_path: Path, text: str) -> None:
    """--cuda-capabilities "0.0 9.10" was accepted while build.toml refused both."""
    with pytest.raises(ProjectError, match="invalid CUDA capability"):
        load_project(_project(tmp_path / "p", text))
    with pytest.raises(UsageError, match="invalid CUDA capability"):
        resolve_options(None, env={}, cli={"cuda_capabilities": f"8.0 {text}"})


@pytest.mark.parametrize("text", GOOD)
def test_build_toml_and_the_option_accept_the_same(tmp_path: Path, text: str) -> None:
    load_project(_project(tmp_path / "p", text))
    options = resolve_options(None, env={}, cli={"cuda_capabilities": text})
    assert options.cuda_capabilities == (CudaCapability.parse(text),)
