"""End to end with real torch (integration): a Hub repo whose extension registers a real
``TORCH_LIBRARY`` op, served by the loopback Hub, converted by the CLI, pip-installed into a
fresh venv layered on kernelwheel's torch 2.14.1+cu130 build environment; importing the package
registers the op and it computes; the cxx98 variant is refused by the import guard."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, variant_files
from support.hubserver import GitBackedRepo, HubState, serve
from support.venvs import QuickVenv

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

VARIANT = "torch214-cxx11-cu130-x86_64-linux"
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


@pytest.fixture(scope="module")
def torch_site() -> Path:
    from support.builds import build_env

    return build_env(VARIANT).purelib


@pytest.fixture(scope="module")
def extension(torch_site: Path) -> bytes:
    """The op compiled against the environment's torch headers (a real TORCH_LIBRARY .so);
    cached beside the build environments, keyed by the source and the torch it was built for."""
    from support.builds import cache_dir

    torch_dir = torch_site / "torch"
    version = (torch_dir / "version.py").read_text()
    key = hashlib.sha256((OP_SOURCE + version).encode()).hexdigest()[:16]
    work = cache_dir() / "hub-test-ops" / key
    out = work / f"{NS}.abi3.so"
    if out.exists():
        return out.read_bytes()
    work.mkdir(parents=True, exist_ok=True)
    (work / "op.cpp").write_text(OP_SOURCE)
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
        str(work / "tmp.so"),
        str(work / "op.cpp"),
        "-ltorch",
        "-ltorch_cpu",
        "-lc10",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (work / "tmp.so").replace(out)
    return out.read_bytes()


@pytest.fixture(scope="module")
def hub_repo(extension: bytes, tmp_path_factory: pytest.TempPathFactory) -> HubRepo:
    """v1.1.2: nested layout (cxx11 and a mislabelled cxx98 copy); branch v1: flat layout."""
    repo = HubRepo(tmp_path_factory.mktemp("torchrepo") / "img2gray")
    so_cache = tmp_path_factory.mktemp("unused")
    repo.set_variants(
        variant_files(name, so_cache=so_cache, binary=(NS, extension))
        for name in (VARIANT, "torch214-cxx98-cu130-x86_64-linux")
    )
    repo.commit("nested")
    repo.tag("v1.1.2")
    repo.set_variants(
        [variant_files(VARIANT, layout="flat", so_cache=so_cache, binary=(NS, extension))]
    )
    repo.commit("flat")
    repo.branch("v1")
    return repo


@pytest.fixture
def hub(hub_repo: HubRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    state = HubState(repos={"drbh/img2gray": GitBackedRepo(hub_repo.root)})
    with serve(state) as url:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
        yield state


@pytest.mark.parametrize(("version", "wheel_version"), [("1.1.2", "1.1.2"), ("1", "1")])
def test_converted_wheel_registers_and_runs_its_op(
    hub: HubState, torch_site: Path, tmp_path: Path, version: str, wheel_version: str
) -> None:
    out = tmp_path / "wheelhouse"
    # Built on this host (glibc 2.36), so the ABI check rightly reports manylinux_2_28
    # violations; writing anyway is what --allow-abi-violations is for.
    args = ["to-wheel", "drbh/img2gray", version, "-o", str(out), "--variant", VARIANT]
    assert main(args) == 8
    assert main([*args, "--allow-abi-violations"]) == 0
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install(f"img2gray=={wheel_version}+torch2.14.cu130.cxx11", find_links=out)
    assert f"OK {NS}::img2gray" in venv.run("-c", CHECK).stdout


def test_wrong_abi_variant_is_refused_by_the_guard_under_real_torch(
    hub: HubState, torch_site: Path, tmp_path: Path
) -> None:
    out = tmp_path / "wheelhouse"
    code = main(["to-wheel", "drbh/img2gray", "1.1.2", "-o", str(out), "--allow-abi-violations"])
    assert code == 0
    venv = QuickVenv(tmp_path / "venv", [torch_site])
    venv.pip_install("img2gray==1.1.2+torch2.14.cu130.cxx98", find_links=out)
    proc = venv.run("-c", "import img2gray", check=False)
    assert proc.returncode != 0 and "mismatch in: C++ ABI" in proc.stderr
    assert "pip install 'img2gray==1.1.2+torch2.14.cu130.cxx11'" in proc.stderr
