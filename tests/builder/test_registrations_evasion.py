"""Issue 38, family 7: the registration check is not evaded by ordinary code (an alias, an
assignment, a constant expression, a sibling module's constant, ``_scoped_library``); a namespace
it cannot read is named call by call; hostile files give a message, never a traceback.

Every case is a package written by the test and read by ``find_fixed_registrations``, as the
build reads a kernel's ``torch-ext/<pkg>/`` folder."""

from __future__ import annotations

import codecs
import os
import textwrap
import time
from pathlib import Path

import pytest
from support.kinds import SILU_NOARCH_TOML

from kernelwheel.builder.registrations import (
    Unreadable,
    check_registrations,
    find_fixed_registrations,
)
from kernelwheel.model.project import load_project

PKG = "silu_mul"


def _package(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    pkg = tmp_path / PKG
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text))
    return pkg


def _read(
    tmp_path: Path, files: dict[str, str | bytes]
) -> tuple[list[tuple[str, int, str, str]], list[Unreadable]]:
    pkg = _package(tmp_path, files)
    found, unreadable = find_fixed_registrations(sorted(pkg.rglob("*.py")), pkg)
    return [(r.path.name, r.line, r.call, r.namespace) for r in found], list(unreadable)


def _fixed(tmp_path: Path, code: str, **siblings: str) -> list[tuple[int, str, str]]:
    files: dict[str, str | bytes] = {"op.py": code}
    files.update({f"{name}.py": text for name, text in siblings.items()})
    found, unreadable = _read(tmp_path, files)
    assert not unreadable, unreadable
    return [(line, call, ns) for name, line, call, ns in found if name == "op.py"]


# --- every evasion form is caught ------------------------------------------------------------

EVASIONS: dict[str, tuple[str, dict[str, str], str]] = {
    # name: (op.py, sibling modules, the call the check names)
    "from-import alias": (
        """\
        from torch.library import custom_op as co
        @co("myns::silu", mutates_args=())
        def silu(x): return x
        """,
        {},
        "custom_op",
    ),
    "module alias": (
        """\
        import torch.library as tl
        tl.define("myns::silu(Tensor x) -> Tensor")
        """,
        {},
        "define",
    ),
    "from torch import library": (
        """\
        from torch import library as L
        L.Library("myns", "DEF")
        """,
        {},
        "Library",
    ),
    "assigned class": (
        """\
        import torch
        lib = torch.library.Library
        lib("myns", "FRAGMENT")
        """,
        {},
        "Library",
    ),
    "assigned function": (
        """\
        from torch.library import custom_op
        op = custom_op
        op("myns::silu", mutates_args=())(lambda x: x)
        """,
        {},
        "custom_op",
    ),
    "function-local alias": (
        """\
        import torch
        def setup(fn):
            reg = torch.library.register_fake
            reg("myns::silu")(fn)
        """,
        {},
        "register_fake",
    ),
    "function-local constant": (
        """\
        import torch
        def setup():
            ns = "myns"
            torch.library.define(f"{ns}::silu(Tensor x) -> Tensor")
        """,
        {},
        "define",
    ),
    "try/except alias": (
        """\
        try:
            from torch.library import register_fake as rf
        except ImportError:
            from torch.library import impl_abstract as rf
        rf("myns::silu")(lambda x: x)
        """,
        {},
        "register_fake",
    ),
    "f-string of a constant": (
        """\
        import torch
        NS = "myns"
        torch.library.custom_op(f"{NS}::silu", mutates_args=())
        """,
        {},
        "custom_op",
    ),
    "concatenation": (
        """\
        import torch
        torch.library.custom_op("my" + "ns::silu", mutates_args=())
        """,
        {},
        "custom_op",
    ),
    "str.format": (
        """\
        import torch
        NS = "myns"
        torch.library.custom_op("{}::silu".format(NS), mutates_args=())
        """,
        {},
        "custom_op",
    ),
    "str.format by name": (
        """\
        import torch
        torch.library.custom_op("{ns}::{op}".format(ns="myns", op="silu"), mutates_args=())
        """,
        {},
        "custom_op",
    ),
    "percent": (
        """\
        import torch
        NS = "myns"
        torch.library.custom_op("%s::silu" % NS, mutates_args=())
        """,
        {},
        "custom_op",
    ),
    "percent tuple": (
        """\
        import torch
        NS: str = "myns"
        torch.library.custom_op("%s::%s" % (NS, "silu"), mutates_args=())
        """,
        {},
        "custom_op",
    ),
    "join of a list": (
        """\
        import torch
        NS = "myns"
        torch.library.custom_op("::".join([NS, "silu"]), mutates_args=())
        """,
        {},
        "custom_op",
    ),
    "join of a tuple": (
        """\
        import torch
        torch.library.define("::".join(("myns", "silu(Tensor x) -> Tensor")))
        """,
        {},
        "define",
    ),
    "sibling constant": (
        """\
        import torch
        from ._consts import NS
        torch.library.Library(NS, "DEF")
        """,
        {"_consts": 'NS = "myns"\n'},
        "Library",
    ),
    "sibling module attribute": (
        """\
        import torch
        from . import consts
        torch.library.custom_op(f"{consts.NS}::silu", mutates_args=())
        """,
        {"consts": 'NS = "myns"\n'},
        "custom_op",
    ),
    "sibling star import": (
        """\
        import torch
        from .consts import *
        torch.library.custom_op(NS + "::silu", mutates_args=())
        """,
        {"consts": 'NS = "myns"\n'},
        "custom_op",
    ),
    "sibling by absolute import": (
        f"""\
        import torch
        from {PKG}.consts import NS
        torch.library.custom_op(NS + "::silu", mutates_args=())
        """,
        {"consts": 'NS = "myns"\n'},
        "custom_op",
    ),
    "sibling constant made of another's": (
        """\
        import torch
        from .consts import QUALNAME
        torch.library.custom_op(QUALNAME, mutates_args=())
        """,
        {
            "consts": 'from ._base import BASE\nQUALNAME = BASE + "ns::silu"\n',
            "_base": 'BASE = "my"\n',
        },
        "custom_op",
    ),
    "sibling alias": (
        """\
        from ._lib import co
        co("myns::silu", mutates_args=())(lambda x: x)
        """,
        {"_lib": "from torch.library import custom_op as co\n"},
        "custom_op",
    ),
    "_scoped_library": (
        """\
        import torch
        with torch.library._scoped_library("myns", "DEF") as lib:
            lib.define("silu(Tensor x) -> Tensor")
        """,
        {},
        "_scoped_library",
    ),
    "torch.ops by getattr": (
        """\
        import torch
        NS = "myns"
        torch.library.register_fake(getattr(torch.ops, NS).silu.default)(lambda x: x)
        """,
        {},
        "register_fake",
    ),
    "torch.ops through an alias": (
        """\
        import torch
        o = torch.ops
        torch.library.register_kernel(o.myns.silu, "cpu")(lambda x: x)
        """,
        {},
        "register_kernel",
    ),
    "a helper of the package": (
        """\
        import torch
        from .names import qualname
        torch.library.custom_op(qualname("silu"), mutates_args=())
        """,
        {"names": 'def qualname(op):\n    return f"myns::{op}"\n'},
        "custom_op",
    ),
    "a keyword qualname": (
        """\
        import torch
        torch.library.define(qualname="myns::silu", schema="(Tensor x) -> Tensor")
        """,
        {},
        "define",
    ),
}


