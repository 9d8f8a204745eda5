"""Python code that registers torch ops in a namespace of its own choosing, found before a build.

Each build gets an ops namespace of its own (``_<pkg>_<id>``), so two builds of a kernel load
into one process. Python code that registers an op under a fixed name instead
(``@torch.library.custom_op("myns::silu", ...)``, ``torch.library.define("myns::...")``,
``Library("myns", "DEF")``) breaks that: the second build to load clashes with the first.
kernel-builder refuses such packages; so does kernelwheel, naming the file, the line and the fix
(``add_op_namespace_prefix`` from the generated ``_ops``), unless the author accepts them with the
``allow-fixed-op-namespaces`` setting.

What counts (read with :mod:`ast`, nothing is imported or run):

- the torch.library functions and decorators that name an op (``custom_op``, ``triton_op``,
  ``define``, ``impl``, ``register_kernel``, ``register_fake``, ``register_autograd``,
  ``register_vmap``, ``register_torch_dispatch``), called anywhere, whose op name is a string
  literal (or a module-level constant holding one), an f-string with a literal ``ns::`` part,
  or an attribute of ``torch.ops.<ns>``; a call to ``add_op_namespace_prefix`` (or tvm-ffi's
  ``torch_add_op_namespace_prefix``) is the fix, and any other expression is left alone (it
  cannot be judged without running the code);
- ``Library("<ns>", kind)`` with a literal namespace, for every kind but ``IMPL`` of torch's own
  namespaces (``aten``, ``prims``): those add kernels to existing ops, they define none.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProjectError
from ..model.project import KernelProject

__all__ = [
    "FixedRegistration",
    "Unreadable",
    "check_registrations",
    "find_fixed_registrations",
]

# torch.library names whose first argument names an op ("ns::name").
_NAMING_CALLS = frozenset(
    {
        "custom_op",
        "triton_op",
        "define",
        "impl",
        "register_kernel",
        "register_fake",
        "register_autograd",
        "register_vmap",
        "register_torch_dispatch",
    }
)
_PREFIX_FUNCTIONS = frozenset({"add_op_namespace_prefix", "torch_add_op_namespace_prefix"})
# Library(ns, "IMPL") of these adds kernels to torch's own ops: not a namespace of the kernel's.
_TORCH_NAMESPACES = frozenset({"aten", "prims"})


@dataclass(frozen=True)
class FixedRegistration:
    """One registration under a fixed namespace: where, what and under which namespace."""

    path: Path
    line: int
    call: str  # the function called: custom_op, define, Library...
    namespace: str

    def describe(self, root: Path) -> str:
        where = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        return f"{where}:{self.line}: {self.call}(...) registers in namespace {self.namespace!r}"


@dataclass(frozen=True)
class Unreadable:
    """A Python file the check could not parse (left to the import to report)."""

    path: Path
    reason: str


def find_fixed_registrations(
    files: Iterable[Path],
) -> tuple[tuple[FixedRegistration, ...], tuple[Unreadable, ...]]:
    """Every fixed-namespace registration in ``files`` (Python sources), in file and line
    order, and the files that could not be parsed."""
    found: list[FixedRegistration] = []
    unreadable: list[Unreadable] = []
    for path in sorted(files):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, OSError) as exc:
            unreadable.append(Unreadable(path, str(exc)))
            continue
        found.extend(_in_module(path, tree))
    return tuple(found), tuple(unreadable)


def _in_module(path: Path, tree: ast.Module) -> list[FixedRegistration]:
    constants = _string_constants(tree)
    out: list[FixedRegistration] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node)
        if name == "Library":
            namespace = _library_namespace(node, constants)
        elif name in _NAMING_CALLS and node.args:
            namespace = _op_namespace(node.args[0], constants)
        else:
            continue
        if namespace is not None:
            out.append(FixedRegistration(path, node.lineno, name, namespace))
    return sorted(out, key=lambda r: r.line)


def _called_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "literal"`` assignments (so ``custom_op(OP_NAME)`` is judged)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            if isinstance(value.value, str):
                out[target.id] = value.value
    return out


def _op_namespace(arg: ast.expr, constants: dict[str, str]) -> str | None:
    """The fixed namespace an op-name argument names, or None (the prefix function, or an
    expression that cannot be judged without running it)."""
    if isinstance(arg, ast.Call) and _called_name(arg) in _PREFIX_FUNCTIONS:
        return None
    text = _literal_text(arg, constants)
    if text is not None:
        namespace, sep, _ = text.partition("::")
        return namespace if sep and namespace else None
    return _torch_ops_namespace(arg)


def _literal_text(arg: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Name):
        return constants.get(arg.id)
    if isinstance(arg, ast.JoinedStr) and arg.values:
        first = arg.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value  # f"myns::{name}": the literal part holds the namespace
    return None


def _torch_ops_namespace(arg: ast.expr) -> str | None:
    """``torch.ops.<ns>.<op>[.<overload>]`` -> ``<ns>``."""
    chain: list[str] = []
    node: ast.expr = arg
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    chain.append(node.id)
    chain.reverse()  # torch, ops, ns, op...
    if len(chain) >= 4 and chain[:2] == ["torch", "ops"]:
        return chain[2]
    return None


def _library_namespace(node: ast.Call, constants: dict[str, str]) -> str | None:
    args = list(node.args)
    keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
    ns_node = args[0] if args else keywords.get("ns")
    kind_node = args[1] if len(args) > 1 else keywords.get("kind")
    if ns_node is None:
        return None
    namespace = _literal_text(ns_node, constants)
    if not namespace or "::" in namespace:
        return None
    kind = _literal_text(kind_node, constants) if kind_node is not None else None
    if kind == "IMPL" and namespace in _TORCH_NAMESPACES:
        return None
    return namespace


def check_registrations(project: KernelProject, *, allow: bool) -> tuple[str, ...]:
    """Refuse ``project``'s fixed-namespace registrations (its package's ``.py`` files), or,
    with ``allow`` (the ``allow-fixed-op-namespaces`` setting), return one warning for each.
    Files the check cannot parse are returned as warnings too: their import will tell."""
    files = [
        p
        for p in project.package_dir.rglob("*.py")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    found, unreadable = find_fixed_registrations(files)
    root = project.root
    warnings = [f"{u.path}: not checked for op registrations ({u.reason})" for u in unreadable]
    if found and not allow:
        lines = "\n  ".join(r.describe(root) for r in found)
        raise ProjectError(
            f"Python code registers torch ops under a fixed namespace, so two builds of "
            f"{project.name} loaded in one process would clash:\n  {lines}",
            file=found[0].path,
            hint="name each op with add_op_namespace_prefix('op') from the package's _ops "
            "(from ._ops import add_op_namespace_prefix), which gives the build's own "
            "namespace; or accept them with --allow-fixed-op-namespaces "
            "([tool.kernelwheel] allow-fixed-op-namespaces = true)",
        )
    warnings += [
        f"{r.describe(root)} (accepted by allow-fixed-op-namespaces: two builds loaded "
        "together clash)"
        for r in found
    ]
    return tuple(warnings)
