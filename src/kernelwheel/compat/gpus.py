"""The compute capabilities of this machine's NVIDIA GPUs, that a default CUDA build targets as
torch's cpp_extension does: nvidia-smi, else the ``--python`` torch; ``CUDA_VISIBLE_DEVICES`` read
as CUDA reads it (docs/building.md), every GPU kept where orders may disagree (never wrong)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._util import NO_CWD_ON_PATH, RUNNER, CommandTimeout, Runner
from ..model.capability import CudaCapability, joined

_CAPABILITY = re.compile(r"^\s*(\d+)\.(\d+)\s*$")
_TORCH_QUERY = NO_CWD_ON_PATH + (
    "import torch\n"
    "n = torch.cuda.device_count() if torch.version.cuda else 0\n"
    "print('\\n'.join('%d.%d' % torch.cuda.get_device_capability(i) for i in range(n)))\n"
)


@dataclass(frozen=True)
class Gpus:
    """The distinct capabilities of the GPUs found, ascending (``"9.0"``), and who found them."""

    capabilities: tuple[CudaCapability, ...]
    source: str  # "nvidia-smi", "torch.cuda of /usr/bin/python3", or why none were found

    @property
    def present(self) -> bool:
        return bool(self.capabilities)

    def describe(self) -> str:
        """``NVIDIA GPU 9.0 (nvidia-smi)``; ``no NVIDIA GPU (nvidia-smi: not found)``."""
        if not self.capabilities:
            return f"no NVIDIA GPU ({self.source})"
        plural = "s" if len(self.capabilities) > 1 else ""
        return f"NVIDIA GPU{plural} {joined(self.capabilities)} ({self.source})"


def parse_capabilities(text: str) -> tuple[CudaCapability, ...]:
    """The capabilities in ``nvidia-smi --query-gpu=compute_cap --format=csv,noheader`` output
    (one ``9.0`` per GPU), distinct and ascending; lines that are no capability are skipped."""
    matches = (_CAPABILITY.match(line) for line in text.splitlines())
    found = {(int(m.group(1)), int(m.group(2))) for m in matches if m}
    return tuple(CudaCapability(major, minor) for major, minor in sorted(found))


def query_gpus(
    python: Path | None = None,
    *,
    timeout: float = 60,
    runner: Runner = RUNNER,
    visible: str | None = None,
    order: str | None = None,
) -> Gpus:
    """The GPUs ``visible`` (``CUDA_VISIBLE_DEVICES``; None: unset) leaves under ``order``:
    nvidia-smi's, else ``python``'s CUDA torch's (it reads both variables itself)."""
    try:
        smi = ["nvidia-smi", "--query-gpu=uuid,compute_cap", "--format=csv,noheader"]
        rows = _rows(_ask(runner, smi, timeout))
        why = "nvidia-smi: no GPU listed"
    except _NoAnswer as exc:
        rows, why = [], str(exc)
    if rows:
        if visible is None:
            return Gpus(_capabilities(rows), "nvidia-smi")
        shown = f"nvidia-smi, CUDA_VISIBLE_DEVICES={visible}"
        if (chosen := _visible(rows, visible, order)) is not None:
            return Gpus(_capabilities(chosen), shown if chosen else f"{shown}: no GPU visible")
        why = f"{shown}: not mapped to nvidia-smi's GPUs (CUDA's order, or a MIG instance)"
        if python is None:
            return Gpus(_capabilities(rows), f"{why}; every GPU's capability kept")
    if python is not None:
        try:
            found = parse_capabilities(_ask(runner, [str(python), "-c", _TORCH_QUERY], timeout))
        except _NoAnswer as exc:
            return Gpus((), f"{why}; torch.cuda of {python}: {exc}")
        if found:
            return Gpus(found, f"torch.cuda of {python}")
        why += f"; torch.cuda of {python}: no GPU listed"
    return Gpus((), why)


def visible_gpus(
    python: Path | None, environ: Mapping[str, str] | None = None, runner: Runner = RUNNER
) -> Gpus:
    """:func:`query_gpus` under ``environ``'s (default: ``os.environ``) CUDA_* settings."""
    env = os.environ if environ is None else environ
    visible, order = env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER")
    return query_gpus(python, runner=runner, visible=visible, order=order)


def _capabilities(rows: list[tuple[str, str]]) -> tuple[CudaCapability, ...]:
    return parse_capabilities("\n".join(capability for _, capability in rows))


def _rows(text: str) -> list[tuple[str, str]]:
    """(uuid, capability) of each GPU line of nvidia-smi's csv, in its order."""
    parts = (line.partition(",") for line in text.splitlines())
    return [(uuid.strip(), cap.strip()) for uuid, _, cap in parts if _CAPABILITY.match(cap)]


def _visible(
    rows: list[tuple[str, str]], visible: str, order: str | None
) -> list[tuple[str, str]] | None:
    """The rows ``visible`` names (CUDA's rules, the module's docstring); None where an entry
    cannot be mapped to nvidia-smi's rows (indices on differing GPUs, a MIG instance)."""
    chosen: list[tuple[str, str]] = []
    alike = len({c for _, c in rows}) == 1
    for entry in (e.strip() for e in visible.split(",")):
        # CUDA reads ASCII digits only: "٠" or "²" names no GPU (int() would take the first and
        # fail on the second)
        if entry.isascii() and entry.isdigit():
            if int(entry) >= len(rows):
                break
            if not alike and (order or "").strip().upper() != "PCI_BUS_ID":
                return None
            chosen.append(rows[int(entry)])
            continue
        if entry.startswith("MIG-"):
            return None  # a MIG instance: its GPU is not in nvidia-smi's uuid column
        named = [r for r in rows if entry.startswith("GPU-") and r[0].startswith(entry)]
        if len(named) != 1:
            break  # no GPU, or an ambiguous prefix: CUDA stops here too
        chosen.append(named[0])
    return chosen


class _NoAnswer(Exception):
    """Why a command printed nothing to read."""


def _ask(runner: Runner, cmd: list[str], timeout: float) -> str:
    """What ``cmd`` prints; :class:`_NoAnswer` when it cannot be run or fails."""
    name = Path(cmd[0]).name
    try:
        proc = runner.captured(cmd, timeout=timeout)
    except FileNotFoundError:
        raise _NoAnswer(f"{name}: not found") from None
    except OSError as exc:
        raise _NoAnswer(f"{name}: {exc.strerror or exc}") from None
    except CommandTimeout:
        raise _NoAnswer(f"{name}: no answer within {timeout:g} s") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise _NoAnswer(f"{name}: exit {proc.returncode}" + (f", {lines[-1]}" if lines else ""))
    return proc.stdout