@pytest.mark.parametrize("form", list(EVASIONS))
def test_every_evasion_form_is_caught(tmp_path: Path, form: str) -> None:
    code, siblings, call = EVASIONS[form]
    found = _fixed(tmp_path, code, **siblings)
    assert [(c, ns) for _, c, ns in found] == [(call, "myns")], found


def test_the_refusal_names_the_file_and_line_of_an_evasion(tmp_path: Path) -> None:
    """Through check_registrations, as the build runs it: refused (exit 3's ProjectError)."""
    from kernelwheel.errors import ProjectError

    root = _project(tmp_path, EVASIONS["from-import alias"][0])
    with pytest.raises(ProjectError) as info:
        check_registrations(load_project(root), allow=False)
    assert f"torch-ext/{PKG}/op.py:2: custom_op(...) registers in namespace 'myns'" in str(
        info.value
    )
    warnings = check_registrations(load_project(root), allow=True)
    assert len(warnings) == 1 and "allow-fixed-op-namespaces" in warnings[0]


# --- what is legitimate still passes, silently ------------------------------------------------

LEGITIMATE = """\
    import torch
    from torch.library import Library, custom_op, register_fake
    from ._ops import add_op_namespace_prefix, ops
    from ._ops import add_op_namespace_prefix as prefix
    from . import _ops
    from .quack import qualified

    @custom_op(add_op_namespace_prefix("silu"), mutates_args=())
    def silu(x: torch.Tensor) -> torch.Tensor:
        return x

    register_fake(silu)(lambda x: x)  # the op defined above: judged there
    silu.register_autograd(lambda ctx, g: g, setup_context=lambda ctx, i, o: None)
    torch.library.custom_op(prefix("a"), mutates_args=())
    torch.library.custom_op(_ops.add_op_namespace_prefix("b"), mutates_args=())
    torch.library.register_fake(ops.silu.default)(lambda x: x)
    torch.library.register_fake(f"{ops.name}::silu")(lambda x: x)
    torch.library.custom_op(qualified("c"), mutates_args=())
    lib = Library(ops.__name__.split(".")[-1], "FRAGMENT")
    lib.define("mul(Tensor x) -> Tensor")
    lib.impl("mul", lambda x: x, "CPU")
    Library("aten", "IMPL")
    torch.library._scoped_library("prims", "IMPL")
    made = torch.library.custom_op(add_op_namespace_prefix("d"), lambda x: x, mutates_args=())
    torch.library.register_fake(made)(lambda x: x)
    torch.library.custom_op("no_namespace", mutates_args=())
    """

