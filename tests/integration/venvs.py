"""Test virtual environments layered on a build environment's torch.

A torch venv costs minutes and gigabytes, so each test venv is fresh but sees the build
environment's site-packages through a .pth file: pip then treats that torch as installed and
resolves the wheel's ``torch==X.Y.*`` requirement against it without downloading anything.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path


class LayeredVenv:
    def __init__(self, root: Path, torch_site: Path | None) -> None:
        self.root = root
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        purelib = Path(
            sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)})
        )
        self.purelib = purelib
        if torch_site is not None:
            (purelib / "_kernelwheel_test_torch.pth").write_text(f"{torch_site}\n")
            # The venv's own (older) setuptools would shadow the build environment's, which
            # torch's own requirements need; the layered one must be the one pip sees.
            self.run("-m", "pip", "uninstall", "-q", "-y", "setuptools", check=False)

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def run(
        self, *args: str, check: bool = True, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.python), *args], capture_output=True, text=True, cwd=cwd, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def pip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "pip", "--disable-pip-version-check", "install", *args, check=check)


def same_python_version() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"
