"""A real ``TORCH_LIBRARY`` op compiled against kernelwheel's torch 2.14.1+cu130 build
environment, for the integration tests that put it into a Hub repo (to-wheel, lock, download)."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from support.builds import build_env, cache_dir
from support.variants import TORCH214_CU130 as VARIANT

NS = "_img2gray_7e57ab1"

OP_SOURCE = r"""
#include <Python.h>
#include <ATen/ATen.h>
#include <torch/library.h>

at::Tensor img2gray_cpu(const at::Tensor& rgb) {
  TORCH_CHECK(rgb.scalar_type() == at::kByte && rgb.size(-1) == 3, "expected uint8 [..., 3]");
  auto x = rgb.to(at::kInt);
  auto sum = x.select(-1, 0) * 21 + x.select(-1, 1) * 72 + x.select(-1, 2) * 7;
  return sum.div(100, "floor").to(at::kByte);
}

TORCH_LIBRARY(NS, m) { m.def("img2gray(Tensor rgb) -> Tensor"); }
TORCH_LIBRARY_IMPL(NS, CPU, m) { m.impl("img2gray", &img2gray_cpu); }

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(a) #a
#define STR(a) STR_(a)
extern "C" PyMODINIT_FUNC CAT(PyInit_, NS)(void) {
  static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, STR(NS), nullptr, 0, nullptr};
  return PyModule_Create(&module);
}
"""

CHECK = f"""
import torch, img2gray
rgb = torch.tensor([[[255, 255, 255], [10, 20, 30], [0, 0, 0]]], dtype=torch.uint8)
out = torch.ops.{NS}.img2gray(rgb)
assert out.tolist() == [[255, (21 * 10 + 72 * 20 + 7 * 30) // 100, 0]], out
assert img2gray.ops.img2gray is not None and torch.__version__.startswith("2.14.")
print("OK", img2gray.add_op_namespace_prefix("img2gray"))
"""


@functools.cache
def torch_site() -> Path:
    return build_env(VARIANT).purelib


@functools.cache
def extension() -> bytes:
    """The op compiled against the environment's torch headers (a real TORCH_LIBRARY .so);
    cached beside the build environments, keyed by the source and the torch it was built for.
    Each process compiles to a file of its own, renamed into place: xdist workers (and other
    runs sharing the cache) that compile it at once never write one file together."""
    torch_dir = torch_site() / "torch"
    version = (torch_dir / "version.py").read_text()
    key = hashlib.sha256((OP_SOURCE + version).encode()).hexdigest()[:16]
    work = cache_dir() / "hub-test-ops" / key
    out = work / f"{NS}.abi3.so"
    if out.exists():
        return out.read_bytes()
    mine = work / f"tmp-{os.getpid()}"  # the same file names in it: the same bytes
    mine.mkdir(parents=True, exist_ok=True)
    source, made = mine / "op.cpp", mine / f"{NS}.abi3.so"
    source.write_text(OP_SOURCE)
    cmd = [
        os.environ.get("CXX", "g++"),
        "-shared",
        "-fPIC",
        "-O0",
        "-std=c++20",
        f"-DNS={NS}",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
        "-DPy_LIMITED_API=0x03090000",
        f"-I{torch_dir / 'include'}",
        f"-I{torch_dir / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
        f"-I{sysconfig.get_paths()['include']}",
        f"-L{torch_dir / 'lib'}",
        "-o",
        str(made),
        str(source),
        "-ltorch",
        "-ltorch_cpu",
        "-lc10",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    made.replace(out)
    shutil.rmtree(mine)
    return out.read_bytes()
