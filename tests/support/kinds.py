"""Small kernel projects of the kinds that are not one wheel per torch: a pure-Python
(``[torch-noarch]``) kernel and a ``[tvm-ffi]`` kernel, written into a folder by the tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

# A noarch project the registration tests fill with their own op.py.
SILU_NOARCH_TOML = """\
[general]
name = "silu-mul"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch-noarch]
"""

NOARCH_BUILD_TOML = """\
[general]
name = "scale-noarch"
version = 1
edition = 5
license = "MIT"
backends = ["cpu", "cuda"]
python-depends = ["einops"]

[general.cuda]
python-depends = ["nvidia-cutlass-dsl", "numpy>=1.26; python_version >= '3.9'"]

[torch-noarch]
pyext = ["py", "json"]
"""

# A Python op registered in the namespace _ops.py names, scaling by a factor read from a data
# file the wheel must carry (pyext "json").
NOARCH_INIT = """\
import json
from pathlib import Path

import torch

from ._ops import add_op_namespace_prefix, ops

FACTOR = json.loads((Path(__file__).parent / "factor.json").read_text())["factor"]


@torch.library.custom_op(add_op_namespace_prefix("scale"), mutates_args=())
def _scale(x: torch.Tensor) -> torch.Tensor:
    return x * FACTOR


@_scale.register_fake
def _(x):
    return torch.empty_like(x)


def scale(x: torch.Tensor) -> torch.Tensor:
    return ops.scale(x)
"""


def write_noarch_project(root: Path, build_toml: str = NOARCH_BUILD_TOML) -> Path:
    package = root / "torch-ext" / "scale_noarch"
    package.mkdir(parents=True)
    (root / "build.toml").write_text(build_toml)
    (package / "__init__.py").write_text(NOARCH_INIT)
    (package / "factor.json").write_text('{"factor": 2.5}\n')
    (package / "notes.txt").write_text("not a pyext suffix: stays out of the wheel\n")
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("VALUE = 7\n")
    return root


TVM_FFI_BUILD_TOML = """\
[general]
name = "add-one"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[tvm-ffi]
src = ["tvm-ffi-ext/binding.cpp"]

[kernel.add_one_cpu]
backend = "cpu"
depends = []
src = ["csrc/add_one_cpu.cpp"]

[kernel.add_one_cuda]
backend = "cuda"
depends = []
src = ["csrc/add_one_cuda.cu"]
"""

TVM_FFI_BINDING = """\
#include <tvm/ffi/tvm_ffi.h>

#ifdef CPU_KERNEL
void add_one_cpu(tvm::ffi::TensorView out, tvm::ffi::TensorView in);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_cpu, add_one_cpu);
#endif

#ifdef CUDA_KERNEL
void add_one_cuda(tvm::ffi::TensorView out, tvm::ffi::TensorView in);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_cuda, add_one_cuda);
#endif
"""

TVM_FFI_CPU = """\
#include <tvm/ffi/tvm_ffi.h>

void add_one_cpu(tvm::ffi::TensorView out, tvm::ffi::TensorView in) {
  DLDataType f32{kDLFloat, 32, 1};
  TVM_FFI_CHECK(in.dtype() == f32 && out.dtype() == f32, TypeError) << "float32 only";
  TVM_FFI_CHECK(in.numel() == out.numel(), ValueError) << "size mismatch";
  if (in.numel() == 0) return;
  TVM_FFI_CHECK(in.IsContiguous() && out.IsContiguous(), ValueError) << "contiguous only";
  const float* src = static_cast<const float*>(in.data_ptr());
  float* dst = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] + 1.0f;
}
"""

TVM_FFI_CUDA = """\
#include <tvm/ffi/tvm_ffi.h>
#include <cuda_runtime.h>

__global__ void add_one_kernel(float* out, const float* in, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

void add_one_cuda(tvm::ffi::TensorView out, tvm::ffi::TensorView in) {
  DLDataType f32{kDLFloat, 32, 1};
  TVM_FFI_CHECK(in.dtype() == f32 && out.dtype() == f32, TypeError) << "float32 only";
  TVM_FFI_CHECK(in.numel() == out.numel(), ValueError) << "size mismatch";
  int64_t n = in.numel();
  if (n == 0) return;
  add_one_kernel<<<(n + 255) / 256, 256>>>(
      static_cast<float*>(out.data_ptr()), static_cast<const float*>(in.data_ptr()), n);
  TVM_FFI_CHECK(cudaGetLastError() == cudaSuccess, RuntimeError) << "launch failed";
}
"""

TVM_FFI_INIT = """\
import tvm_ffi

from ._ops import has_torch, ops, torch_add_op_namespace_prefix


def add_one(x, out):
    x_t, out_t = tvm_ffi.from_dlpack(x), tvm_ffi.from_dlpack(out)
    if x_t.device.type == "cpu":
        ops.add_one_cpu(out_t, x_t)
    else:
        ops.add_one_cuda(out_t, x_t)
    return out
"""


def write_tvm_ffi_project(root: Path, build_toml: str = TVM_FFI_BUILD_TOML) -> Path:
    files = {
        "build.toml": build_toml,
        "tvm-ffi-ext/binding.cpp": TVM_FFI_BINDING,
        "tvm-ffi-ext/add_one/__init__.py": TVM_FFI_INIT,
        "csrc/add_one_cpu.cpp": TVM_FFI_CPU,
        "csrc/add_one_cuda.cu": TVM_FFI_CUDA,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root
