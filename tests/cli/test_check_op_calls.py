"""``kernelwheel check WHEEL`` and a call in the package's Python of an op its binding does not
define (renamed or removed): only ``build``, ``dev`` and ``test``, which hold the build's op list,
warned of it; ``check`` of the finished wheel passed it, and every call raised AttributeError in
the user's code. The wheel's own extension is read, never imported: its ``ops.def`` schemas
and op names are among its strings."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag
from support.sofiles import build_extension

from kernelwheel.builder.load_check import wheel_call_warnings
from kernelwheel.cli import main
from kernelwheel.errors import AbiError
from kernelwheel.wheels import WheelSpec, write_wheel

NS = "_demo_0a1b2c3d"
# What a binding's registrations leave among the object's bytes: schemas (an overload's too),
# an op defined by name alone (ops.def("scale", &scale)), and a schema as gcc copies it into a
# std::string, with no NUL of its own, packed against the tail of another (seen in kx's wheel)
STRINGS = (
    "add_one(Tensor x) -> Tensor",
    "split_pm.out(Tensor x, *, Tensor(a!) y) -> ()",
    "scale",
    "out) -> Tensmixed(Tensor x, int[] dims) -> Tensor",
)
CALLS = """\
from ._ops import ops


def add_one(x):
    return ops.add_one(x)


def split(x, y):
    ops.split_pm.out(x, y=y)
    return ops.scale(ops.split2(ops.mixed(x, [0])))
"""


def _wheel(tmp_path: Path, init: str, *, extension: bool = True) -> Path:
    constants = " ".join(
        f'PyModule_AddStringConstant(m, "S{i}", "{s}");' for i, s in enumerate(STRINGS)
    )
    files = {
        "demo/__init__.py": init.encode(),
        "demo/_ops.py": f"import torch\nfrom . import {NS}\nops = torch.ops.{NS}\n".encode(),
    }
    if extension:
        files[f"demo/{NS}.abi3.so"] = build_extension(tmp_path, NS, code=("", constants))
    spec = WheelSpec(
        name="demo",
        version="1.0+torch2.14.cpu.cxx11",
        tag=Tag("cp39", "abi3", "manylinux_2_28_x86_64"),
        files=files,
    )
    return write_wheel(spec, tmp_path)


WARNING = (
    "warning: the package calls ops.split2 (demo/__init__.py:10), which no ops.def of the "
    "wheel's extension defines (no string of it names the op): each such call raises "
    "AttributeError (a registration naming it with add_op_namespace_prefix fails the "
    "package's import); rename the call or define the op"
)


def test_check_warns_of_a_call_of_an_op_the_wheels_binding_does_not_define(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path, CALLS)
    assert wheel_call_warnings(wheel) == (WARNING,)
    assert main(["check", str(wheel)]) == 0  # a warning: the wheel complies
    out = capsys.readouterr().out
    assert f"  ! {WARNING}" in out.splitlines()
    assert out.index(WARNING) < out.index("complies")  # inside the wheel's report
    assert main(["check", "--json", str(wheel)]) == 0
    (report,) = json.loads(capsys.readouterr().out)["reports"]
    assert report["warnings"] == [WARNING]


def test_a_wheel_whose_calls_are_all_defined_or_whose_ops_are_pythons_gets_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fine = CALLS.replace("ops.split2(", "(")
    assert wheel_call_warnings(_wheel(tmp_path / "a", fine)) == ()
    # no shared object (noarch: ops the package's Python defines): nothing to compare with
    noarch = _wheel(tmp_path / "b", CALLS, extension=False)
    assert wheel_call_warnings(noarch) == ()
    assert main(["check", "--json", str(noarch)]) == 0
    assert json.loads(capsys.readouterr().out)["reports"][0]["warnings"] == []


# an op the package's Python defines beside its extension's, and a function's own ``ops``
HYBRID = """\
import torch

from ._ops import add_op_namespace_prefix, ops
from .triton_ops import fused


@torch.library.custom_op(add_op_namespace_prefix("py_scale"), mutates_args=())
def _py_scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def scale(x):
    return ops.py_scale(ops.fused_rms(x))


