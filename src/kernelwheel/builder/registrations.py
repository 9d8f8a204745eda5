"""Python code registering torch ops under a fixed namespace (``custom_op("myns::silu")``,
``Library("myns", "DEF")``), refused before a build: a second build loaded would clash with the
first (docs/compile.md). Read through :mod:`.pyfold`; a namespace that cannot be read is a
warning, and a call named like torch.library's but not traced to it is judged only on a fixed
``ns::``."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProjectError
from ..model.project import KernelProject
from .pyfold import (
    Choice,
    DefRef,
    Dotted,
    Folded,
    Own,
    Package,
    ParsedModule,
    Ref,
    Unknown,
    ValueRef,
    display_path,
)
from .pyscope import Scope

# torch.library names whose first argument names an op ("ns::name").
_NAMING_CALLS = frozenset(
    "custom_op triton_op define impl impl_abstract register_kernel register_fake "
    "register_autograd register_autocast register_vmap register_torch_dispatch".split()
)
_LIBRARY_CALLS = frozenset({"Library", "_scoped_library"})
# The keyword that may name the op instead of the first argument (torch.library.define/impl).
_OP_KEYWORDS = ("qualname",)
# Where torch keeps them: torch.library, and torch._library's modules it re-exports.
_TORCH_PREFIXES = ("torch.library.", "torch._library.", "torch._custom_ops.")
# Library(ns, "IMPL") of these adds kernels to torch's own ops: not a namespace of the kernel's.
_TORCH_NAMESPACES = frozenset({"aten", "prims"})


@dataclass(frozen=True)
class FixedRegistration:
    path: Path
    line: int
    call: str  # the function called: custom_op, define, Library...
    namespace: str

    def describe(self, root: Path) -> str:
        where = f"{display_path(self.path, root)}:{self.line}"
        return f"{where}: {self.call}(...) registers in namespace {self.namespace!r}"


@dataclass(frozen=True)
class Unreadable:
    """A file that does not parse (its import tells), or with ``line`` and ``call`` a
    registration whose namespace could not be read."""

    path: Path
    reason: str
    line: int | None = None
    call: str | None = None

    def describe(self, root: Path) -> str:
        where = display_path(self.path, root)
        if self.line is None:
            return f"{where}: not checked for op registrations ({self.reason})"
        return (
            f"{where}:{self.line}: {self.call}(...): the namespace it registers in could not "
            f"be read, so it was not checked ({self.reason}); name the op with "
            "add_op_namespace_prefix from the package's _ops, or with a constant"
        )


def find_fixed_registrations(
    files: Iterable[Path], package_dir: Path
) -> tuple[tuple[FixedRegistration, ...], tuple[Unreadable, ...]]:
    """Every fixed-namespace registration in ``files`` in file and line order, and what could
    not be read."""
    package = Package(package_dir)
    found: list[FixedRegistration] = []
    unreadable: list[Unreadable] = []
    for path in sorted(files):
        module = package.module(path)
        if isinstance(module, Unknown):
            unreadable.append(Unreadable(path, module.reason))
            continue
        for call, scope in package.calls(path):
            try:
                verdict = _judge_call(package, module, call, scope)
            except RecursionError:  # the folding is bounded; this is the last guard
                verdict = (_called_name(call) or "call", True, Unknown("nested too deeply to read"))
            if verdict is None:
                continue
            name, known, result = verdict
            if isinstance(result, str):
                found.append(FixedRegistration(path, call.lineno, name, result))
            elif isinstance(result, Unknown) and known:
                unreadable.append(Unreadable(path, result.reason, call.lineno, name))
        package.release(path)
    return tuple(found), tuple(unreadable)


_Verdict = str | Unknown | None  # a fixed namespace, unreadable, or fine


def _judge_call(
    package: Package, module: ParsedModule, call: ast.Call, scope: Scope
) -> tuple[str, bool, _Verdict] | None:
    """The registration ``call`` makes, if any: the function, whether traced, its verdict."""
    callee = _registration_callee(package, module, call, scope)
    if callee is None:
        return None
    name, known = callee
    if name in _LIBRARY_CALLS:
        return name, known, _library_verdict(package, module, call, scope)
    op = _op_argument(call)
    if op is None:
        return None
    return name, known, _op_verdict(package.resolve(op, module, scope), package)


def _registration_callee(
    package: Package, module: ParsedModule, call: ast.Call, scope: Scope
) -> tuple[str, bool] | None:
    """The torch.library function ``call`` calls, traced (True) or only so named (False)."""
    for ref in _options(package.resolve(call.func, module, scope)):
        if isinstance(ref, Dotted) and ref.name.startswith(_TORCH_PREFIXES):
            last = ref.name.rpartition(".")[2]
            if last in _NAMING_CALLS or last in _LIBRARY_CALLS:
                return last, True
    name = _called_name(call)
    if name is not None and (name in _NAMING_CALLS or name in _LIBRARY_CALLS):
        return name, False
    return None


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _options(ref: Ref) -> list[Ref]:
    """``ref``, or each binding's referent for a name bound more than once."""
    if not isinstance(ref, Choice):
        return [ref]
    return [leaf for option in ref.options for leaf in _options(option)]


