"""metadata.json's kernels-minver as `build --hub-layout` writes it: the lowest kernels release
that loads the variant, from the rule in data/kernels_minver.toml (docs/versions.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from support.tinykernel import write_tiny_kernel

from kernelwheel.hub.export import export_card, kernel_metadata
from kernelwheel.hub.metadata import KernelMetadata, KernelsVersion
from kernelwheel.hub.minver import MinverRule, kernels_minver, load_rule
from kernelwheel.model.project import load_project
from kernelwheel.model.python_depends import load_python_depends
from kernelwheel.model.sections import KernelDependency
from kernelwheel.model.variant import Variant

PLAIN = KernelMetadata(name="k", version="1", python_depends=("einops",), backend="cuda")


@pytest.mark.parametrize(
    ("variant", "minver", "why"),
    [
        ("torch214-cxx11-cu130-x86_64-linux", "0.14.0", ("kernel-type repo",)),
        ("torch213-cxx11-cpu-x86_64-linux", "0.14.0", ("kernel-type repo",)),
        ("torch-cuda", "0.14.0", ("kernel-type repo",)),
        ("tvm-ffi01-cu130-x86_64-linux", "0.14.0", ("kernel-type repo",)),
        ("torch-stable-abi210-cu130-x86_64-linux", "0.15.1", ("variant stable-abi",)),
    ],
)
def test_each_variant_form_needs_its_release(
    variant: str, minver: str, why: tuple[str, ...]
) -> None:
    assert kernels_minver(Variant.parse(variant), PLAIN) == (KernelsVersion.parse(minver), why)


def test_kernel_depends_and_newer_python_depends_raise_it() -> None:
    cpu = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    depends = dataclasses.replace(PLAIN, kernel_depends=(KernelDependency("org/relu", 1),))
    assert kernels_minver(cpu, depends) == (
        KernelsVersion.parse("0.17.0"),
        ("metadata kernel-depends",),
    )
    helion = dataclasses.replace(PLAIN, python_depends=("einops", "helion"))
    assert kernels_minver(cpu, helion)[1] == ("python-depends helion",)
    stable = Variant.parse("torch-stable-abi210-cu130-x86_64-linux")
    assert str(kernels_minver(stable, helion)[0]) == "0.17.0"  # the highest wins


def test_a_rule_without_an_entry_is_an_error_not_a_guess() -> None:
    rule = MinverRule(KernelsVersion.parse("0.14.0"), {})
    with pytest.raises(Exception, match="no \\[layout\\] entry for 'flat'") as info:
        kernels_minver(Variant.parse("torch-cpu"), PLAIN, rule)
    assert "fix:" in str(info.value)


def test_the_rule_covers_every_python_depends_name_kernelwheel_writes() -> None:
    """export writes kernel-builder's names from recipes/python-depends.toml: each must have the
    release whose table first lists it (kernels refuses a name it does not know)."""
    rule = load_rule()
    table = load_python_depends()
    names = {
        n
        for scope in (None, "cpu", "cuda", "rocm", "xpu", "metal", "neuron")
        for n in table.names_for(scope)
    }
    assert names and all(("python-depends", n) in rule.features for n in names), names


def test_everything_the_rule_knows_loads_in_kernels_0_17_2() -> None:
    """The export must load in kernels 0.17.2, which refuses a minver above itself."""
    rule = load_rule()
    newest = KernelsVersion.parse("0.17.2")
    assert rule.floor <= newest and all(v <= newest for v in rule.features.values())
    assert str(rule.floor) == "0.14.0"


def test_the_export_writes_it_and_the_card(tmp_path: Path) -> None:
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    cpu = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    meta = kernel_metadata(project, cpu, "_tiny_add_0123", (), major=1, files={"a.py": b""})
    written = json.loads(meta.to_json())
    assert written["kernels-minver"] == "0.14.0" and written["version"] == 1
    # The kernel card (CARD.md before README.md) becomes the layout's README.md.
    card = export_card(project, tmp_path / "tree")
    assert card == tmp_path / "tree" / "README.md"
    assert card.read_text() == (tmp_path / "p" / "CARD.md").read_text()
    (tmp_path / "p" / "CARD.md").unlink()
    export_card(project, tmp_path / "tree")
    assert card.read_text() == (tmp_path / "p" / "README.md").read_text()
    # A template is rendered (tests/model/test_card.py has the fields); none: a generated card.
    template = "{{ name }} v{{ version }}{% if dirty %}, dirty{% endif %}.\n"
    (tmp_path / "p" / "CARD.md").write_text(template)
    export_card(project, tmp_path / "tree", version=2, dirty=True)
    assert card.read_text() == "tiny-add v2, dirty.\n"
    (tmp_path / "p" / "CARD.md").unlink()
    (tmp_path / "p" / "README.md").unlink()
    export_card(project, tmp_path / "tree")
    assert card.read_text().startswith("---\nlibrary_name: kernels\nlicense: apache-2.0\n")
