"""What a project says about itself reaches its wheels: licence (SPDX expression), licence files,
project URLs, the kernel card (rendered; else the README; else a generated card) and a section on
the wheel itself as a Markdown description."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.metadata import Metadata
from packaging.tags import Tag
from support.tinykernel import CARD, LICENSE, SOURCE, UPSTREAM, write_tiny_kernel
from support.wheelread import read_wheel

from kernelwheel.builder.wheelmeta import with_metadata
from kernelwheel.errors import ProjectError
from kernelwheel.model.card import card_fields, project_card
from kernelwheel.model.project import load_project
from kernelwheel.wheels import WheelSpec, write_wheel

VERSION = "1.0.0+torch2.13.cpu.cxx11"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
SPEC = WheelSpec(
    "tiny-add",
    "1.0.0+torch2.13.cpu.cxx11",
    Tag("cp310", "abi3", "linux_x86_64"),
    {"tiny_add/__init__.py": b""},
)


def test_the_wheel_carries_licence_files_urls_and_the_card(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k")
    (root / "COPYING.LESSER").write_text("lesser\n")
    (root / "licence-notes.md").write_text("not a licence file by its name\n")
    (root / "LICENSES").mkdir()  # a folder is not a licence file
    spec = _meta(root)
    wheel = read_wheel(write_wheel(spec, tmp_path / "wh"))
    dist_info = "tiny_add-1.0.0+torch2.13.cpu.cxx11.dist-info"
    assert wheel.files[f"{dist_info}/licenses/LICENSE"] == LICENSE.encode()
    assert wheel.files[f"{dist_info}/licenses/COPYING.LESSER"] == b"lesser\n"
    meta = Metadata.from_email(wheel.files[f"{dist_info}/METADATA"], validate=True)
    assert str(meta.license_expression) == "Apache-2.0"
    assert [str(f) for f in meta.license_files or []] == ["COPYING.LESSER", "LICENSE"]
    assert meta.project_urls == {"Upstream": UPSTREAM, "Source": SOURCE}
    assert meta.description_content_type == "text/markdown"
    assert meta.description is not None and meta.description.startswith(CARD + "\n## This wheel\n")
    assert f"`tiny-add` {VERSION}, the build for `{VARIANT}`" in meta.description
    assert "kernelwheel install tiny-add -f DIR" in meta.description
    assert f"pip install --find-links DIR 'tiny-add=={VERSION}'" in meta.description
    assert "**Import** it as `import tiny_add`." in meta.description
    assert "  - `add_one(Tensor x) -> Tensor`" in meta.description


def test_the_readme_when_there_is_no_card_and_nothing_without_either(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k", card=False)
    found = _meta(root)
    project = load_project(root)
    readme = (root / "README.md").read_text()
    assert project_card(project, card_fields(project, version=1)) == readme
    assert found.description is not None and found.description.startswith("# tiny-add (the")
    (root / "README.md").unlink()
    (root / "LICENSE").unlink()
    bare = _meta(root)
    project = load_project(root)
    assert project_card(project, card_fields(project, version=1)).startswith("---\nlibrary_name")
    assert bare.license_files == {}
    # Neither: a generated card, its front matter left to the Hub, then the wheel's section.
    assert bare.description is not None and bare.description.startswith("# tiny-add\n")
    assert "## Ops" in bare.description and "## This wheel" in bare.description


def test_a_card_template_is_rendered_into_the_description(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k")
    (root / "CARD.md").write_text(
        "---\nlicense: {{ license }}\n---\n# {{ name }}, API {{ version }}\n"
        "{% for op in ops %}* {{ op }}\n{% endfor %}"
    )
    spec = _meta(root, dirty=True)
    md = read_wheel(write_wheel(spec, tmp_path / "wh")).metadata
    body = md.get_payload()
    assert isinstance(body, str)
    assert body.startswith("# tiny-add, API 1\n* add_one(Tensor x) -> Tensor\n\n## This wheel")
    assert "uncommitted changes" in body and "license:" not in body


def _meta(root: Path, *, dirty: bool = False) -> WheelSpec:
    return with_metadata(SPEC, load_project(root), variant=VARIANT, dirty=dirty)


def test_a_licence_that_is_not_spdx_stays_free_text(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k", license="other")
    spec = _meta(root)
    md = read_wheel(write_wheel(spec, tmp_path / "wh")).metadata
    assert md["License"] == "other" and md["License-Expression"] is None


def test_a_card_that_is_not_utf8_is_refused_naming_it(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k")
    (root / "CARD.md").write_bytes(b"caf\xe9\n")
    with pytest.raises(ProjectError, match="CARD.md: not UTF-8 text") as info:
        _meta(root)
    assert info.value.hint is not None and "UTF-8" in info.value.hint


def test_a_licence_file_linked_from_outside_is_refused(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k")
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    (root / "LICENSE").unlink()
    os.symlink(outside, root / "LICENSE")
    with pytest.raises(ProjectError, match="symlink pointing outside the project"):
        _meta(root)


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
