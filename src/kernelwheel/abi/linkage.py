"""Which GPU runtime a shared object was built for, from its ELF headers alone: device code
(``.nv_fatbin``) or a CUDA/ROCm library needed; the libraries and sections that tell the
runtimes apart are data (``data/abi_policy.toml``, ``[gpu-runtime.*]``)."""

from __future__ import annotations

import fnmatch
import struct
from dataclasses import dataclass
from pathlib import Path

from ._elf import NotElfError, read_elf
from .policy import load_kernel_libraries

__all__ = ["GpuLinkage", "NotElfError", "read_linkage"]


@dataclass(frozen=True)
class GpuLinkage:
    """The GPU runtimes a shared object shows, each with the evidence found."""

    evidence: tuple[tuple[str, str], ...]  # (runtime, "needs libcudart.so.13" / "section ...")
    cuda_major: int | None = None  # from the CUDA runtime library it needs, when it needs one

    @property
    def runtimes(self) -> frozenset[str]:
        """The runtimes ("cuda", "rocm") it was built for; empty for a CPU build."""
        return frozenset(runtime for runtime, _ in self.evidence)

    def shown(self, runtime: str) -> str:
        """The evidence for ``runtime``, for a message."""
        return ", ".join(what for r, what in self.evidence if r == runtime)


def read_linkage(path: Path) -> GpuLinkage:
    """The GPU linkage of the ELF object at ``path`` (a regular file the caller checked).
    Raises NotElfError for anything that is not a readable ELF object."""
    try:
        info = read_elf(path)
    except (struct.error, ValueError, OSError) as exc:  # NotElfError is a ValueError
        raise NotElfError(f"{path}: not a readable ELF object ({exc})") from None
    evidence: list[tuple[str, str]] = []
    major: int | None = None
    for runtime, rule in load_kernel_libraries().gpu_runtimes.items():
        for soname in info.needed:
            if not rule.needs(soname):
                continue
            evidence.append((runtime, f"needs {soname}"))
            if rule.cuda_runtime is not None and fnmatch.fnmatchcase(soname, rule.cuda_runtime):
                first = soname.removeprefix(rule.cuda_runtime.rstrip("*")).split(".")[0]
                major = int(first) if first.isdigit() else major
        evidence += [(runtime, f"has section {s}") for s in info.sections if s in rule.sections]
    return GpuLinkage(tuple(evidence), major)