# sonic-moe's wrapper (kernels-community): a function of the package around the generated one.
QUACK = """\
    from ._ops import add_op_namespace_prefix as _add_op_namespace_prefix

    def qualified(name: str) -> str:
        return _add_op_namespace_prefix(f"quack__{name}")
    """


def test_the_builds_own_namespace_passes_silently(tmp_path: Path) -> None:
    found, unreadable = _read(tmp_path, {"op.py": LEGITIMATE, "quack.py": QUACK})
    assert found == [] and unreadable == []


def test_tvm_ffi_prefix_and_a_prefixed_package_project_pass(tmp_path: Path) -> None:
    code = """\
        import torch
        from ._ops import torch_add_op_namespace_prefix
        torch.library.custom_op(torch_add_op_namespace_prefix("silu"), mutates_args=())
        """
    assert _fixed(tmp_path, code) == []
    root = _project(tmp_path / "p", LEGITIMATE, quack=QUACK)
    assert check_registrations(load_project(root), allow=False) == ()


# --- what cannot be read is said, call by call -------------------------------------------------

UNREADABLE: dict[str, tuple[str, dict[str, str], str]] = {
    "a parameter": (
        """\
        import torch
        def register(name):
            torch.library.define(name, "(Tensor x) -> Tensor")
        """,
        {},
        "`name` is a parameter",
    ),
    "a value from the environment": (
        """\
        import os
        import torch
        NS = os.environ["NS"]
        torch.library.Library(NS, "DEF")
        """,
        {},
        "os.environ",
    ),
    "bound twice, differently": (
        """\
        import torch
        NS = "a"
        if torch.cuda.is_available():
            NS = "b"
        torch.library.custom_op(f"{NS}::silu", mutates_args=())
        """,
        {},
        "`NS` is bound more than once",
    ),
    "a function from outside": (
        """\
        from torch.library import custom_op
        from naming import make
        custom_op(make("silu"), mutates_args=())
        """,
        {},
        "the result of calling `make`",
    ),
    "a loop variable": (
        """\
        import torch
        for ns in ("a", "b"):
            torch.library.Library(ns, "DEF")
        """,
        {},
        "`ns` is a loop variable",
    ),
    "a missing sibling": (
        """\
        import torch
        from .gone import NS
        torch.library.Library(NS, "DEF")
        """,
        {},
        "no module `gone`",
    ),
    "an import cycle": (
        """\
        import torch
        from .a import NS
        torch.library.Library(NS, "DEF")
        """,
        {"a": "from .b import NS\n", "b": "from .a import NS\n"},
        "defined in terms of itself",
    ),
    "a relative import out of the package": (
        """\
        import torch
        from ..outside import NS
        torch.library.Library(NS, "DEF")
        """,
        {},
        "lies outside the package",
    ),
}


@pytest.mark.parametrize("form", list(UNREADABLE))
def test_a_namespace_that_cannot_be_read_is_named(tmp_path: Path, form: str) -> None:
    code, siblings, reason = UNREADABLE[form]
    files: dict[str, str | bytes] = {"op.py": code}
    files.update({f"{name}.py": text for name, text in siblings.items()})
    found, unreadable = _read(tmp_path, files)
    assert found == []
    (entry,) = [u for u in unreadable if u.path.name == "op.py"]
    assert entry.line is not None and entry.call is not None
    assert reason in entry.reason


def test_an_unreadable_call_is_a_warning_with_file_and_line(tmp_path: Path) -> None:
    """As a file the check cannot parse: a warning (the build goes on), allow or not."""
    root = _project(tmp_path, UNREADABLE["a parameter"][0])
    for allow in (False, True):
        (warning,) = check_registrations(load_project(root), allow=allow)
        assert warning.startswith(f"torch-ext/{PKG}/op.py:3: define(...): the namespace")
        assert "`name` is a parameter" in warning and "add_op_namespace_prefix" in warning


# --- hostile files: a message naming the file, never a traceback ------------------------------


