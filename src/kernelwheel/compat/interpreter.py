"""Facts about a Python interpreter, read by running it once, for the build (``toolchain.envs``) and
``kernelwheel install``: torch read by ``compat.rules.torch_facts``, the very function every wheel's
guard runs, and wheel tags by ``packaging.tags.sys_tags()`` in it, as pip computes them."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import packaging

from .._util import NO_CWD_ON_PATH, RUNNER, CommandTimeout, Runner
from ..errors import UsageError
from . import rules as compat

_MARK = "KERNELWHEEL-PROBE "
_MAIN = r"""
import importlib.util, json, os, platform, sys, sysconfig
out = {"python": list(sys.version_info[:2]), "implementation": sys.implementation.name,
       "executable": sys.executable, "machine": platform.machine(),
       "purelib": sysconfig.get_paths()["purelib"], "prefix": sys.prefix,
       "sys_path": [os.path.abspath(p) for p in sys.path],
       "pip": importlib.util.find_spec("pip") is not None}
try:
    import torch
    out["torch_cuda"] = torch.version.cuda
    out["torch_hip"] = getattr(torch.version, "hip", None)
    facts = torch_facts(torch)
    out["torch"] = [facts.version, facts.kind, facts.backend, facts.cxx11, facts.driver]
except Exception as exc:  # the caller explains what is missing
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
try:  # the files a reinstalled or rebuilt torch rewrites (probe_cache stamps them)
    out["torch_files"] = [os.path.dirname(torch.__file__), torch.version.__file__,
                          torch._C.__file__]
except Exception:
    pass
try:
    import importlib.metadata as metadata
    out["torch_dist"] = metadata.version("torch")
except Exception:
    out["torch_dist"] = None
try:
    from packaging import tags
except ImportError:
    sys.path.append(sys.argv[1])  # after the interpreter's own paths: only packaging comes from it
    from packaging import tags
out["tags"] = [str(tag) for tag in tags.sys_tags()]
print(__MARK__ + json.dumps(out))
# skip the interpreter's teardown: 0.3-0.5 s with torch loaded, and nothing is left to write
sys.stdout.flush()
import os
os._exit(0)
"""


class ProbeFailed(Exception):
    """The interpreter did not start (``started`` False) or printed no facts; ``crashed``: killed by
    a signal or no answer in time (a torch import that crashes or hangs), not "no Python 3"."""

    def __init__(self, reason: str, *, started: bool, crashed: bool = False) -> None:
        super().__init__(reason)
        self.started = started
        self.crashed = crashed


@dataclass(frozen=True)
class Interpreter:
    executable: Path  # sys.executable: the venv's python, not what a symlink points to
    python: tuple[int, int]
    implementation: str  # sys.implementation.name: cpython, pypy
    machine: str  # platform.machine()
    purelib: Path
    has_pip: bool
    tags: tuple[str, ...]  # supported wheel tags, most preferred first
    torch: compat.Torch | None  # None: torch does not import (torch_error says why)
    torch_cuda: str | None  # torch.version.cuda, as torch spells it ("13.0")
    torch_hip: str | None
    torch_dist: str | None  # the torch version pip sees installed (distribution metadata)
    torch_error: str | None = None

    @property
    def python_version(self) -> str:
        return f"{self.python[0]}.{self.python[1]}"


def locate(raw: str, base: Path) -> Path:
    """The interpreter a ``--python`` value names, as pip and uv read it: a bare name is looked up
    on PATH (:class:`UsageError` if absent); one with a path separator or ``~`` is a path from
    ``base``."""
    if raw.startswith("~") or any(sep and sep in raw for sep in (os.sep, os.altsep)):
        path = Path(raw).expanduser()
        return path if path.is_absolute() else base / path
    if (found := shutil.which(raw)) is None:
        raise UsageError(
            f"no {raw!r} on PATH",
            hint=f"put it on PATH, or give its path (./{raw} for one in this folder)",
        )
    return Path(found)


def _script() -> str:
    # compat's own source first: torch_facts is defined by it, exactly as in the guard.
    return inspect.getsource(compat) + NO_CWD_ON_PATH + _MAIN.replace("__MARK__", repr(_MARK))


def script_digest() -> str:
    """Names the probe script: a record of an older script's report is not reused."""
    return hashlib.sha256(_script().encode()).hexdigest()[:16]


def run(python: Path, *, timeout: float = 300, runner: Runner = RUNNER) -> Interpreter:
    """Run ``python`` once and return what it reports; ProbeFailed when it cannot."""
    return parse(report(python, timeout=timeout, runner=runner))


def checked_driver_setting() -> tuple[int, int] | None:
    """The CUDA driver version a driver variable states (None: unset or ``none``); a value that is
    no version is a :class:`UsageError`, before any interpreter reads it."""
    try:
        setting = compat.driver_setting()
    except compat.DriverSettingError as exc:
        raise UsageError(
            str(exc), hint=f"set {exc.name} to the CUDA version the driver supports, or unset it"
        ) from None
    return None if setting is None else setting[1]


def report(python: Path, *, timeout: float = 300, runner: Runner = RUNNER) -> dict[str, Any]:
    """The probe's raw report, what :func:`parse` reads and ``probe_cache`` keeps."""
    checked_driver_setting()
    packaging_home = str(Path(packaging.__file__).resolve().parents[1])
    try:
        # killable: an interrupt of builds side by side stops the torch import (seconds)
        proc = runner.captured([python, "-c", _script(), packaging_home], timeout=timeout)
    except CommandTimeout:
        # (TimeoutExpired's own text would quote the whole script.)
        raise ProbeFailed(f"no answer within {timeout:g} s", started=True, crashed=True) from None
    except OSError as exc:
        raise ProbeFailed(exc.strerror or str(exc), started=False) from None
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        crashed = proc.returncode < 0  # killed by a signal (a segfault importing torch)
        raise ProbeFailed(proc.stderr.strip() or "no output", started=True, crashed=crashed)
    data: dict[str, Any] = json.loads(lines[-1][len(_MARK) :])
    return data


def parse(data: dict[str, Any]) -> Interpreter:
    """An :class:`Interpreter` from the probe's report."""
    torch = None
    if "torch" in data:
        version, kind, backend, cxx11, *rest = data["torch"]
        driver = tuple(rest[0]) if rest and rest[0] else None
        torch = compat.Torch(version, kind, tuple(backend) if backend else None, cxx11, driver)
    return Interpreter(
        executable=Path(data["executable"]),
        python=(data["python"][0], data["python"][1]),
        implementation=data["implementation"],
        machine=data["machine"],
        purelib=Path(data["purelib"]),
        has_pip=bool(data["pip"]),
        tags=tuple(data["tags"]),
        torch=torch,
        torch_cuda=data.get("torch_cuda"),
        torch_hip=data.get("torch_hip"),
        torch_dist=data["torch_dist"],
        torch_error=data.get("torch_error"),
    )
