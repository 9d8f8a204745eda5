"""Which sources reach no torch header: they are cached on their preprocessed text."""

from __future__ import annotations

from pathlib import Path

from kernelwheel.compile.torch_free import torch_free_sources


def write(root: Path, rel: str, text: str) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_includes_are_followed_through_the_project(tmp_path: Path) -> None:
    root = tmp_path / "kernel"
    write(root, "csrc/scale.h", '#pragma once\n#include "detail/math.h"\n#include <cuda_fp16.h>\n')
    write(root, "csrc/detail/math.h", "#define SCALE 3\n")
    write(root, "csrc/tensor_util.h", "#pragma once\n#include <ATen/cuda/CUDAContext.h>\n")
    write(root, "csrc/deep.h", '#include "tensor_util.h"\n')
    sources = [
        write(root, "csrc/free.cu", '#include "scale.h"\n#include <cuda_runtime.h>\n'),
        write(root, "csrc/angled.cu", "#include <scale.h>\n"),  # found through -I csrc
        write(root, "csrc/deep.cu", '#include "deep.h"\n'),  # torch two headers down
        write(root, "csrc/guarded.cu", "#ifdef WITH_TORCH\n#  include <torch/all.h>\n#endif\n"),
        write(root, "torch-ext/torch_binding.cpp", '#include "registration.h"\n'),
        write(root, "csrc/cycle.cu", '#include "cycle.cu"\n'),
    ]
    free = torch_free_sources(sources, [str(root / "csrc")], root)
    assert [Path(s).name for s in free] == ["free.cu", "angled.cu", "cycle.cu"]


def test_headers_outside_the_project_are_not_followed(tmp_path: Path) -> None:
    """CUDA's or CUTLASS's headers: taken as torch-free (the scan picks a cache mode only)."""
    outside = tmp_path / "cutlass" / "include"
    write(outside.parent, "include/cutlass/gemm.h", "#include <torch/torch.h>\n")
    root = tmp_path / "kernel"
    source = write(root, "gemm.cu", "#include <cutlass/gemm.h>\n")
    assert torch_free_sources([source], [str(outside)], root) == (source,)
