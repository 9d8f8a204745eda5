"""`kernelwheel build --hub-layout` of a kernel in kernel-builder's current format loads with
the `kernels` library from PyPI: its own metadata parser reads metadata.json, its own digest of the
folder matches the one written, and `get_kernel` through LOCAL_KERNELS calls the op. It also loads
in the release its `kernels-minver` names (0.14.0 for this plain CPU build: the rule's floor)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT
from support.hubserver import HubState, serve_as_hub
from support.layered import LayeredVenv
from support.tinykernel import NAME, write_tiny_kernel
from support.wheelread import read_wheel

from kernelwheel.cli import main
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels

pytestmark = pytest.mark.integration

KERNELS = "kernels==0.17.2"
# The floor of data/kernels_minver.toml, with the kernels-data (its metadata parser) of that
# release: a newer kernels-data would prove nothing about 0.14.0.
KERNELS_FLOOR = ("kernels==0.14.0", "kernels-data==0.14.0")
REPO_ID = "kwtest/tiny-add"

LOAD = r"""
import json, sys
from pathlib import Path
import torch
from kernels import get_kernel
from kernels._rust import Digest, DigestAlgorithm, Metadata

variant = Path(sys.argv[1])
meta = Metadata.read_from_file(variant / "metadata.json")  # kernels' own (strict) parser
meta.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, variant))  # raises on mismatch
k = get_kernel(sys.argv[2], version=1, backend="cpu")
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
assert torch.equal(k.add_one(x), x + 1)
print(json.dumps({
    "name": str(meta.name), "id": meta.id, "version": meta.version, "license": meta.license,
    "upstream": meta.upstream, "source": meta.source, "backend": str(meta.backend.backend_type),
    "kernel": meta.provenance.kernel.commit, "dirty": meta.provenance.dirty,
    "minver": str(meta.kernels_minver), "module": k.__name__,
}))
"""

# What kernels 0.14.0 offers: get_kernel through LOCAL_KERNELS, with its own metadata check.
LOAD_FLOOR = r"""
import sys
import torch
import kernels
from kernels import get_kernel

k = get_kernel(sys.argv[2], version=1, backend="cpu")
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
assert torch.equal(k.add_one(x), x + 1)
print(kernels.__version__)
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout.strip()


def test_exported_cpu_build_loads_with_kernels_and_calls_the_op(
    tmp_path: Path, venv_for: Callable[..., LayeredVenv], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_tiny_kernel(tmp_path / NAME, version=1)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "tiny-add")
    _git(root, "tag", "v1.4.0")
    tree, wheels = tmp_path / "tree", tmp_path / "wh"
    args = ["build", str(root), "-o", str(wheels), "--variant", CPU_VARIANT]
    assert main([*args, "--hub-layout", str(tree)]) == 0
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith("tiny_add-1.4.0+")  # the tag's version
    assert read_wheel(wheel).metadata["License-Expression"] == "Apache-2.0"
    variant = tree / "build" / CPU_VARIANT

    venv = venv_for(CPU_VARIANT)
    venv.pip(KERNELS)
    env = dict(os.environ, LOCAL_KERNELS=f"{REPO_ID}={tree}", HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [str(venv.python), "-c", LOAD, str(variant), REPO_ID],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["name"] == NAME and seen["version"] == 1 and seen["license"] == "apache-2.0"
    assert seen["id"].startswith("_tiny_add_") and seen["backend"].lower() == "cpu"
    assert seen["upstream"] and seen["source"]
    assert seen["kernel"] == _git(root, "rev-parse", "HEAD") and seen["dirty"] is False
    written = json.loads((variant / "metadata.json").read_text())
    assert written["kernels-minver"] == "0.14.0"
    assert seen["minver"] in ("0.14", "0.14.0")  # kernels-data drops trailing zeros
    assert (tree / "README.md").read_bytes() == (root / "CARD.md").read_bytes()

    # The release kernels-minver names loads it too.
    floor = venv_for(CPU_VARIANT, "floor")
    floor.pip(*KERNELS_FLOOR)
    proc = subprocess.run(
        [str(floor.python), "-c", LOAD_FLOOR, str(variant), REPO_ID],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "0.14.0"

    # Published with `kernelwheel upload` (to the loopback Hub's kernel repo, branch v1) and
    # converted back by to-wheel: the package the build wrote, file for file.
    state = HubState(write_token="hf_w", root=tmp_path / "hub-repos")
    with serve_as_hub(state, monkeypatch, tmp_path / "hf-cache"):
        monkeypatch.setenv("HF_TOKEN", "hf_w")
        assert main(["upload", str(tree), "--repo", REPO_ID]) == 0
        assert state.type_of(REPO_ID) == "kernel"
        back = to_wheels(ToWheelRequest(REPO_ID, "1", output_dir=tmp_path / "back"))
    (converted,) = back.converted
    assert (back.resolution.ref, converted.variant) == ("v1", CPU_VARIANT)
    assert converted.kernels_minver == "0.14.0"
    built, again = read_wheel(wheel).files, read_wheel(converted.wheel).files
    package = [n for n in built if n.startswith("tiny_add/")]
    assert package and all(again[n] == built[n] for n in package)
