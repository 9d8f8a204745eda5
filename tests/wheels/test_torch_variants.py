"""Torch-dimension wheel variants (``variants/``): what variantlib reads, what uv 0.13.9 picks.

``kernelwheel index --wheel-variants`` also writes ``variants/``: the per-torch CUDA and CPU
builds of every torch series as PEP 825 variants labelled ``torch214_cu130``, each carrying
``abi_dependency :: torch :: X.Y`` and, for CUDA, ``abi_dependency :: nvidia_cuda_runtime ::
X.Y`` (the runtime the torch itself pins). The wheels are small real wheels (a package saying
which build it is, a real nvcc object for ``sm_arch``), as in test_wheel_variants.py.

The integration test installs from that index with uv 0.13.9 ``--preview-features
wheel-variants`` into two interpreters whose torch is really installed (the build environments'
site-packages linked entry by entry, so uv sees ``torch-*.dist-info`` and the NVIDIA runtime as
installed): torch 2.13.0+cpu and torch 2.14.1 (CUDA 13.0), both on a forced CUDA 13.0 driver and
an sm 9.0 GPU.
It records what uv picked; the transcript goes to ``$KERNELWHEEL_EVIDENCE`` when set
(docs/evidence/torch_variants_uv.log).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag
from support.builds import CPU_VARIANT, CUDA_VARIANT, build_env
from support.http import http_server
from support.installkit import UV, isolated_env
from support.venvs import QuickVenv
from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from kernelwheel.cli import main
from kernelwheel.model.variant import Backend, TorchVersion
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.reader import verify_wheel
from kernelwheel.wheels.variants import torch_properties

OBJECT = Path(__file__).parents[1] / "fixtures" / "fatbin" / "add_one.o"
TAG = Tag("cp310", "abi3", "manylinux_2_28_x86_64")
BUILDS = [("2.13", "cpu"), ("2.13", "cu130"), ("2.14", "cpu"), ("2.14", "cu126"), ("2.14", "cu130")]
LABELS = sorted(f"torch{t.replace('.', '')}_{f}" for t, f in BUILDS)


def _build(out: Path, torch: str, flavour: str) -> Path:
    label = f"torch{torch.replace('.', '')}_{flavour}"
    files = {
        "img2gray/__init__.py": f"BUILD = {label!r}\n".encode(),
        "img2gray/_add_one.abi3.so": OBJECT.read_bytes(),  # never loaded: its fatbin is read
    }
    spec = WheelSpec("img2gray", f"0.1.0+torch{torch}.{flavour}.cxx11", TAG, files)
    return write_wheel(spec, out)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torchvariants")
    for torch, flavour in BUILDS:
        _build(root / "wh", torch, flavour)
    assert main(["index", str(root / "wh"), "-o", str(root / "site"), "--wheel-variants"]) == 0
    return root / "site"


def test_torch_properties_name_the_torch_and_its_cuda_runtime() -> None:
    t214 = TorchVersion(2, 14)
    assert torch_properties(t214, Backend.parse_token("cu126")) == [
        ("abi_dependency", "torch", "2.14"),
        ("abi_dependency", "nvidia_cuda_runtime_cu12", "12.6"),
    ]
    assert torch_properties(t214, Backend.parse_token("cu130")) == [
        ("abi_dependency", "torch", "2.14"),
        ("abi_dependency", "nvidia_cuda_runtime", "13.0"),
    ]
    assert torch_properties(t214, Backend.parse_token("cpu")) == [
        ("abi_dependency", "torch", "2.14")
    ]


def test_the_torch_dimension_index_is_what_variantlib_reads(site: Path) -> None:
    folder = site / "variants" / "img2gray"
    wheels = sorted(folder.glob("*.whl"))
    labels = [VALIDATION_WHEEL_NAME_REGEX.fullmatch(w.name)["variant_label"] for w in wheels]
    assert sorted(labels) == LABELS
    for wheel in wheels:
        label = VALIDATION_WHEEL_NAME_REGEX.fullmatch(wheel.name)["variant_label"]
        verify_wheel(wheel)
        with zipfile.ZipFile(wheel) as zf:
            info = VariantDistInfo(zf.read("img2gray-0.1.0.dist-info/variant.json"), label)
            assert f"BUILD = {label!r}" in zf.read("img2gray/__init__.py").decode()
        props = {(p.namespace, p.feature, p.value) for p in info.variant_desc.properties}
        torch, flavour = label[len("torch") :].split("_")
        assert ("abi_dependency", "torch", f"{torch[0]}.{torch[1:]}") in props
        cuda = {p for p in props if p[0] == "nvidia"}
        runtime = {p for p in props if p[1].startswith("nvidia_cuda_runtime")}
        if flavour == "cpu":
            assert not cuda and not runtime  # a CPU build: no driver or runtime rule
        else:
            backend = Backend.parse_token(flavour)
            assert backend.cuda_version is not None
            assert ("nvidia", "cuda_version_lower_bound", backend.cuda_version) in cuda
            assert {v for _, _, v in runtime} == {backend.cuda_version}
    index_json = json.loads((folder / "img2gray-0.1.0-variants.json").read_text())
    assert sorted(VariantsJson(index_json).variants) == LABELS  # variantlib's validation
    assert index_json["providers"]["abi_dependency"] == {"builtin": "abi_dependency"}
    # The per-torch variant indexes are unchanged: labelled by flavour, no torch property.
    per_torch = json.loads(
        (site / "torch2.14" / "variants" / "img2gray" / "img2gray-0.1.0-variants.json").read_text()
    )
    assert sorted(per_torch["variants"]) == ["cu126", "cu130"]
    assert "abi_dependency" not in per_torch["providers"]


def _linked_venv(root: Path, site_packages: Path) -> QuickVenv:
    """A fresh venv whose site-packages links every entry of ``site_packages``: torch and its
    NVIDIA distributions are installed there as far as any installer can tell."""
    venv = QuickVenv(root)
    for entry in site_packages.iterdir():
        if not (venv.purelib / entry.name).exists():
            (venv.purelib / entry.name).symlink_to(entry)
    return venv


INTERPRETERS = {"torch 2.13.0+cpu": CPU_VARIANT, "torch 2.14.1 (CUDA 13.0)": CUDA_VARIANT}


@pytest.mark.integration
def test_what_uv_picks_from_the_torch_dimension_variants(site: Path, tmp_path: Path) -> None:
    # The integration tests' build environments (made once, under a lock; on a fresh machine
    # this test makes them if no build has yet): a slow test that looked for them skipped in CI.
    envs = {name: build_env(variant).purelib for name, variant in INTERPRETERS.items()}
    lines = ["# uv pip install --preview-features wheel-variants from variants/ (torch dimension)"]
    version = subprocess.run([str(UV), "--version"], capture_output=True, text=True).stdout
    lines += [f"# {version.strip()}; tests/wheels/test_torch_variants.py", ""]
    lines += ["## img2gray-0.1.0-variants.json"]
    lines += (site / "variants/img2gray/img2gray-0.1.0-variants.json").read_text().splitlines()
    picked: dict[tuple[str, str], str | None] = {}
    with http_server(site) as url:
        for i, (name, env) in enumerate(envs.items()):
            for override in ("", f"torch=={'2.13.0' if '2.13' in name else '2.14.1'}"):
                venv = _linked_venv(tmp_path / f"venv{i}{'o' if override else ''}", env)
                probe = venv.run("-c", "import importlib.metadata as m; print(m.version('torch'))")
                extra = {"VARIANT_ABI_DEPENDENCY": override} if override else {}
                environ = dict(
                    isolated_env(),
                    NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION="13.0",
                    NV_VARIANT_PROVIDER_FORCE_SM_ARCH="9.0",
                    **extra,
                )
                cmd = [
                    str(UV), "pip", "install", "--python", str(venv.python), "--no-cache",
                    "--index-url", f"{url}/variants/", "--preview-features", "wheel-variants",
                    "img2gray",
                ]  # fmt: skip
                proc = subprocess.run(cmd, capture_output=True, text=True, env=environ)
                shown = " ".join(f"{k}={v}" for k, v in sorted(environ.items()) if "VARIANT" in k)
                lines += ["", f"## interpreter: {name} (torch {probe.stdout.strip()} installed)"]
                lines += [f"$ {shown} {shlex.join(cmd)}"]
                lines += [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln]
                got = venv.run("-c", "import img2gray; print(img2gray.BUILD)", check=False)
                build = got.stdout.strip() if got.returncode == 0 else None
                lines += [f"(exit {proc.returncode}) -> img2gray.BUILD: {build}"]
                picked[(name, override)] = build
                # A measurement: installing nothing is a finding, a wrong file is a failure.
                assert (proc.returncode == 0) == (build is not None), proc.stderr
                assert build is None or build in LABELS
    target = os.environ.get("KERNELWHEEL_EVIDENCE")
    if target:
        Path(target).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(picked)
