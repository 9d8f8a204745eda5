"""Fresh venvs for install tests, and a fake torch for the ones that need no real torch.

A venv is made without pip (fast) and pip runs from the test interpreter with ``--python``,
``--isolated`` (no user/site pip config, no PIP_* variables) and ``--no-index`` unless an index
URL is given. Other site-packages are layered in with a ``.pth`` file: the real torch of a build
environment, or a fake torch that has what pip's resolver and the import guard look at
(``__version__``, ``version.cuda``, ``_C._GLIBCXX_USE_CXX11_ABI``, ``ops``) and an installed
``torch-X.Y.Z.dist-info``.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from collections.abc import Sequence
from pathlib import Path

FAKE_TORCH_INIT = '''"""A stand-in for torch: version facts and an ops namespace."""
import types

__version__ = {version!r}
version = types.SimpleNamespace(cuda={cuda!r}, hip=None)
_C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI={cxx11!r})


class _Namespace:
    def __init__(self, name):
        self.name = name


class _Ops:
    def __getattr__(self, name):
        return _Namespace(name)


ops = _Ops()
'''


def fake_torch(
    root: Path, version: str = "2.14.1+cu130", cuda: str | None = "13.0", *, cxx11: bool = True
) -> Path:
    """A site folder holding a fake torch ``version`` (built for ``cuda``) that pip sees as
    installed."""
    site = root / f"faketorch-{version.replace('+', '_')}-{cxx11}"
    if site.exists():
        return site
    pkg = site / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        FAKE_TORCH_INIT.format(version=version, cuda=cuda, cxx11=cxx11)
    )
    dist = site / f"torch-{version.split('+')[0]}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    (dist / "INSTALLER").write_text("fake\n")
    (dist / "RECORD").write_text("")
    return site


def pip_command(python: Path, *args: str, isolated: bool = True) -> list[str]:
    """``pip install ARGS`` into the venv of ``python``, run by the test interpreter (the venvs
    have no pip of their own). ``isolated`` leaves this machine's pip configuration out (user and
    site config files, PIP_* variables)."""
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    cmd += ["--disable-pip-version-check", *(["--isolated"] if isolated else []), *args]
    return cmd


def run_pip(
    cmd: list[str], *, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a :func:`pip_command`; with ``check`` a failure raises with pip's output."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[3:])} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


class QuickVenv:
    def __init__(self, root: Path, layered: Sequence[Path] = ()) -> None:
        self.root = root
        venv.EnvBuilder(with_pip=False, clear=True).create(root)
        self.purelib = Path(
            sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)})
        )
        if layered:
            (self.purelib / "_hub_test_layers.pth").write_text("".join(f"{p}\n" for p in layered))

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def run(
        self, *args: str, check: bool = True, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.python), *args],
            capture_output=True,
            text=True,
            cwd=cwd or self.root,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def pip_install(
        self,
        *args: str,
        find_links: Path | None = None,
        index_url: str | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        cmd = pip_command(self.python, "--no-compile", "--no-cache-dir")
        if index_url is not None:
            cmd += ["--index-url", index_url]
        else:
            cmd.append("--no-index")
        if find_links is not None:
            cmd += ["--find-links", str(find_links)]
        return run_pip([*cmd, *args], check=check)

    def installed_version(self, name: str) -> str:
        out = self.run("-c", f"import importlib.metadata as m; print(m.version({name!r}))")
        return out.stdout.strip()
