"""What the integration tests share: the example kernel, the variants they build, and the cached
build environments those builds create (reused, never made twice)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.sources import PipSources
from kernelwheel.model.variant import Variant
from kernelwheel.toolchain.envs import EnvInfo, env_spec_for, provision
from support.variants import TORCH213_CPU, TORCH214_CU130

REPO = Path(__file__).resolve().parents[2]
IMG2GRAY = REPO / "kernels" / "img2gray"
# kernelwheel's exhaustive suite of the installed img2gray (beside the kernel's own smoke test,
# IMG2GRAY / "tests").
IMG2GRAY_SUITE = REPO / "tests" / "kernel_suites" / "img2gray"
# The two builds of img2gray the integration tests make (the session fixture `built`).
CUDA_VARIANT = TORCH214_CU130
CPU_VARIANT = TORCH213_CPU
# Their CUDA capabilities: two of the recipe's ten (a fatbin of several targets, PTX too), at a
# fifth of the nvcc time; tests/toolchain/test_nvcc_targets.py compiles for every one of them.
CUDA_CAPABILITIES = "8.0 9.0+PTX"


def cache_dir() -> Path:
    return Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()


def build_env(variant_name: str) -> EnvInfo:
    """The (cached) build environment of a variant: created by the build, reused here."""
    recipe = load_recipes().recipe_for(Variant.parse(variant_name))
    return provision(env_spec_for(recipe, PipSources()), cache_dir())


@dataclass(frozen=True)
class Built:
    wheelhouse: Path
    wheels: dict[str, Path]  # variant name -> wheel
    exit_code: int


# Run inside a venv holding a built img2gray: the op against NumPy's formula on fresh random
# inputs, several shapes (empty and 4-D included).
CHECK_OP = r"""
import sys, numpy as np, torch, img2gray
rng = np.random.default_rng()
for shape in [(1, 1, 3), (7, 13, 3), (480, 641, 3), (4, 33, 17, 3), (0, 5, 3)]:
    img = rng.integers(0, 256, size=shape, dtype=np.uint8)
    got = img2gray.img2gray(torch.from_numpy(img)).numpy()
    rgb = img.astype(np.int64)
    ref = (21 * rgb[..., 0] + 72 * rgb[..., 1] + 7 * rgb[..., 2]) // 100
    assert got.shape == shape[:-1], (got.shape, shape)
    assert np.array_equal(got, ref.astype(np.uint8)), shape
print("ops:", img2gray._ops.add_op_namespace_prefix("img2gray"))
print("OK", torch.__version__)
"""


# Run inside a venv holding a built img2gray: the devices it serves, a meta tensor through the
# shared checks, and NotImplementedError for each device whose kernel the build lacks.
CHECK_ONE_BACKEND = r"""
import torch, img2gray
devices = img2gray.supported_devices()
assert img2gray.img2gray(torch.empty(2, 3, 3, dtype=torch.uint8, device="meta")).shape == (2, 3)
if "cpu" not in devices:
    try:
        img2gray.img2gray(torch.zeros(2, 3, 3, dtype=torch.uint8))
    except NotImplementedError as e:
        assert "'CPU' backend" in str(e), e
    else:
        raise AssertionError("a build without the CPU kernel ran a CPU tensor")
print("devices", devices)
"""


def system_nvcc() -> Path | None:
    """An nvcc of this machine (PATH, else /usr/local/cuda*), None where there is none."""
    found = shutil.which("nvcc") or next(Path("/usr/local").glob("cuda*/bin/nvcc"), None)
    return Path(found) if found else None
