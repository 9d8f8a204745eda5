"""Hub-layout export: metadata.json as the kernels library reads it, atomic replacement."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from packaging.tags import Tag

from kernelwheel.hub.export import NO_LICENSE, export_variant, kernel_metadata
from kernelwheel.hub.metadata import KernelMetadata
from kernelwheel.model.project import load_project
from kernelwheel.model.variant import Variant
from kernelwheel.wheels import WheelSpec, write_wheel

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
CU130 = Variant.parse("torch214-cxx11-cu130-x86_64-linux")


def test_metadata_fields() -> None:
    project = load_project(IMG2GRAY)
    meta = kernel_metadata(project, CU130, "_img2gray_abc", ("8.0", "12.0+PTX"))
    assert json.loads(meta.to_json()) == {
        "id": "_img2gray_abc",
        "name": "img2gray",
        "version": 0,
        "license": NO_LICENSE,
        "python-depends": [],
        "backend": {"type": "cuda", "archs": ["8.0", "12.0"]},
    }
    # The reader to-wheel uses reads back what the export wrote: one schema.
    back = KernelMetadata.parse(meta.to_json().encode(), where="metadata.json")
    assert back == meta


def test_export_writes_flat_variant_and_replaces_old(tmp_path: Path) -> None:
    project = load_project(IMG2GRAY)
    files = {
        "img2gray/__init__.py": b"from ._ops import ops\n",
        "img2gray/_ops.py": b"ops = None\n",
        "img2gray/_img2gray_abc.abi3.so": b"\x7fELF",
    }
    spec = WheelSpec("img2gray", "0.1.0+" + CU130.local_version, Tag("cp310", "abi3", "any"), files)
    wheel = write_wheel(spec, tmp_path / "wh")
    root = tmp_path / "repo"
    stale = root / "build" / CU130.name / "stale.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    folder = export_variant(wheel, project, CU130, "_img2gray_abc", root)
    assert folder == root / "build" / CU130.name
    assert sorted(p.name for p in folder.iterdir()) == [
        "__init__.py",
        "_img2gray_abc.abi3.so",
        "_ops.py",
        "metadata.json",
    ]
    assert json.loads((folder / "metadata.json").read_text())["id"] == "_img2gray_abc"
    assert [p.name for p in (root / "build").iterdir()] == [CU130.name]  # no temp left
    shutil.rmtree(root)
