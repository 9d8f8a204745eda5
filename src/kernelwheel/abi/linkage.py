"""Which GPU runtime a shared object was built for, read from its ELF headers alone.

A CUDA build carries device code (``.nv_fatbin``) or needs a CUDA library (libcudart,
libc10_cuda...), a ROCm build its HIP counterparts; a CPU build neither. The libraries and
sections that tell them apart are data (``data/abi_policy.toml``, ``[gpu-runtime.*]``). Only the
section and dynamic tables are read, through a file opened here: memory stays small whatever
the size of the object.
"""

from __future__ import annotations

import fnmatch
import struct
from dataclasses import dataclass
from pathlib import Path

from ._elf import ELF_MAGIC, NotElfError
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
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as f:
        if f.read(4) != ELF_MAGIC:
            raise NotElfError(f"{path}: not an ELF object")
        f.seek(0)
        try:
            sections = list(ELFFile(f).iter_sections())
            needed = [
                str(getattr(tag, "needed"))  # noqa: B009 - set dynamically
                for section in sections
                if isinstance(section, DynamicSection)
                for tag in section.iter_tags()
                if tag.entry.d_tag == "DT_NEEDED"
            ]
        except (ELFError, struct.error, ValueError, OSError) as exc:
            raise NotElfError(f"{path}: not a readable ELF object ({exc})") from None
    evidence: list[tuple[str, str]] = []
    major: int | None = None
    for runtime, rule in load_kernel_libraries().gpu_runtimes.items():
        for soname in filter(rule.needs, needed):
            evidence.append((runtime, f"needs {soname}"))
            if rule.cuda_runtime is not None and fnmatch.fnmatchcase(soname, rule.cuda_runtime):
                first = soname.removeprefix(rule.cuda_runtime.rstrip("*")).split(".")[0]
                major = int(first) if first.isdigit() else major
        evidence += [
            (runtime, f"has section {s.name}") for s in sections if s.name in rule.sections
        ]
    return GpuLinkage(tuple(evidence), major)
