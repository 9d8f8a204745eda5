"""The registration check: Python code that registers torch ops under a fixed namespace is
refused before a build (builder/registrations.py), as kernel-builder refuses it."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from support.kinds import SILU_NOARCH_TOML

from kernelwheel.builder.registrations import check_registrations, find_fixed_registrations
from kernelwheel.errors import ProjectError
from kernelwheel.model.project import load_project


def _scan(tmp_path: Path, code: str) -> list[tuple[int, str, str]]:
    path = tmp_path / "op.py"
    path.write_text(textwrap.dedent(code))
    found, unreadable = find_fixed_registrations([path], tmp_path)
    assert not unreadable
    return [(r.line, r.call, r.namespace) for r in found]


def test_literal_namespaces_are_found(tmp_path: Path) -> None:
    code = """\
        import torch
        from torch.library import Library, custom_op

        @torch.library.custom_op("myns::silu_and_mul", mutates_args=())
        def f(x): return x

        @custom_op(f"other::{'x'}", mutates_args=())
        def g(x): return x

        OP = "third::op"
        torch.library.define(OP, "(Tensor x) -> Tensor")
        lib = Library("fourth", "DEF")
        torch.library.register_fake(torch.ops.fifth.op.default)(lambda x: x)
        """
    assert _scan(tmp_path, code) == [
        (4, "custom_op", "myns"),
        (7, "custom_op", "other"),
        (11, "define", "third"),
        (12, "Library", "fourth"),
        (13, "register_fake", "fifth"),
    ]


def test_prefixed_registrations_pass(tmp_path: Path) -> None:
    code = """\
        import torch
        from ._ops import add_op_namespace_prefix, ops

        @torch.library.custom_op(add_op_namespace_prefix("silu_and_mul"), mutates_args=())
        def f(x): return x

        @f.register_fake
        def _(x): return x

        torch.library.custom_op("no_namespace_here", mutates_args=())
        torch.library.Library("aten", "IMPL")  # kernels for torch's own ops
        torch.library.custom_op(ops.add_op_namespace_prefix("y"), mutates_args=())
        """
    assert _scan(tmp_path, code) == []


def test_library_keywords_and_fragment(tmp_path: Path) -> None:
    code = """\
        from torch.library import Library
        a = Library(ns="mine", kind="FRAGMENT")
        b = Library("aten", "DEF")
        """
    assert _scan(tmp_path, code) == [(2, "Library", "mine"), (3, "Library", "aten")]


def _noarch_project(root: Path, op_py: str) -> Path:
    pkg = root / "torch-ext" / "silu_mul"
    pkg.mkdir(parents=True)
    (root / "build.toml").write_text(SILU_NOARCH_TOML)
    (pkg / "__init__.py").write_text("from .op import silu_and_mul\n")
    (pkg / "op.py").write_text(textwrap.dedent(op_py))
    return root


BAD_OP = """\
    import torch

    @torch.library.custom_op("myns::silu_and_mul", mutates_args=())
    def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
        return x
    """

GOOD_OP = """\
    import torch
    from ._ops import add_op_namespace_prefix

    @torch.library.custom_op(add_op_namespace_prefix("silu_and_mul"), mutates_args=())
    def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
        return x
    """


def test_project_with_fixed_namespace_is_refused(tmp_path: Path) -> None:
    project = load_project(_noarch_project(tmp_path, BAD_OP))
    with pytest.raises(ProjectError) as info:
        check_registrations(project, allow=False)
    text = str(info.value)
    assert "torch-ext/silu_mul/op.py:3: custom_op(...) registers in namespace 'myns'" in text
    assert "add_op_namespace_prefix" in (info.value.hint or "")
    assert "--allow-fixed-op-namespaces" in (info.value.hint or "")


def test_allowing_turns_refusals_into_warnings(tmp_path: Path) -> None:
    project = load_project(_noarch_project(tmp_path, BAD_OP))
    warnings = check_registrations(project, allow=True)
    assert len(warnings) == 1 and "'myns'" in warnings[0] and "allow-fixed" in warnings[0]


def test_prefixed_project_passes(tmp_path: Path) -> None:
    project = load_project(_noarch_project(tmp_path, GOOD_OP))
    assert check_registrations(project, allow=False) == ()


def test_unparsable_file_is_a_warning(tmp_path: Path) -> None:
    project = load_project(_noarch_project(tmp_path, "def broken(:\n"))
    (warning,) = check_registrations(project, allow=False)
    assert "op.py: not checked for op registrations" in warning


def test_build_refuses_before_any_environment(tmp_path: Path) -> None:
    """Through the CLI: exit code 3 (a project error), the file and line named."""
    from kernelwheel.cli import main

    root = _noarch_project(tmp_path / "proj", BAD_OP)
    code = main(["build", str(root), "--output-dir", str(tmp_path / "wh"), "--no-index"])
    assert code == 3
    assert not (tmp_path / "wh").exists() or not list((tmp_path / "wh").glob("*.whl"))


# huggingface/kernels' own examples, where a checkout is at hand (KERNELWHEEL_HF_KERNELS=DIR of
# the repository): the bad-registration example is refused, its good twin is not. CI has no
# checkout; docs/evidence/registration-check.log holds a run against one.
HF_KERNELS = os.environ.get("KERNELWHEEL_HF_KERNELS")


@pytest.mark.skipif(not HF_KERNELS, reason="KERNELWHEEL_HF_KERNELS names no kernels checkout")
@pytest.mark.parametrize(
    ("example", "refused"), [("silu-and-mul-bad-registration", True), ("silu-and-mul", False)]
)
def test_huggingface_examples(example: str, refused: bool) -> None:
    project = load_project(Path(str(HF_KERNELS)) / "examples" / "kernels" / example)
    if refused:
        with pytest.raises(ProjectError, match="namespace 'myns'"):
            check_registrations(project, allow=False)
    else:
        assert check_registrations(project, allow=False) == ()