def _op_argument(call: ast.Call) -> ast.expr | None:
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    for keyword in call.keywords:
        if keyword.arg in _OP_KEYWORDS:
            return keyword.value
    return None


def _op_verdict(ref: Ref, package: Package) -> _Verdict:
    """The fixed namespace an op argument names, None for the build's own (or none), or why
    it cannot be read."""
    if isinstance(ref, Choice):
        return _worst(_op_verdict(option, package) for option in ref.options)
    if isinstance(ref, (Own, DefRef)):
        return None  # from _ops, or a custom op of the package (judged where it is defined)
    if isinstance(ref, Dotted):
        parts = ref.name.split(".")
        if len(parts) >= 4 and parts[:2] == ["torch", "ops"]:
            return parts[2]
        return Unknown(f"`{ref.name}` is not a constant of the package")
    if (
        isinstance(ref, ValueRef)
        and isinstance(ref.node, ast.Call)
        and _registration_callee(package, ref.module, ref.node, ref.scope) is not None
    ):
        return None  # an op made by a registration call, judged at that call
    return _namespace_of(package.fold_ref(ref, 0))


def _namespace_of(folded: Folded) -> _Verdict:
    head: list[str | Own | Unknown] = []
    for part in folded.parts:
        if isinstance(part, str) and "::" in part:
            head.append(part.partition("::")[0])
            return _text_or_own(head)
        head.append(part)
    return _first_unknown(head)  # no "::" at all: no namespace, unless an unknown part holds one


def _text_or_own(parts: list[str | Own | Unknown]) -> _Verdict:
    unknown = _first_unknown(parts)
    if unknown is not None:
        return unknown
    if any(isinstance(p, Own) for p in parts):
        return None
    text = "".join(p for p in parts if isinstance(p, str))
    return text or None


def _first_unknown(parts: Iterable[object]) -> Unknown | None:
    return next((p for p in parts if isinstance(p, Unknown)), None)


def _worst(verdicts: Iterable[_Verdict]) -> _Verdict:
    """Of several possible values: a fixed namespace first, then an unreadable one."""
    listed = list(verdicts)
    return next((v for v in listed if isinstance(v, str)), None) or _first_unknown(listed)


def _library_verdict(
    package: Package, module: ParsedModule, call: ast.Call, scope: Scope
) -> _Verdict:
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    ns_node = call.args[0] if call.args else keywords.get("ns")
    kind_node = call.args[1] if len(call.args) > 1 else keywords.get("kind")
    if ns_node is None or isinstance(ns_node, ast.Starred):
        return None
    ref = package.resolve(ns_node, module, scope)
    verdict = _worst(_library_namespace(package.fold_ref(r, 0)) for r in _options(ref))
    if isinstance(verdict, str) and verdict in _TORCH_NAMESPACES and kind_node is not None:
        if package.fold(kind_node, module, scope).text == "IMPL":
            return None
    return verdict


def _library_namespace(folded: Folded) -> _Verdict:
    if folded.text is not None and "::" in folded.text:
        return None
    return _text_or_own(list(folded.parts))


def check_registrations(project: KernelProject, *, allow: bool) -> tuple[str, ...]:
    """Refuse ``project``'s fixed-namespace registrations, or with ``allow`` warn of each; the
    unreadable are warnings too."""
    files = [
        p for p in project.package_dir.rglob("*.py") if p.is_file() and "__pycache__" not in p.parts
    ]
    found, unreadable = find_fixed_registrations(files, project.package_dir)
    root = project.root
    warnings = [u.describe(root) for u in unreadable]
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
