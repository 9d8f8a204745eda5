"""This machine's GPUs (compat.gpus): nvidia-smi's answer read, and every way of having none
said. The nvidia-smi here is a script put first on PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kernelwheel.compat.gpus import Gpus, parse_capabilities, query_gpus


def fake_tool(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return tool


def test_parse_capabilities_dedupes_and_sorts() -> None:
    text = "9.0\n10.0\n9.0\n\n8.9\n[N/A]\n"
    assert parse_capabilities(text) == ("8.9", "9.0", "10.0")


def test_nvidia_smi_is_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tool(tmp_path / "bin", "nvidia-smi", 'echo "$@" > "$0.args"; printf "9.0\\n9.0\\n"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    gpus = query_gpus()
    assert gpus == Gpus(("9.0",), "nvidia-smi") and gpus.present
    args = (tmp_path / "bin" / "nvidia-smi.args").read_text().split()
    assert args == ["--query-gpu=compute_cap", "--format=csv,noheader"]
    assert gpus.describe() == "NVIDIA GPU 9.0 (nvidia-smi)"


def test_no_gpu_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    gpus = query_gpus()
    assert not gpus.present and gpus.describe() == "no NVIDIA GPU (nvidia-smi: not found)"
    fake_tool(tmp_path / "bin", "nvidia-smi", 'echo "NVIDIA-SMI has failed: no driver" >&2; exit 9')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert query_gpus().source == "nvidia-smi: exit 9, NVIDIA-SMI has failed: no driver"


def test_without_nvidia_smi_the_interpreters_torch_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    # A stand-in interpreter that answers as torch.cuda would on a machine with two GPUs.
    python = fake_tool(tmp_path / "py", "python", 'printf "8.6\\n12.0\\n"')
    gpus = query_gpus(python)
    assert gpus == Gpus(("8.6", "12.0"), f"torch.cuda of {python}")
    # This interpreter (no CUDA torch here, or no torch): no GPU, both reasons given.
    none = query_gpus(Path(sys.executable))
    assert not none.present and none.source.startswith("nvidia-smi: not found; torch.cuda of")
