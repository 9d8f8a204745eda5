"""What a project says about itself reaches its wheels: licence (SPDX expression), licence files,
project URLs, the kernel card (else the README) as a Markdown description."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.metadata import Metadata
from packaging.tags import Tag
from support.tinykernel import CARD, LICENSE, SOURCE, UPSTREAM, write_tiny_kernel

from kernelwheel.builder.wheelmeta import project_metadata
from kernelwheel.errors import ProjectError
from kernelwheel.model.project import load_project
from kernelwheel.wheels import WheelSpec, read_wheel, write_wheel

SPEC = WheelSpec(
    "tiny-add", "1.0.0+torch2.13.cpu.cxx11", Tag("cp310", "abi3", "linux_x86_64"),
    {"tiny_add/__init__.py": b""},
)


def test_the_wheel_carries_licence_files_urls_and_the_card(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k")
    (root / "COPYING.LESSER").write_text("lesser\n")
    (root / "licence-notes.md").write_text("not a licence file by its name\n")
    (root / "LICENSES").mkdir()  # a folder is not a licence file
    spec = project_metadata(load_project(root)).apply(SPEC)
    wheel = read_wheel(write_wheel(spec, tmp_path / "wh"))
    dist_info = "tiny_add-1.0.0+torch2.13.cpu.cxx11.dist-info"
    assert wheel.files[f"{dist_info}/licenses/LICENSE"] == LICENSE.encode()
    assert wheel.files[f"{dist_info}/licenses/COPYING.LESSER"] == b"lesser\n"
    meta = Metadata.from_email(wheel.files[f"{dist_info}/METADATA"], validate=True)
    assert str(meta.license_expression) == "Apache-2.0"
    assert [str(f) for f in meta.license_files or []] == ["COPYING.LESSER", "LICENSE"]
    assert meta.project_urls == {"Upstream": UPSTREAM, "Source": SOURCE}
    assert meta.description == CARD and meta.description_content_type == "text/markdown"


def test_the_readme_when_there_is_no_card_and_nothing_without_either(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k", card=False)
    found = project_metadata(load_project(root))
    assert found.description_file == root / "README.md"
    assert found.description is not None and found.description.startswith("# tiny-add (the")
    (root / "README.md").unlink()
    (root / "LICENSE").unlink()
    bare = project_metadata(load_project(root))
    assert bare.description is None and bare.license_files == {}


def test_a_licence_that_is_not_spdx_stays_free_text(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k", license="other")
    spec = project_metadata(load_project(root)).apply(SPEC)
    md = read_wheel(write_wheel(spec, tmp_path / "wh")).metadata
    assert md["License"] == "other" and md["License-Expression"] is None


def test_a_card_that_is_not_utf8_is_refused_naming_it(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k")
    (root / "CARD.md").write_bytes(b"caf\xe9\n")
    with pytest.raises(ProjectError, match="CARD.md: not UTF-8 text") as info:
        project_metadata(load_project(root))
    assert info.value.hint is not None and "UTF-8" in info.value.hint


def test_a_licence_file_linked_from_outside_is_refused(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k")
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    (root / "LICENSE").unlink()
    os.symlink(outside, root / "LICENSE")
    with pytest.raises(ProjectError, match="symlink pointing outside the project"):
        project_metadata(load_project(root))


def test_requirements_are_the_backends_pypi_names_and_kernel_wheels(tmp_path: Path) -> None:
    from kernelwheel.builder.wheelmeta import requirements
    from kernelwheel.model.variant import Variant

    root = write_tiny_kernel(tmp_path / "k")
    text = (root / "build.toml").read_text()
    (root / "build.toml").write_text(
        text.replace(
            "[general]\n",
            '[general]\npython-depends = ["tvm-ffi"]\n'
            'kernel-depends = [{ repo-id = "org/relu", version = 1 }]\n',
            1,
        )
        + '\n[general.cuda]\npython-depends = ["nvidia-cutlass-dsl"]\n'
        'kernel-depends = [{ repo-id = "org/helper", revision = "abc" }]\n'
    )
    project = load_project(root)
    cpu = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    cuda = Variant.parse("torch214-cxx11-cu130-x86_64-linux")
    assert requirements(project, cpu) == ("apache-tvm-ffi", "relu>=1,<2")
    assert requirements(project, cuda) == (
        "apache-tvm-ffi",
        "nvidia-cutlass-dsl",
        "relu>=1,<2",
        "helper",
    )
