"""Every CUDA capability the recipe for this machine's nvcc lists compiles with it: the
integration builds compile img2gray for two of them only (support.builds.CUDA_CAPABILITIES)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.builds import system_nvcc

from kernelwheel.compile.capabilities import gencode_flags
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Arch
from kernelwheel.toolchain.envs import nvcc_version
from kernelwheel.wheels.fatbin import sm_archs

pytestmark = pytest.mark.integration


@pytest.mark.skipif(system_nvcc() is None, reason="no nvcc here")
def test_every_capability_of_the_recipe_for_this_nvcc_compiles(tmp_path: Path) -> None:
    nvcc = system_nvcc()
    assert nvcc is not None
    version = nvcc_version(nvcc.parent.parent)
    recipe = load_recipes().cuda_toolchain(version, Arch.host())
    if recipe is None:
        pytest.skip(f"no recipe for this nvcc's CUDA {version}")
    (tmp_path / "k.cu").write_text("__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n")
    flags = gencode_flags(recipe.capabilities)
    cmd = [str(nvcc), "-c", "k.cu", "-o", "k.o", *flags, f"--threads={len(flags)}"]
    subprocess.run(cmd, cwd=tmp_path, check=True)
    with open(tmp_path / "k.o", "rb") as fh:
        real, virtual = sm_archs(fh)
    numbers = {cap: int(cap.digits.rstrip("af")) for cap in recipe.capabilities}
    assert real == frozenset(numbers.values())
    assert virtual == frozenset(n for cap, n in numbers.items() if cap.ptx)