def test_a_file_in_another_encoding_is_read_as_python_reads_it(tmp_path: Path) -> None:
    """A PEP 263 cookie is honoured (the registration in it is caught); a file Python cannot
    decode either (UTF-16, an unknown codec, Latin-1 without a cookie) is named, unchecked."""
    latin1 = (
        '# -*- coding: latin-1 -*-\nimport torch\n# café\ntorch.library.Library("myns", "DEF")\n'
    )
    files: dict[str, str | bytes] = {
        "latin1.py": latin1.encode("latin-1"),
        "utf16.py": codecs.BOM_UTF16_LE + "import torch\n".encode("utf-16-le"),
        "cookie.py": b"# coding: no-such-codec\nx = 1\n",
        "nocookie.py": b"x = 'caf\xe9'\n",
    }
    found, unreadable = _read(tmp_path, files)
    assert found == [("latin1.py", 4, "Library", "myns")]
    by_name = {u.path.name: u for u in unreadable}
    assert sorted(by_name) == ["cookie.py", "nocookie.py", "utf16.py"]
    assert all(u.line is None for u in unreadable)
    assert "no-such-codec" in by_name["cookie.py"].reason


DEEP = {
    "parentheses": "x = " + "(" * 300 + "1" + ")" * 300 + "\n",  # SyntaxError
    "unary minus": "x = " + "-" * 100_000 + "1\n",  # MemoryError from the parser
    "a long sum": "x = " + " + ".join(["'a'"] * 200_000) + "\n",  # RecursionError
}


@pytest.mark.parametrize("shape", list(DEEP))
def test_a_file_nested_deeper_than_the_parser_is_named(tmp_path: Path, shape: str) -> None:
    root = _project(tmp_path, DEEP[shape])
    (warning,) = check_registrations(load_project(root), allow=False)
    assert warning.startswith(f"torch-ext/{PKG}/op.py: not checked for op registrations")


def test_deep_folding_is_bounded_and_named(tmp_path: Path) -> None:
    """What parses but is deeper than the check follows (a 400-term sum, a chain of 3000 names,
    a name that doubles 25 times) ends as an unreadable call, quickly, without a RecursionError."""
    chain = "\n".join(f"A{i} = A{i - 1}" for i in range(1, 3000))
    doubling = "\n".join(f"D{i} = D{i - 1} + D{i - 1}" for i in range(1, 26))
    code = (
        "import torch\n"
        f"torch.library.Library({' + '.join(['chr'] * 400)}, 'DEF')\n"
        f"A0 = 'myns'\n{chain}\ntorch.library.Library(A2999, 'DEF')\n"
        f"D0 = 'my'\n{doubling}\ntorch.library.Library(D25 + 'ns', 'DEF')\n"
    )
    started = time.monotonic()
    found, unreadable = _read(tmp_path, {"op.py": code})
    assert time.monotonic() - started < 30
    assert found == []
    reasons = [u.reason for u in unreadable]
    assert len(reasons) == 3
    assert "nested too deeply to read" in reasons[0]
    assert "nested too deeply to read" in reasons[1]
    assert "too long" in reasons[2]


def test_a_fifo_named_like_a_sibling_is_not_opened(tmp_path: Path) -> None:
    root = _project(tmp_path, UNREADABLE["a missing sibling"][0])
    os.mkfifo(root / "torch-ext" / PKG / "gone.py")
    (warning,) = check_registrations(load_project(root), allow=False)
    assert "op.py:3: Library(...)" in warning


def test_the_build_reports_hostile_files_and_refuses_the_evasion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI: the deep file, which this Python cannot compile (so neither import),
    refused first (exit 6), then, without it, exit 3 for the alias; no traceback."""
    from kernelwheel.cli import main

    root = _project(tmp_path / "proj", EVASIONS["from-import alias"][0], deep=DEEP["a long sum"])
    args = ["build", str(root), "--output-dir", str(tmp_path / "wh"), "--no-index"]
    assert main(args) == 6
    out = capsys.readouterr()
    assert f"torch-ext/{PKG}/deep.py: nested too deeply for this Python's parser" in out.err
    assert "Traceback" not in out.out + out.err
    (root / "torch-ext" / PKG / "deep.py").unlink()
    assert main(args) == 3
    out = capsys.readouterr()
    text = out.out + out.err
    assert "op.py:2: custom_op(...) registers in namespace 'myns'" in text
    assert "Traceback" not in text


def _project(root: Path, op_py: str, **siblings: str) -> Path:
    pkg = root / "torch-ext" / PKG
    pkg.mkdir(parents=True)
    (root / "build.toml").write_text(SILU_NOARCH_TOML)
    (pkg / "__init__.py").write_text("from .op import *\n")
    (pkg / "op.py").write_text(textwrap.dedent(op_py))
    for name, text in siblings.items():
        (pkg / f"{name}.py").write_text(textwrap.dedent(text))
    return root
