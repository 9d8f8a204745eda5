"""`kernelwheel build --hub-layout`: the tree loads with the real `kernels` library from PyPI,
and `kernelwheel to-wheel` converts it back to an equivalent wheel."""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT, IMG2GRAY
from support.layered import LayeredVenv

from kernelwheel.cli import main
from kernelwheel.model.variant import Variant

pytestmark = pytest.mark.integration

KERNELS = "kernels==0.17.2"

LOAD = r"""
import sys, numpy as np, torch
from pathlib import Path
import kernels
k = kernels.get_local_kernel(Path(sys.argv[1]), backend="cpu", trust_remote_code=True)
img = torch.from_numpy(np.random.default_rng().integers(0, 256, (37, 41, 3), dtype=np.uint8))
rgb = img.numpy().astype(np.int64)
ref = (21 * rgb[..., 0] + 72 * rgb[..., 1] + 7 * rgb[..., 2]) // 100
assert np.array_equal(k.img2gray(img).numpy(), ref)
print("loaded", k.__name__)
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo, check=True, capture_output=True,
    )


def test_hub_layout_loads_with_kernels_and_converts_back(
    tmp_path: Path, venv_for: Callable[..., LayeredVenv]
) -> None:
    tree, wheels = tmp_path / "repo", tmp_path / "wh"
    args = ["build", str(IMG2GRAY), "-o", str(wheels), "--variant", CPU_VARIANT]
    assert main([*args, "--hub-layout", str(tree)]) == 0
    variant_dir = tree / "build" / CPU_VARIANT
    assert (variant_dir / "metadata.json").is_file()

    venv = venv_for(CPU_VARIANT)
    venv.pip(KERNELS)
    assert "loaded" in venv.run("-c", LOAD, str(tree)).stdout

    # The same tree as a Hub repo clone, tagged like a legacy release, back into a wheel.
    _git(tree, "init", "-q", "-b", "main")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "build")
    _git(tree, "tag", "v0.1.0")
    out = tmp_path / "back"
    assert main(["to-wheel", str(tree), "0.1.0", "-o", str(out)]) == 0
    (built,) = wheels.glob("*.whl")
    (converted,) = out.glob("*.whl")
    local = Variant.parse(CPU_VARIANT).local_version
    assert converted.name.startswith(f"img2gray-0.1.0+{local}-")
    assert converted.name.endswith("-manylinux_2_28_x86_64.whl")
    with zipfile.ZipFile(built) as a, zipfile.ZipFile(converted) as b:
        so_a = {n: a.read(n) for n in a.namelist() if n.endswith(".so")}
        so_b = {n: b.read(n) for n in b.namelist() if n.endswith(".so")}
        assert so_a == so_b  # the very same extension, under the same package path
        assert b.read("img2gray/__init__.py") == a.read("img2gray/__init__.py")
