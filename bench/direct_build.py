"""Build the img2gray package straight from kernels/img2gray with torch.utils.cpp_extension.

This is NOT how users get img2gray (kernelwheel builds the wheel); it is a development harness:
- before kernelwheel's pipeline existed, it let the kernel and its tests be iterated on;
- bench/gpu_check.py uses it (``--direct``) when asked to skip the wheel build;
- it also compiles bench/variants.cu (the seed's naive kernel and the tuning experiments).

It writes its own stand-in for the registration header and for the generated ``_ops.py`` into a
scratch folder, so the package it produces imports as ``img2gray`` exactly like the installed one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNEL = REPO / "kernels" / "img2gray"

REGISTRATION_H = r"""#pragma once
// Stand-in for kernelwheel's generated registration header (bench/direct_build.py).
#include <Python.h>
#include <torch/library.h>
#define KW_CONCAT_(a, b) a##b
#define KW_CONCAT(a, b) KW_CONCAT_(a, b)
#define KW_STR_(x) #x
#define KW_STR(x) KW_STR_(x)
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
#define REGISTER_EXTENSION(NAME)                                                      \
  PyMODINIT_FUNC KW_CONCAT(PyInit_, NAME)(void) {                                     \
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, KW_STR(NAME), nullptr, \
                                        0, nullptr};                                  \
    return PyModule_Create(&module);                                                  \
  }
"""

OPS_PY = """import os
import torch

_NAME = "{name}"
torch.ops.load_library(os.path.join(os.path.dirname(os.path.abspath(__file__)), "{so}"))
ops = getattr(torch.ops, _NAME)


def add_op_namespace_prefix(op_name: str) -> str:
    return f"{{_NAME}}::{{op_name}}"
"""


def _cuda_env() -> None:
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    os.environ["PATH"] = f"{os.environ['CUDA_HOME']}/bin:{os.environ['PATH']}"


def _extra_cuda_includes() -> list[str]:
    """torch's own nvidia/cu13 headers (some toolkits lack the cuBLAS headers ATen includes)."""
    import torch

    site = Path(torch.__file__).resolve().parent.parent
    return [str(p) for p in sorted((site / "nvidia").glob("cu*/include")) if p.is_dir()]


def build_package(
    dest: Path,
    *,
    cuda: bool = True,
    arch: str = "9.0",
    tag: str = "",
    verbose: bool = False,
) -> Path:
    """Compile kernels/img2gray into ``dest/img2gray`` (a package) and return ``dest``.

    ``tag`` changes the op namespace (so two builds can be loaded side by side). ``arch`` is a
    compute capability such as ``9.0``. One backend per build, as kernel-builder compiles it (the
    binding registers under CPU_KERNEL / CUDA_KERNEL): the CUDA kernel, or without ``cuda`` the
    CPU kernel.
    """
    from torch.utils import cpp_extension

    if cuda:
        _cuda_env()
    kernel = KERNEL / "csrc" / ("img2gray.cu" if cuda else "img2gray_cpu.cpp")
    sources = [KERNEL / "torch-ext" / "torch_binding.cpp", kernel]
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.read_bytes())
    digest.update(f"{cuda}{arch}{tag}".encode())
    name = f"_img2gray_direct_{digest.hexdigest()[:10]}"

    dest = Path(dest).resolve()
    work = dest / "_build"
    include = dest / "_include"
    pkg = dest / "img2gray"
    for d in (work, include, pkg):
        d.mkdir(parents=True, exist_ok=True)
    (include / "registration.h").write_text(REGISTRATION_H)

    defines = ["-DCUDA_KERNEL", "-DUSE_CUDA=1"] if cuda else ["-DCPU_KERNEL"]
    cc = arch.replace(".", "")
    so = cpp_extension.load(
        name=name,
        sources=[str(s) for s in sources],
        extra_include_paths=[str(include), str(KERNEL / "torch-ext")] + _extra_cuda_includes(),
        extra_cflags=["-O3", *defines],
        extra_cuda_cflags=["-O3", f"-gencode=arch=compute_{cc},code=sm_{cc}", *defines],
        extra_ldflags=os.environ.get("LDFLAGS", "").split(),
        build_directory=str(work),
        is_python_module=False,
        with_cuda=cuda,
        verbose=verbose,
    )
    so_path = Path(so) if isinstance(so, str) else work / f"{name}.so"
    shutil.copy2(so_path, pkg / so_path.name)
    shutil.copy2(KERNEL / "torch-ext" / "img2gray" / "__init__.py", pkg / "__init__.py")
    (pkg / "_ops.py").write_text(OPS_PY.format(name=name, so=so_path.name))
    return dest


def build_variants(dest: Path, *, arch: str = "9.0", verbose: bool = False) -> str:
    """Compile bench/variants.cu; returns the op namespace (torch.ops.<ns>.<variant>)."""
    from torch.utils import cpp_extension

    _cuda_env()
    src = REPO / "bench" / "variants.cu"
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    cc = arch.replace(".", "")
    cpp_extension.load(
        name="img2gray_bench_variants",
        sources=[str(src)],
        extra_include_paths=_extra_cuda_includes(),
        extra_cuda_cflags=["-O3", f"-gencode=arch=compute_{cc},code=sm_{cc}", "-Xptxas=-v"],
        extra_ldflags=os.environ.get("LDFLAGS", "").split(),
        build_directory=str(dest),
        is_python_module=False,
        verbose=verbose,
    )
    return "img2gray_bench"


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/img2gray_direct")
    build_package(out, cuda="--cpu" not in sys.argv, verbose=True)
    print(out)
