"""This machine's GPUs (compat.gpus): nvidia-smi's answer read, and every way of having none
said. The nvidia-smi here is a script put first on PATH, or a scripted runner's answer; and
CUDA_VISIBLE_DEVICES read as CUDA reads it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.runners import Reply, ScriptedRunner

from kernelwheel.compat.gpus import Gpus, parse_capabilities, query_gpus
from kernelwheel.model.capability import CudaCapability, parse_all


def fake_tool(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return tool


def _texts(capabilities: tuple[CudaCapability, ...]) -> tuple[str, ...]:
    return tuple(str(c) for c in capabilities)


def test_parse_capabilities_dedupes_and_sorts() -> None:
    text = "9.0\n10.0\n9.0\n\n8.9\n[N/A]\n"
    assert _texts(parse_capabilities(text)) == ("8.9", "9.0", "10.0")


def test_nvidia_smi_is_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tool(
        tmp_path / "bin",
        "nvidia-smi",
        'echo "$@" > "$0.args"; printf "GPU-aa11, 9.0\\nGPU-bb22, 9.0\\n"',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    gpus = query_gpus()
    assert gpus == Gpus(parse_all(["9.0"]), "nvidia-smi") and gpus.present
    args = (tmp_path / "bin" / "nvidia-smi.args").read_text().split()
    assert args == ["--query-gpu=uuid,compute_cap", "--format=csv,noheader"]
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
    assert gpus == Gpus(parse_all(["8.6", "12.0"]), f"torch.cuda of {python}")
    # This interpreter (no CUDA torch here, or no torch): no GPU, both reasons given.
    none = query_gpus(Path(sys.executable))
    assert not none.present and none.source.startswith("nvidia-smi: not found; torch.cuda of")


# -- CUDA_VISIBLE_DEVICES, as CUDA reads it ----------------------------------------------------

# nvidia-smi's rows, PCI bus order: an RTX 4090 (8.9) first, then an H100 (9.0).
MIXED = "GPU-4090aaaa-0000, 8.9\nGPU-h100bbbb-1111, 9.0\n"


def smi(rows: str, torch: str | None = None) -> ScriptedRunner:
    """nvidia-smi answering ``rows``; an interpreter answering as torch.cuda would, ``torch``."""

    def answer(cmd: list[str], cwd: Path | None) -> Reply:
        if cmd[0] == "nvidia-smi":
            return Reply(stdout=rows)
        return Reply(stdout=torch or "") if torch is not None else Reply(code=1, stderr="no torch")

    return ScriptedRunner(answer)


@pytest.mark.parametrize(
    ("visible", "order", "capabilities"),
    [
        ("1", "PCI_BUS_ID", ("9.0",)),  # bus order asked for: nvidia-smi's index 1
        ("GPU-h100", None, ("9.0",)),  # a UUID prefix is unambiguous in any order
        ("GPU-4090aaaa-0000,GPU-h100bbbb-1111", None, ("8.9", "9.0")),
        ("0,7,1", "PCI_BUS_ID", ("8.9",)),  # CUDA stops at the first entry naming no GPU
        ("", None, ()),  # empty: every GPU hidden
        ("-1", None, ()),
        ("GPU-nothere", None, ()),
    ],
)
def test_visible_devices_are_the_gpus_built_for(
    visible: str, order: str | None, capabilities: tuple[str, ...]
) -> None:
    gpus = query_gpus(runner=smi(MIXED), visible=visible, order=order)
    assert _texts(gpus.capabilities) == capabilities
    assert f"CUDA_VISIBLE_DEVICES={visible}" in gpus.source
    assert gpus.present or gpus.source.endswith("no GPU visible")


def test_indices_on_alike_gpus_need_no_order() -> None:
    two = "GPU-a, 9.0\nGPU-b, 9.0\n"
    assert _texts(query_gpus(runner=smi(two), visible="1").capabilities) == ("9.0",)
    assert query_gpus(runner=smi(two), visible="2").capabilities == ()  # there is no third


def test_indices_in_cudas_own_order_are_asked_of_torch_else_all_are_kept() -> None:
    # CUDA's default order is fastest first, nvidia-smi's the bus: index 1 is not knowable here.
    kept = query_gpus(runner=smi(MIXED), visible="1")
    assert _texts(kept.capabilities) == ("8.9", "9.0")
    assert "every GPU's capability kept" in kept.source
    python = Path("/envs/dev/bin/python")
    runner = smi(MIXED, torch="9.0\n")  # torch reads the variables itself
    by_torch = query_gpus(python, runner=runner, visible="1")
    assert by_torch == Gpus(parse_all(["9.0"]), f"torch.cuda of {python}")
    assert runner.commands[1][:2] == [str(python), "-c"]
    mig = query_gpus(runner=smi(MIXED), visible="MIG-5d5ab9c7-0000")
    assert _texts(mig.capabilities) == ("8.9", "9.0")
