"""Planning how a build/<variant>/ folder becomes a package, and reading metadata.json."""

from __future__ import annotations

import json

import pytest

from kernelwheel.errors import HubError
from kernelwheel.hub.layout import KernelMetadata, Layout, package_name, plan

V = "torch27-cxx11-cu128-x86_64-linux"
NESTED = ["img2gray/__init__.py", "img2gray/_ops.py", "img2gray/_img2gray_0a1b.abi3.so"]
FLAT = [
    "__init__.py",
    "_ops.py",
    "_img2gray_0a1b.abi3.so",
    "metadata.json",
    "img2gray/__init__.py",
    "layers/__init__.py",
]


def test_nested_maps_the_package_folder() -> None:
    p = plan(
        V,
        [*NESTED, "README.md", "img2gray/__pycache__/x.cpython-311.pyc"],
        metadata=None,
        repo_name="img2gray",
        where="w",
    )
    assert (p.layout, p.package) == (Layout.NESTED, "img2gray")
    assert dict(p.files) == {n: n for n in NESTED}
    assert dict(p.left_out) == {
        "README.md": "outside the package folder img2gray/",
        "img2gray/__pycache__/x.cpython-311.pyc": "compiled bytecode",
    }


def test_flat_lays_the_variant_folder_out_as_the_package_and_drops_the_shim() -> None:
    meta = KernelMetadata(name="img2gray")
    p = plan(V, FLAT, metadata=meta, repo_name="whatever", where="w")
    assert (p.layout, p.package, p.metadata_path) == (Layout.FLAT, "img2gray", "metadata.json")
    assert dict(p.files) == {
        "__init__.py": "img2gray/__init__.py",
        "_ops.py": "img2gray/_ops.py",
        "_img2gray_0a1b.abi3.so": "img2gray/_img2gray_0a1b.abi3.so",
        "layers/__init__.py": "img2gray/layers/__init__.py",
    }
    left = dict(p.left_out)
    assert left["img2gray/__init__.py"].startswith("compatibility shim")
    assert left["metadata.json"] == "read into the wheel's METADATA"


def test_flat_package_name_from_repo_when_metadata_has_none() -> None:
    p = plan(V, ["__init__.py", "_ops.py"], metadata=None, repo_name="flash-attn3", where="w")
    assert p.package == "flash_attn3"
    assert package_name("my.kernel-x") == "my_kernel_x"


def test_nested_prefers_the_package_named_after_the_repo() -> None:
    paths = ["img2gray/__init__.py", "helpers/__init__.py"]
    p = plan(V, paths, metadata=None, repo_name="img2gray", where="w")
    assert p.package == "img2gray" and dict(p.left_out)["helpers/__init__.py"].startswith("outside")
    with pytest.raises(HubError, match="several packages"):
        plan(V, paths, metadata=None, repo_name="other", where="w")


@pytest.mark.parametrize(
    ("paths", "match"),
    [
        (["img2gray/_ops.py", "README.md"], "no Python package"),
        ([], "no Python package"),
        (["1bad/__init__.py"], "not a Python identifier"),
    ],
)
def test_unusable_folders_say_why(paths: list[str], match: str) -> None:
    with pytest.raises(HubError, match=match) as info:
        plan(V, paths, metadata=None, repo_name="img2gray", where="repo: build/" + V)
    assert f"repo: build/{V}" in str(info.value)


def test_metadata_fields() -> None:
    raw = {
        "name": "img2gray",
        "version": 1,
        "license": "apache-2.0",
        "python-depends": ["einops>=0.8", "numpy"],
        "id": "_img2gray_0a1b",
        "backend": {"type": "cuda", "archs": ["8.0"]},
    }
    meta = KernelMetadata.parse(json.dumps(raw).encode(), where="m")
    assert meta == KernelMetadata(
        name="img2gray",
        version="1",
        license="apache-2.0",
        python_depends=("einops>=0.8", "numpy"),
    )
    assert KernelMetadata.parse(b'{"python-depends": []}', where="m") == KernelMetadata()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "expected a JSON object"),
        (b'{"python-depends": "einops"}', "must be a list of strings"),
        (b'{"python-depends": ["einops>=="]}', "not a pip requirement"),
        (b'{"name": ["x"]}', "field 'name' must be a string"),
        (b'{"license": 3.5}', "field 'license' must be a string"),
    ],
)
def test_metadata_errors_name_file_field_value(data: bytes, match: str) -> None:
    with pytest.raises(HubError, match=match) as info:
        KernelMetadata.parse(data, where="build/v/metadata.json")
    assert str(info.value).startswith("build/v/metadata.json: ")
