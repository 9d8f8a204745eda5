"""Inspect the interpreter to install into, by running it: its torch, Python and wheel tags.

The torch facts are read by :func:`kernelwheel.install.compat.torch_facts`, the very function
the import guard runs, so selection and guard never disagree about what is installed. The
supported wheel tags come from ``packaging.tags.sys_tags()`` run by the target itself (its own
``packaging`` if it has one, else kernelwheel's), which is how pip computes them.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import packaging

from ..errors import InstallError
from . import compat

__all__ = ["Target", "probe"]

_MARK = "KERNELWHEEL-PROBE "
_MAIN = r"""
import importlib.util, json, platform, sys
out = {"python": list(sys.version_info[:2]), "implementation": sys.implementation.name,
       "executable": sys.executable, "machine": platform.machine(),
       "pip": importlib.util.find_spec("pip") is not None}
try:
    import torch
    facts = torch_facts(torch)
    out["torch"] = [facts.version, facts.kind, facts.backend, facts.cxx11]
except Exception as exc:  # the caller explains what is missing
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
try:
    import importlib.metadata as metadata
    out["torch_dist"] = metadata.version("torch")
except Exception:
    out["torch_dist"] = None
try:
    from packaging import tags
except ImportError:
    sys.path.append(sys.argv[1])  # after the target's own paths: only packaging comes from it
    from packaging import tags
out["tags"] = [str(tag) for tag in tags.sys_tags()]
print(__MARK__ + json.dumps(out))
# skip the interpreter's teardown: 0.3-0.5 s with torch loaded, and nothing is left to write
sys.stdout.flush()
import os
os._exit(0)
"""


@dataclass(frozen=True)
class Target:
    """A probed interpreter."""

    python: Path
    python_version: tuple[int, int]
    implementation: str
    machine: str
    torch: compat.Torch
    torch_dist: str  # the version pip sees installed (what the torch pin names)
    tags: tuple[str, ...]  # supported wheel tags, most preferred first
    has_pip: bool

    @property
    def python_tag(self) -> str:
        short = {"cpython": "cp", "pypy": "pp"}.get(self.implementation, self.implementation)
        return f"{short}{self.python_version[0]}{self.python_version[1]}"

    def describe(self) -> str:
        """``torch 2.13.0+cpu (CPU, cxx11 ABI), x86_64, cp311``."""
        return f"{self.torch.describe()}, {self.machine}, {self.python_tag}"


def _script() -> str:
    # compat's own source first: torch_facts is defined by it, exactly as in the guard.
    import inspect

    return inspect.getsource(compat) + _MAIN.replace("__MARK__", repr(_MARK))


def probe(python: Path) -> Target:
    packaging_home = str(Path(packaging.__file__).resolve().parents[1])
    try:
        proc = subprocess.run(
            [str(python), "-c", _script(), packaging_home],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    except OSError as exc:
        raise InstallError(
            f"cannot run --python {python}: {exc.strerror or exc}",
            hint="pass the python of the environment to install into (--python .venv/bin/python)",
        ) from None
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallError(
            f"cannot inspect the interpreter {python}: {detail}",
            hint="pass a working Python 3 interpreter with --python",
        )
    data = json.loads(lines[-1][len(_MARK) :])
    if "torch_error" in data:
        raise InstallError(
            f"{python} has no usable torch ({data['torch_error']})",
            hint="install torch into that environment first: kernelwheel install picks the "
            "kernel build for the installed torch and never installs or changes torch",
        )
    if not data["torch_dist"]:
        raise InstallError(
            f"{python} imports torch but has no torch distribution metadata, so pip cannot see "
            "it and would install another torch",
            hint="install torch with pip (or uv) into that environment",
        )
    version, kind, backend, cxx11 = data["torch"]
    return Target(
        python=Path(data["executable"]),
        python_version=(data["python"][0], data["python"][1]),
        implementation=data["implementation"],
        machine=data["machine"],
        torch=compat.Torch(version, kind, tuple(backend) if backend else None, cxx11),
        torch_dist=data["torch_dist"],
        tags=tuple(data["tags"]),
        has_pip=bool(data["pip"]),
    )
