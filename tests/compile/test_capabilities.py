"""cuda-capabilities are checked against what the variant's nvcc supports, before compiling
(issue 13 item 10): ``9.9``, ``1.0`` and ``99.9f`` are refused with nvcc's list in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwheel.errors import ToolchainError
from kernelwheel.model.capability import CudaCapability, parse_all
from kernelwheel.toolchain.envs import CudaToolkit, refuse_unsupported, supported_capabilities

NVCC13 = Path("/usr/local/cuda-13.0")


def check_capabilities(
    capabilities: tuple[CudaCapability, ...], toolkit: CudaToolkit, *, where: str, hint_key: str
) -> None:
    """refuse_unsupported against the toolkit's own nvcc's list; nothing without one."""
    supported = supported_capabilities(toolkit.home)
    if supported is not None:
        refuse_unsupported(capabilities, supported, toolkit, where=where, hint_key=hint_key)


def fake_toolkit(tmp_path: Path, listing: str, code: int = 0) -> CudaToolkit:
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\nprintf '%s' '{listing}'\nexit {code}\n")
    nvcc.chmod(0o755)
    return CudaToolkit(tmp_path, "13.0")


LISTING = "compute_75 compute_80 compute_86 compute_90 compute_100 compute_120\n"


@pytest.mark.parametrize("bad", ["9.9", "1.0", "99.9f", "8.9"])
def test_unknown_capabilities_are_refused_with_the_list(tmp_path: Path, bad: str) -> None:
    toolkit = fake_toolkit(tmp_path, LISTING)
    with pytest.raises(ToolchainError) as info:
        check_capabilities(
            parse_all(["8.0", bad]),
            toolkit,
            where="build.toml",
            hint_key="kernel.x.cuda-capabilities",
        )
    message = str(info.value)
    assert f"cannot compile for {bad!r}" in message
    assert "it supports 7.5, 8.0, 8.6, 9.0, 10.0, 12.0" in message
    assert "kernel.x.cuda-capabilities" in message and "'8.0'" not in message.split("supports")[0]


def test_known_capabilities_with_suffixes_pass(tmp_path: Path) -> None:
    toolkit = fake_toolkit(tmp_path, LISTING)
    check_capabilities(parse_all(["9.0a", "10.0f", "12.0+PTX"]), toolkit, where="w", hint_key="k")


def test_an_nvcc_that_cannot_list_checks_nothing(tmp_path: Path) -> None:
    toolkit = fake_toolkit(tmp_path, "nvcc fatal: Unknown option", code=1)
    assert supported_capabilities(toolkit.home) is None
    check_capabilities(parse_all(["9.9"]), toolkit, where="w", hint_key="k")


@pytest.mark.skipif(not (NVCC13 / "bin" / "nvcc").exists(), reason="no CUDA 13.0 toolkit")
def test_real_nvcc_13() -> None:
    supported = supported_capabilities(NVCC13)
    assert supported is not None and "9.0" in supported and "12.0" in supported
    assert "7.0" not in supported  # dropped in CUDA 13
    with pytest.raises(ToolchainError, match="cannot compile for '7.0'"):
        check_capabilities(parse_all(["7.0"]), CudaToolkit(NVCC13, "13.0"), where="w", hint_key="k")
