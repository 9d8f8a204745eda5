"""Fake torch distributions and fake kernel builds for the ``kernelwheel install`` tests.

A fake torch wheel (``torch-2.13.0+cpu-py3-none-any.whl``) is a real distribution pip and uv
can install, replace and uninstall; its ``torch/__init__.py`` has what the probe and the guard
read (``__version__``, ``version.cuda/hip``, ``_C._GLIBCXX_USE_CXX11_ABI``, ``ops``). A fake
kernel build is written by kernelwheel's own wheel writer with the real generated ``_ops.py``
(guard included); its "extension" is a Python module of the namespace's name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag

from kernelwheel.builder import codegen
from kernelwheel.compat.guard import BuildStamp
from kernelwheel.install.probe import Target
from kernelwheel.install.select import select, why_not_chosen
from kernelwheel.install.sources import Candidate
from kernelwheel.model.variant import OS, Arch, Variant
from kernelwheel.wheels import WheelSpec, write_wheel
from support.sofiles import build_extension
from support.venvs import FAKE_TORCH_INIT, QuickVenv, pip_command, run_pip

UV = Path(sys.executable).with_name("uv")
NAMESPACE = "_img2gray_0123456789"


def torch_wheel(out: Path, version: str, cuda: str | None, *, cxx11: bool = True) -> Path:
    init = FAKE_TORCH_INIT.format(version=version, cuda=cuda, cxx11=cxx11)
    spec = WheelSpec(
        "torch", version, Tag("py3", "none", "any"), {"torch/__init__.py": init.encode()}
    )
    return write_wheel(spec, out)


def kernel_wheel(
    out: Path,
    local: str | None,
    *,
    version: str = "0.1.0",
    name: str = "img2gray",
    extension: bytes | None = None,
) -> Path:
    """``img2gray-<version>+<local>``: a binary label gets the linux_x86_64 abi3 tag and the
    generated guard; a noarch label (or none) a py3-none-any wheel without one. ``extension``:
    a compiled ``<NAMESPACE>.abi3.so`` (see :func:`add_one_extension`) instead of the empty
    Python module that stands in for it."""
    full = f"{version}+{local}" if local else version
    package = name.replace("-", "_")
    variant = (
        Variant.from_local_version(local, arch=Arch.X86_64, os=OS.LINUX)
        if local and local.startswith("torch")
        else None
    )
    files = {f"{package}/__init__.py": b"from ._ops import ops\n"}
    if variant is None:
        files[f"{package}/_ops.py"] = b"import torch\nops = None\n"
        tag, requires = Tag("py3", "none", "any"), ("torch",)
    else:
        stamp = BuildStamp(name, full, variant)
        files[f"{package}/_ops.py"] = codegen.ops_py(NAMESPACE, stamp).encode()
        if extension is None:
            files[f"{package}/{NAMESPACE}.py"] = b""  # stands in for the extension
        else:
            files[f"{package}/{NAMESPACE}.abi3.so"] = extension
        tag, requires = Tag("cp310", "abi3", "linux_x86_64"), (variant.torch_requirement(),)
    spec = WheelSpec(name, full, tag, files, requires_dist=requires, requires_python=">=3.10")
    return write_wheel(spec, out)


# The extension's one op, add_one(int); ``STEP`` is the one line a rebuild changes.
ADD_ONE = (
    "#define STEP %d\n"
    "static PyObject *add_one(PyObject *self, PyObject *x) {\n"
    "    long v = PyLong_AsLong(x);\n"
    "    return (v == -1 && PyErr_Occurred()) ? NULL : PyLong_FromLong(v + STEP);\n"
    "}\n"
    'static PyMethodDef methods[] = {{"add_one", add_one, METH_O, NULL}, {NULL, NULL, 0, NULL}};\n'
)


def add_one_extension(cache: Path, step: int = 1) -> bytes:
    """The kernel wheels' extension compiled for real (gcc, a fraction of a second), its op
    adding ``step``: two builds that differ in one line and in the op's result."""
    code = (ADD_ONE % step, "if (m != NULL && PyModule_AddFunctions(m, methods) < 0) return NULL;")
    return build_extension(cache, NAMESPACE, code=code)


def isolated_env() -> dict[str, str]:
    """This machine's pip and uv configuration (extra indexes, find-links) left out, and its
    CUDA driver: the fake torches are matched to their own CUDA (a test fakes a driver with
    KERNELWHEEL_CUDA_DRIVER)."""
    env = dict(
        os.environ, PIP_CONFIG_FILE=os.devnull, UV_NO_CONFIG="1", KERNELWHEEL_CUDA_DRIVER="none"
    )
    env.pop("PIP_FIND_LINKS", None)
    return env


def isolate(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's process (and kernelwheel's own pip runs) sees :func:`isolated_env`, and no
    active virtual environment."""
    for key, value in isolated_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def venv_with_torch(root: Path, torch: Path | None) -> QuickVenv:
    """A fresh venv (no pip) with the fake torch wheel installed as a real distribution."""
    venv = QuickVenv(root)
    if torch is not None:
        uv("pip", "install", "--python", str(venv.python), "--no-index", str(torch))
    return venv


def uv(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(UV), *args], capture_output=True, text=True, check=False, env=isolated_env()
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"uv {args} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def installed(venv: QuickVenv) -> dict[str, str]:
    """Every distribution in the venv: canonical-ish name -> version."""
    code = (
        "import importlib.metadata as m\n"
        "for d in m.distributions():\n"
        "    print(d.metadata['Name'].lower(), d.version)\n"
    )
    out = venv.run("-c", code).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())


def plain_install(tool: str, venv: QuickVenv, *args: str) -> subprocess.CompletedProcess[str]:
    """What a user types without kernelwheel: pip or uv on the given sources (``--no-index``
    unless an ``--index-url`` is among ``args``)."""
    offline = [] if "--index-url" in args else ["--no-index"]
    if tool == "uv":
        return uv("pip", "install", "--python", str(venv.python), *offline, *args, check=False)
    return run_pip(pip_command(venv.python, *offline, *args), check=False, env=isolated_env())


def choose(files: list[str], target: Target) -> tuple[str | None, dict[str, str]]:
    """The build ``install`` picks of wheel ``files`` (requirement ``k``) for ``target``, and
    why it passed over each other one."""
    candidates = [Candidate(f, f"/wh/{f}", None, "/wh") for f in files]
    (sel,) = select([Requirement("k")], candidates, target)
    chosen = sel.chosen.candidate.filename if sel.chosen else None
    reasons = {
        v.candidate.filename: v.reason or (why_not_chosen(v, sel.chosen) if sel.chosen else "")
        for v in sel.passed_over
    }
    return chosen, reasons
