"""The parts of a kernel project, as build.toml describes them, read by model/project only."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from packaging.version import Version

from .capability import CudaCapability

# Every backend kernel-builder knows (general.backends); kernels are written for the first five.
BACKENDS: tuple[str, ...] = ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu")
KERNEL_BACKENDS: tuple[str, ...] = ("cpu", "cuda", "metal", "rocm", "xpu")
DEFAULT_PYEXT: tuple[str, ...] = ("py", "pyi")


class Framework(str, Enum):
    """What the project's extension is built against: one framework section per project."""

    TORCH = "torch"  # compiled ops registered with torch (per-torch or stable ABI)
    TORCH_NOARCH = "torch-noarch"  # Python (and Triton) only: no compiled code
    TVM_FFI = "tvm-ffi"  # compiled against apache-tvm-ffi, no torch


@dataclass(frozen=True)
class HubConfig:
    """``[general.hub]``: where the kernel is published on the Hugging Face Hub."""

    repo_id: str | None
    branch: str | None


@dataclass(frozen=True)
class KernelDependency:
    """One ``kernel-depends`` entry: another Hub kernel, by API version or git revision."""

    repo_id: str
    version: int | None = None
    revision: str | None = None

    @property
    def name(self) -> str:
        return self.repo_id.rsplit("/", 1)[-1]

    @property
    def requirement(self) -> str:
        """The requirement on that kernel's wheel: its API major, or any (a git revision)."""
        if self.version is None:
            return self.name
        return f"{self.name}>={self.version},<{self.version + 1}"

    def to_dict(self) -> dict[str, object]:
        if self.version is not None:
            return {"repo-id": self.repo_id, "version": self.version}
        return {"repo-id": self.repo_id, "revision": self.revision}

    def describe(self) -> str:
        at = f"version {self.version}" if self.version is not None else f"revision {self.revision}"
        return f"{self.repo_id} ({at})"


@dataclass(frozen=True)
class BackendDepends:
    """``[general.<backend>]``'s dependencies: needed only by that backend's builds."""

    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()


@dataclass(frozen=True)
class TorchSection:
    """``[torch]``: the op-registration binding, its flags, and the torch ABI it targets."""

    src: tuple[Path, ...]
    include: tuple[Path, ...]
    pyext: tuple[str, ...]
    minver: Version | None
    maxver: Version | None
    cxx_flags: tuple[str, ...] = ()
    # backend -> oldest torch of the stable ABI the backend builds against; absent: per-torch.
    stable_abi: tuple[tuple[str, Version], ...] = ()
    # The earliest form's ``pyroot``: the folder holding the Python package (None: torch-ext).
    pyroot: Path | None = None


@dataclass(frozen=True)
class NoarchSection:
    """``[torch-noarch]``: a pure-Python kernel; the capabilities/archs it says it supports."""

    pyext: tuple[str, ...]
    cuda_capabilities: tuple[CudaCapability, ...] = ()
    rocm_archs: tuple[str, ...] = ()


@dataclass(frozen=True)
class TvmFfiSection:
    """``[tvm-ffi]``: the binding sources of a kernel built against apache-tvm-ffi."""

    src: tuple[Path, ...]
    include: tuple[Path, ...]
    pyext: tuple[str, ...]
    cxx_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelSection:
    """One ``[kernel.<id>]`` table: sources compiled for one backend."""

    id: str
    backend: str
    src: tuple[Path, ...]
    depends: tuple[str, ...]
    include: tuple[Path, ...]
    cxx_flags: tuple[str, ...]
    cuda_flags: tuple[str, ...]
    cuda_capabilities: tuple[CudaCapability, ...]
    cuda_minver: Version | None
    rocm_archs: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()
