"""Issue 38 family 9: names. One list (data/names.toml) and one check per question for every
build kind: names refused (core packages, the standard library, test packages, Windows device
names, a wheel that requires itself) and names warned about (well-known PyPI distributions and
their import names), the same for torch, tvm-ffi and noarch kernels, to-wheel and the wheel rule
(``top_level.txt``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.tags import Tag
from support.kinds import NOARCH_BUILD_TOML, write_noarch_project, write_tvm_ffi_project
from support.tinykernel import write_tiny_kernel

from kernelwheel.cli import main
from kernelwheel.errors import ProjectError, UsageError, WheelError
from kernelwheel.model.names import name_warning, self_requirement, shadowing
from kernelwheel.model.project import kernel_name_problem, load_project
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.reader import verify_wheel


@pytest.mark.parametrize("name", ["test", "tests", "aux", "con", "nul", "prn", "com1", "lpt9"])
def test_test_packages_and_windows_device_names_are_refused(name: str) -> None:
    problem = kernel_name_problem(name)
    assert problem is not None and "would shadow" in problem[0], problem
    assert f"{name}-kernel" in problem[1]
    assert shadowing(None, name.upper()) is not None  # a folder AUX/ is as bad (case-folded)
    assert kernel_name_problem(f"{name}-kernel") is None  # only the exact name


@pytest.mark.parametrize("name", ["aux", "test"])
def test_init_refuses_them_and_writes_nothing(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["init", name, "--directory", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == UsageError.exit_code and "would shadow" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("dist", "package"),
    [("requests", "requests"), ("ninja", "ninja"), ("flash-attn", "flash_attn"), ("x", "google")],
)
def test_well_known_names_and_import_names_are_warned(dist: str, package: str) -> None:
    assert name_warning(dist, package) is not None
    assert name_warning("relu-kernel", "relu_kernel") is None


def _renamed(root: Path, old: str, new: str, ext: str = "torch-ext") -> Path:
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace(f'name = "{old}"', f'name = "{new}"'))
    folder = root / ext / old.replace("-", "_")
    folder.rename(folder.with_name(new.replace("-", "_")))
    return root


@pytest.mark.parametrize("kind", ["torch", "tvm-ffi", "noarch"])
def test_every_kind_gets_the_same_warning(kind: str, tmp_path: Path) -> None:
    if kind == "torch":
        root = _renamed(write_tiny_kernel(tmp_path / "p"), "tiny-add", "requests")
    elif kind == "tvm-ffi":
        root = _renamed(write_tvm_ffi_project(tmp_path / "p"), "add-one", "requests", "tvm-ffi-ext")
    else:
        root = _renamed(write_noarch_project(tmp_path / "p"), "scale-noarch", "requests")
    line = load_project(root).check_own_name()
    assert line is not None
    assert "'requests' is also a well-known PyPI distribution" in line
    assert "requests-kernel" in line


def test_a_kernel_that_requires_itself_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The noarch example depends on einops: named einops, its wheel would replace what it needs.
    root = write_noarch_project(tmp_path / "p", NOARCH_BUILD_TOML.replace("scale-noarch", "einops"))
    (root / "torch-ext" / "scale_noarch").rename(root / "torch-ext" / "einops")
    with pytest.raises(ProjectError, match="requirement of its own wheel"):
        load_project(root).check_own_name()
    code = main(["build", str(root), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == ProjectError.exit_code and "'einops'" in err and "einops-kernel" in err, err
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").glob("*.whl")) == []
    assert self_requirement("einops", ["torch>=2", "Einops>=0.8; python_version>'3'"])
    assert self_requirement("einops", ["torch", "not a requirement ("]) is None


def test_a_wheel_whose_top_level_claims_a_well_known_package_is_refused(tmp_path: Path) -> None:
    tag = Tag("py3", "none", "any")
    files = {"requests/__init__.py": b"STOLEN = True\n"}
    bad = write_wheel(WheelSpec("relu-kernel", "1.0.0", tag, files), tmp_path)
    with pytest.raises(WheelError, match="well-known PyPI distribution"):
        verify_wheel(bad)
    # a package of the kernel's own under another distribution name stays accepted
    own = {"relu/__init__.py": b"X = 1\n"}
    verify_wheel(write_wheel(WheelSpec("relu-kernel", "1.0.0", tag, own), tmp_path / "ok"))
