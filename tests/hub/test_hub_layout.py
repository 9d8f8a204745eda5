"""Hub-layout export: metadata.json in the form the kernels library reads (name, id, integer
version, license, URLs, python-depends in kernel-builder's names, kernel-depends, backend, digest,
provenance), atomic replacement."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

from packaging.tags import Tag
from support.tinykernel import SOURCE, UPSTREAM, write_tiny_kernel
from support.variants import TORCH213_CPU, TORCH214_CU130

from kernelwheel import __version__
from kernelwheel.hub.export import NO_LICENSE, export_variant, kernel_metadata
from kernelwheel.hub.metadata import Digest, KernelMetadata
from kernelwheel.model.capability import parse_all
from kernelwheel.model.project import load_project
from kernelwheel.model.variant import Variant
from kernelwheel.plan.versioning import GitState
from kernelwheel.wheels import WheelSpec, write_wheel

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
CU130 = Variant.parse(TORCH214_CU130)
CPU = Variant.parse(TORCH213_CPU)
COMMIT = "ab" * 20
DEPENDS = """\
python-depends = ["einops", "numpy>=1.26"]
kernel-depends = [{ repo-id = "kernels-community/relu", version = 1 }]

[general.cuda]
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "org/helper", revision = "abc123" }]
"""


def test_metadata_fields_of_the_current_format(tmp_path: Path) -> None:
    project = load_project(write_tiny_kernel(tmp_path / "k", version=2, extra_general=DEPENDS))
    files = {"__init__.py": b"x\n", "_ops.py": b"y\n"}
    meta = kernel_metadata(
        project, CU130, "_tiny_add_abc", parse_all(["8.0", "12.0+PTX"]), major=2, files=files,
        git=GitState(COMMIT, dirty=True),
    )
    b64 = {n: base64.b64encode(hashlib.sha256(d).digest()).decode() for n, d in files.items()}
    assert json.loads(meta.to_json()) == {
        "name": "tiny-add",
        "id": "_tiny_add_abc",
        "version": 2,
        "kernels-minver": "0.17.0",  # kernel-depends: loaded with it from kernels 0.17.0 on
        "license": "apache-2.0",
        "upstream": UPSTREAM,
        "source": SOURCE,
        # kernel-builder's names (the table's), not the PyPI requirements; numpy>=1.26 is
        # kernelwheel's own extension: the wheel requires it, kernels would not know the name
        "python-depends": ["einops", "nvidia-cutlass-dsl"],
        "kernel-depends": [
            {"repo-id": "kernels-community/relu", "version": 1},
            {"repo-id": "org/helper", "revision": "abc123"},
        ],
        "backend": {"type": "cuda", "archs": ["8.0", "12.0"]},
        "digest": {"algorithm": "sha256", "files": b64},
        "provenance": {
            "kernel-builder": {"version": f"kernelwheel {__version__}"},
            "kernel": {"commit": COMMIT, "dirty": True},
        },
    }
    # The reader to-wheel uses reads back what the export wrote: one schema.
    assert KernelMetadata.parse(meta.to_json().encode(), where="metadata.json") == meta
    # The CPU build leaves out the CUDA-only names and kernels; no archs, no git: no kernel
    cpu = json.loads(kernel_metadata(project, CPU, "_tiny_add_abc", (), major=2).to_json())
    assert cpu["python-depends"] == ["einops"]
    assert cpu["kernel-depends"] == [{"repo-id": "kernels-community/relu", "version": 1}]
    assert cpu["backend"] == {"type": "cpu"}
    assert "digest" not in cpu and "kernel" not in cpu["provenance"]


def test_a_project_without_licence_says_noassertion(tmp_path: Path) -> None:
    # img2gray names its licence now; an older-form project without one stands in.
    root = tmp_path / "img2gray"
    (root / "torch-ext" / "img2gray").mkdir(parents=True)
    (root / "torch-ext" / "img2gray" / "__init__.py").write_text("")
    (root / "build.toml").write_text('[general]\nname = "img2gray"\nversion = "0.1.0"\n')
    project = load_project(root)
    assert project.license is None
    meta = kernel_metadata(project, CU130, "_img2gray_abc", (), major=0)
    assert meta.license == NO_LICENSE and meta.version == "0"


def test_export_writes_flat_variant_and_replaces_old(tmp_path: Path) -> None:
    project = load_project(IMG2GRAY)
    files = {
        "img2gray/__init__.py": b"from ._ops import ops\n",
        "img2gray/_ops.py": b"ops = None\n",
        "img2gray/_img2gray_abc.abi3.so": b"\x7fELF",
    }
    spec = WheelSpec(
        "img2gray", "3.1.0+" + CU130.local_version, Tag("cp310", "abi3", "any"), files,
        license_files={"LICENSE": b"text\n"},
    )
    wheel = write_wheel(spec, tmp_path / "wh")
    root = tmp_path / "repo"
    stale = root / "build" / CU130.name / "stale.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    folder = export_variant(wheel, project, CU130, "_img2gray_abc", root)
    assert folder == root / "build" / CU130.name
    assert folder.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in folder.iterdir()) == [
        "__init__.py",
        "_img2gray_abc.abi3.so",
        "_ops.py",
        "metadata.json",
    ]
    meta = KernelMetadata.parse((folder / "metadata.json").read_bytes(), where="metadata.json")
    assert meta.id == "_img2gray_abc" and meta.version == "3"  # the wheel version's major
    on_disk = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert meta.digest == Digest.of(on_disk)  # what kernels computes of the folder
    assert meta.digest is not None and len(meta.digest.files) == 3
    assert [p.name for p in (root / "build").iterdir()] == [CU130.name]  # no temp left
    shutil.rmtree(root)