def pipeline(x, ops=None):
    return ops.count(x)


def chain(x):
    ops = [torch.relu]
    ops.append(torch.tanh)
    return ops.index(torch.relu)
"""
TRITON_OPS = """\
import torch

torch.library.define("_demo_0a1b2c3d::fused_rms", "(Tensor x) -> Tensor")
"""


def test_ops_the_packages_python_defines_and_a_local_named_ops_are_no_undefined_calls(
    tmp_path: Path,
) -> None:
    assert wheel_call_warnings(_hybrid(tmp_path / "h")) == ()
    warned = wheel_call_warnings(_hybrid(tmp_path / "u", extra="\nops.undefined_op(1)\n"))
    assert len(warned) == 1 and "ops.undefined_op (demo/__init__.py:" in warned[0]


def _hybrid(tmp_path: Path, extra: str = "") -> Path:
    wheel = _wheel(tmp_path, HYBRID + extra)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("demo/triton_ops.py", TRITON_OPS)
    return wheel


def test_a_member_that_cannot_be_decompressed_is_the_record_rules_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import zipfile

    wheel = _wheel(tmp_path, CALLS)
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("demo/__init__.py")
    data = bytearray(wheel.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + len(info.extra) + 5] ^= 0xFF
    wheel.write_bytes(bytes(data))
    assert main(["check", str(wheel)]) == AbiError.exit_code  # a violation, not a crash
    out = capsys.readouterr().out
    assert "demo/__init__.py: cannot be decompressed" in out
    assert wheel_call_warnings(wheel) == ()  # the file it cannot read is not guessed at


def test_checks_help_says_it_warns_of_such_calls(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "of an op its extension does not define (renamed or removed) is warned of" in said


def test_calls_through_an_alias_or_getattr_are_scanned_too(tmp_path: Path) -> None:
    # `from ._ops import ops as _kernels` and getattr(ops, "name"): their undefined ops were
    # passed over (the file was not scanned at all, or the call not seen)
    aliased = (
        "from ._ops import ops as kern\nfrom ._ops import ops\n\n"
        "def f(x):\n    return kern.add_one(kern.gone_alias(x))\n\n"
        "def g(x):\n    return getattr(ops, 'gone_getattr')(getattr(ops, 'scale')(x))\n\n"
        "def h(x):\n    return getattr(ops, 'maybe', None) or getattr(kern, 'split_pm')\n"
    )
    (warning,) = wheel_call_warnings(_wheel(tmp_path, aliased))
    assert "ops.gone_alias (demo/__init__.py:5), ops.gone_getattr (demo/__init__.py:8)," in warning
    assert "maybe" not in warning and "scale" not in warning and "split_pm" not in warning


def test_a_kernel_project_folder_given_to_check_is_told_where_its_wheels_come_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `kernelwheel check .` in kernels-community relu after `kernelwheel test`: "is a folder,
    # not a wheel or shared object", fix "pass the files in it, e.g. 'kernelwheel check
    # wheelhouse/*.whl'", and the project has no wheelhouse/ (dev and test write no wheel)
    project = tmp_path / "relu"
    project.mkdir()
    (project / "build.toml").write_text('[general]\nname = "relu"\n')
    assert main(["check", str(project)]) == 2
    err = capsys.readouterr().err
    assert f"{project}: is a kernel project (build.toml), not a wheel or shared object" in err
    assert (
        f"'kernelwheel build' run in {project} writes its wheel to {project / 'wheelhouse'}" in err
    )
    (project / "wheelhouse").mkdir()
    (project / "wheelhouse" / "relu-1.0.0-py3-none-any.whl").write_bytes(b"")
    assert main(["check", str(project)]) == 2
    assert f"'kernelwheel check {project / 'wheelhouse'}/*.whl'" in capsys.readouterr().err
    plain = tmp_path / "plain"
    plain.mkdir()  # any other folder: as before
    assert main(["check", str(plain)]) == 2
    assert "is a folder, not a wheel or shared object" in capsys.readouterr().err
