"""The NVIDIA GPUs of this machine: their compute capabilities, read once.

A default (local) CUDA build compiles for the GPUs present, as ``torch.utils.cpp_extension``
does when ``TORCH_CUDA_ARCH_LIST`` is unset. The driver's ``nvidia-smi`` answers without
importing torch; where it is missing or fails, an interpreter with a CUDA torch (``--python``)
is asked through ``torch.cuda.get_device_capability``. No answer means no GPU to build for:
:class:`Gpus` says why, for the messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .._util import RUNNER, CommandTimeout, Runner

__all__ = ["Gpus", "parse_capabilities", "query_gpus"]

_CAPABILITY = re.compile(r"^\s*(\d+)\.(\d+)\s*$")
_TORCH_QUERY = (
    "import torch\n"
    "n = torch.cuda.device_count() if torch.version.cuda else 0\n"
    "print('\\n'.join('%d.%d' % torch.cuda.get_device_capability(i) for i in range(n)))\n"
)


@dataclass(frozen=True)
class Gpus:
    """The distinct compute capabilities of the GPUs found (ascending, ``"9.0"``), who found
    them, or (none found) why not."""

    capabilities: tuple[str, ...]
    source: str  # "nvidia-smi", "torch.cuda of /usr/bin/python3", or why none were found

    @property
    def present(self) -> bool:
        return bool(self.capabilities)

    def describe(self) -> str:
        """``NVIDIA GPU 9.0 (nvidia-smi)``; ``no NVIDIA GPU (nvidia-smi: not found)``."""
        if not self.capabilities:
            return f"no NVIDIA GPU ({self.source})"
        plural = "s" if len(self.capabilities) > 1 else ""
        return f"NVIDIA GPU{plural} {', '.join(self.capabilities)} ({self.source})"


def parse_capabilities(text: str) -> tuple[str, ...]:
    """The capabilities in ``nvidia-smi --query-gpu=compute_cap --format=csv,noheader`` output
    (one ``9.0`` per GPU), distinct and ascending; lines that are no capability are skipped."""
    found = set()
    for line in text.splitlines():
        match = _CAPABILITY.match(line)
        if match:
            found.add((int(match.group(1)), int(match.group(2))))
    return tuple(f"{major}.{minor}" for major, minor in sorted(found))


def query_gpus(python: Path | None = None, *, timeout: float = 60, runner: Runner = RUNNER) -> Gpus:
    """This machine's GPUs: nvidia-smi, else (given) ``python``'s CUDA torch."""
    why = _ask(runner, ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], timeout)
    if isinstance(why, tuple):
        return Gpus(why, "nvidia-smi")
    if python is not None:
        asked = _ask(runner, [str(python), "-c", _TORCH_QUERY], timeout)
        if isinstance(asked, tuple):
            return Gpus(asked, f"torch.cuda of {python}")
        why += f"; torch.cuda of {python}: {asked}"
    return Gpus((), why)


def _ask(runner: Runner, cmd: list[str], timeout: float) -> tuple[str, ...] | str:
    """The capabilities ``cmd`` prints, or why there are none."""
    name = Path(cmd[0]).name
    try:
        proc = runner.captured(cmd, timeout=timeout)
    except FileNotFoundError:
        return f"{name}: not found"
    except OSError as exc:
        return f"{name}: {exc.strerror or exc}"
    except CommandTimeout:
        return f"{name}: no answer within {timeout:g} s"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return f"{name}: exit {proc.returncode}" + (f", {lines[-1]}" if lines else "")
    found = parse_capabilities(proc.stdout)
    return found if found else f"{name}: no GPU listed"
