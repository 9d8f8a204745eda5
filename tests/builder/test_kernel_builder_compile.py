"""A kernel written for kernel-builder builds unchanged (docs/compile.md), for real: against the
torch 2.14.1+cu130 build environment, a binding that includes <torch/torch.h> under
Py_LIMITED_API, two CUDA kernels with their own capabilities and flags, and a CPU kernel the
CUDA variant must leave out. Each rule is checked by the preprocessor (an #error where it is
broken); the wheel is then installed and its op called."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import CUDA_VARIANT
from support.layered import LayeredVenv

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

BUILD_TOML = """\
[general]
name = "kbprobe"
version = "0.1.0"
backends = ["cpu", "cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.hopper]
backend = "cuda"
src = ["hopper/hopper.cu"]
cuda-capabilities = ["9.0"]

[kernel.ampere]
backend = "cuda"
src = ["ampere/ampere.cu"]
cuda-capabilities = ["8.0", "10.1"]
cuda-flags = ["-DAMPERE_ONLY=1"]

[kernel.host]
backend = "cpu"
src = ["host/host.cpp"]
"""

BINDING = r"""
// With torch's -DTORCH_API_INCLUDE_EXTENSION_H this pulls in pybind11, which fails under
// Py_LIMITED_API.
#include <torch/torch.h>

#include "registration.h"

#if defined(TORCH_API_INCLUDE_EXTENSION_H)
#error "TORCH_API_INCLUDE_EXTENSION_H reached the compile"
#endif
#if !defined(Py_LIMITED_API)
#error "not a limited-API compile"
#endif
#if !defined(CUDA_KERNEL) || USE_CUDA != 1 || defined(CPU_KERNEL)
#error "not kernel-builder's CUDA macros"
#endif
#if defined(KERNELWHEEL_WITH_CPU) || defined(KERNELWHEEL_WITH_CUDA) || defined(AMPERE_ONLY)
#error "macros of another setting or kernel"
#endif

int hopper_kernels();
int ampere_kernels();

int64_t kernels() { return hopper_kernels() + ampere_kernels(); }
torch::Tensor twice(torch::Tensor const& x) { return x * 2; }

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("kernels", &kernels);
  ops.def("twice(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) { ops.impl("twice", &twice); }

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""

CUDA_SOURCE = r"""
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != {arch}
#error "compiled for a capability that is not this kernel's"
#endif
#if {flag_check}
#error "this kernel's cuda-flags are wrong"
#endif
#if defined(__CUDA_NO_HALF_OPERATORS__) || !defined(ENABLE_FP8) || !defined(CUDA_KERNEL)
#error "not kernel-builder's nvcc macros"
#endif
__global__ void {name}_kernel(int* out) {{ *out = 1; }}
int {name}_kernels() {{ return 1; }}
"""

FILES = {
    "build.toml": BUILD_TOML,
    "torch-ext/torch_binding.cpp": BINDING,
    "torch-ext/kbprobe/__init__.py": "from ._ops import ops\n",
    "hopper/hopper.cu": CUDA_SOURCE.format(
        arch=900, flag_check="defined(AMPERE_ONLY)", name="hopper"
    ),
    "ampere/ampere.cu": CUDA_SOURCE.format(arch=800, flag_check="AMPERE_ONLY != 1", name="ampere"),
    "host/host.cpp": '#error "a CPU kernel compiled into a CUDA variant"\n',
}

CHECK = """
import torch, kbprobe
assert kbprobe.ops.kernels() == 2
print("schema", kbprobe.ops.twice.default._schema)
"""


def test_a_kernel_builder_kernel_builds_unchanged(
    tmp_path: Path, venv_for: Callable[..., LayeredVenv]
) -> None:
    root = tmp_path / "kbprobe"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    out = tmp_path / "wheelhouse"
    code = main(["build", str(root), "--variant", CUDA_VARIANT, "-o", str(out), "-q"])
    log = (out / "logs" / f"{CUDA_VARIANT}.log").read_text()
    assert code == 0, log[-4000:]
    # 10.1 serves no CUDA 13 target (CUDA 13 calls that GPU 11.0): left out, and said so.
    assert "kernel.ampere: cuda-capabilities 10.1 not built" in log
    wheel = next(out.glob("kbprobe-*.whl"))
    venv = venv_for(CUDA_VARIANT)
    venv.pip(str(wheel))
    result = venv.run("-c", CHECK).stdout
    assert "schema" in result and "twice(Tensor x) -> Tensor" in result
