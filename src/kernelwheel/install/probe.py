"""The interpreter to install into, as ``kernelwheel install`` needs it: its torch (importable and
pip-visible, or none at all: then only tvm-ffi builds fit), Python and wheel tags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._util import RUNNER, Runner
from ..compat import interpreter as _interpreter
from ..compat import rules as compat
from ..errors import InstallError, UsageError


@dataclass(frozen=True)
class Target:
    python: Path
    python_version: tuple[int, int]
    implementation: str
    machine: str
    torch: compat.Torch | None  # None: no torch installed (only tvm-ffi builds fit)
    torch_dist: str | None  # the version pip sees installed (what the torch pin names)
    tags: tuple[str, ...]  # supported wheel tags, most preferred first
    has_pip: bool
    # The newest CUDA the machine's driver supports where no torch says it (torch.driver does)
    no_torch_driver: tuple[int, int] | None = None

    @property
    def driver(self) -> tuple[int, int] | None:
        return self.torch.driver if self.torch is not None else self.no_torch_driver

    @property
    def python_tag(self) -> str:
        short = {"cpython": "cp", "pypy": "pp"}.get(self.implementation, self.implementation)
        return f"{short}{self.python_version[0]}{self.python_version[1]}"

    def to_json(self) -> dict[str, object]:
        """The JSON shape of install's and variants' ``environment`` (docs/install.md)."""
        return {
            "python": str(self.python),
            "python_tag": self.python_tag,
            "machine": self.machine,
            "torch": self.torch_dist,
            "torch_flavour": self.torch.token if self.torch else None,
            "cxx11_abi": self.torch.cxx11 if self.torch else None,
            "description": self.describe(),
        }

    def describe(self) -> str:
        """``torch 2.13.0+cpu (CPU, cxx11 ABI), x86_64, cp311``; a CUDA torch's ends with
        ``, CUDA driver: 13.1`` (what the CUDA flavours are chosen by), as does no torch's."""
        if self.torch is None:
            found = compat.dotted(self.driver) if self.driver else "none found"
            torch, driver = "no torch", f"CUDA driver: {found}"
        else:
            torch, driver = self.torch.describe(), self.torch.describe_driver()
        parts = (torch, self.machine, self.python_tag, driver)
        return ", ".join(part for part in parts if part)


def probe(python: Path, runner: Runner = RUNNER) -> Target:
    try:
        found = _interpreter.run(python, runner=runner)
    except _interpreter.ProbeFailed as exc:
        hint = "pass the python of the environment to install into (--python .venv/bin/python)"
        if not exc.started:  # a bad --python (not found, not executable): exit 2, as a name
            raise UsageError(f"cannot run --python {python}: {exc}", hint=hint) from None
        if not exc.crashed:  # it ran and ended without the facts: no Python 3 (a script, 2.7)
            raise UsageError(
                f"--python {python} did not run kernelwheel's probe, so it is no Python 3 "
                f"interpreter it can use: {str(exc).splitlines()[-1]}",
                hint=hint,
            ) from None
        raise InstallError(
            f"cannot inspect the interpreter {python}: {str(exc).splitlines()[-1]}",
            hint="pass a working Python 3 interpreter with --python",
        ) from None
    driver = None
    if found.torch is None and not found.torch_dist:  # none installed: tvm-ffi builds fit
        # this machine's driver, read as the rules read it for a CUDA torch (the probe's run
        # checked the driver variables)
        driver = compat.cuda_driver()
    elif found.torch is None:
        raise InstallError(
            f"{python} has no usable torch ({found.torch_error})",
            hint="repair torch in that environment (pip install --force-reinstall torch==...): "
            "kernelwheel install picks the kernel build for the installed torch and never "
            "installs or changes torch",
        )
    elif not found.torch_dist:
        raise InstallError(
            f"{python} imports torch but has no torch distribution metadata, so pip cannot see "
            "it and would install another torch",
            hint="install torch with pip (or uv) into that environment",
        )
    return Target(
        python=found.executable,
        python_version=found.python,
        implementation=found.implementation,
        machine=found.machine,
        torch=found.torch,
        torch_dist=found.torch_dist or None,
        tags=found.tags,
        has_pip=found.has_pip,
        no_torch_driver=driver,
    )
