"""Test virtual environments layered on a build environment's torch.

A torch venv costs minutes and gigabytes, so each test venv is fresh (made without pip, like
the hub tests' QuickVenv) but sees the build environment's site-packages through a .pth file:
pip then treats that torch as installed and resolves the wheel's ``torch==X.Y.*`` requirement
against it without downloading anything. Unlike QuickVenv.pip_install, ``pip()`` uses this
machine's pip configuration (its index), for test tools such as pytest or kernels.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.venvs import QuickVenv, pip_command, run_pip


class LayeredVenv(QuickVenv):
    def __init__(self, root: Path, torch_site: Path | None) -> None:
        super().__init__(root, [torch_site] if torch_site is not None else [])

    def pip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_pip(pip_command(self.python, *args, isolated=False), check=check)
