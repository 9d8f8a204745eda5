"""The names one Python module binds, scope by scope (imports, ``NAME = expr``, defs, and the
bindings whose value cannot be read), and its calls with their scopes: one pass over the tree
with its own stack, so nesting deeper than Python's recursion limit is read like any other."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Assigned:
    """``NAME = value`` (or ``NAME: T = value``), ``value`` read in ``scope``."""

    value: ast.expr
    scope: Scope


@dataclass(frozen=True)
class Imported:
    """``import module`` (``name`` None) or ``from <level dots>module import name``."""

    module: str
    name: str | None
    level: int


@dataclass(frozen=True)
class Defined:
    """A ``def`` or ``class``: its name and a function's scope (the rest of its tree not kept)."""

    name: str
    scope: Scope | None


@dataclass(frozen=True)
class Opaque:
    """A binding whose value cannot be read without running the code."""

    reason: str


Binding = Assigned | Imported | Defined | Opaque


@dataclass(eq=False)
class Scope:
    parent: Scope | None
    is_class: bool = False
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    star_imports: list[tuple[str, int]] = field(default_factory=list)
    returns: list[ast.expr | None] = field(default_factory=list)
    declared_global: set[str] = field(default_factory=set)

    def bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)

    def lookup(self, name: str) -> list[Binding] | None:
        """The bindings ``name`` refers to from here (a class body's names are not seen from
        its functions), or None."""
        if name in self.bindings:
            return self.bindings[name]
        scope = self.parent
        while scope is not None and (scope.is_class or name not in scope.bindings):
            scope = scope.parent
        return scope.bindings[name] if scope is not None else None


@dataclass(frozen=True)
class ModuleScopes:
    """A module's scope and its calls in source order; the scopes keep only the expressions
    assigned and returned, not the whole tree."""

    module: Scope
    calls: tuple[tuple[ast.Call, Scope], ...]
    functions: tuple[Scope, ...]  # outer functions before the ones nested in them


def read_scopes(tree: ast.Module) -> ModuleScopes:
    walker = _Walker(Scope(parent=None))
    walker.walk(tree)
    return walker.result()


class _Walker:
    """A stack of segments, each a scope and the nodes still to read in it; a node that binds
    nothing and opens no scope (most) only adds its children (no object made per node)."""

    def __init__(self, module: Scope) -> None:
        self.module = module
        self.segments: list[tuple[Scope, list[ast.AST]]] = []
        self.functions: list[Scope] = []
        self.calls: list[tuple[ast.Call, Scope]] = []
        comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
        self.handlers: dict[type, Callable[[Any, Scope], None]] = {
            **dict.fromkeys((ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda), self._function),
            ast.ClassDef: self._class,
            **dict.fromkeys(comprehensions, self._comprehension),
            ast.Call: self._call,
            **dict.fromkeys((*_STATEMENTS, *_OPAQUE), self._statement),
        }

    def walk(self, tree: ast.Module) -> None:
        segments = self.segments
        segments.append((self.module, [tree]))
        handlers = self.handlers
        while segments:
            scope, pending = segments[-1]
            if not pending:
                segments.pop()
                continue
            node = pending.pop()
            handler = handlers.get(type(node))
            if handler is not None:
                handler(node, scope)
            else:
                _add_children(node, pending)

    def result(self) -> ModuleScopes:
        for function in self.functions:
            _hoist_globals(function, self.module)
        calls = sorted(self.calls, key=lambda item: (item[0].lineno, item[0].col_offset))
        return ModuleScopes(self.module, tuple(calls), tuple(self.functions))

    def _children(self, node: ast.AST, scope: Scope) -> None:
        self._push(scope, ())
        _add_children(node, self.segments[-1][1])

    def _push(self, scope: Scope, nodes: Iterable[ast.AST | None]) -> None:
        """Read ``nodes`` in ``scope`` (in a segment of their own unless the top one is it)."""
        if self.segments and self.segments[-1][0] is scope:
            pending = self.segments[-1][1]
        else:
            pending = []
            self.segments.append((scope, pending))
        pending.extend(n for n in reversed(list(nodes)) if n is not None)

    def _call(self, node: ast.Call, scope: Scope) -> None:
        self.calls.append((node, scope))
        self._children(node, scope)

    def _statement(self, node: ast.AST, scope: Scope) -> None:
        _bind_statement(node, scope)
        self._children(node, scope)

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: Scope
    ) -> None:
        inner = Scope(parent=scope)
        self.functions.append(inner)
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                inner.bind(arg.arg, Opaque(f"`{arg.arg}` is a parameter"))
        self._push(scope, (*args.defaults, *args.kw_defaults))
        if isinstance(node, ast.Lambda):
            inner.returns.append(node.body)
            self._push(inner, (node.body,))
            return
        scope.bind(node.name, Defined(node.name, inner))
        self._push(scope, node.decorator_list)
        self._push(inner, node.body)

    def _class(self, node: ast.ClassDef, scope: Scope) -> None:
        scope.bind(node.name, Defined(node.name, None))
        self._push(scope, (*node.decorator_list, *node.bases, *node.keywords))
        self._push(Scope(parent=scope, is_class=True), node.body)

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp, scope: Scope
    ) -> None:
        inner = Scope(parent=scope)
        for index, generator in enumerate(node.generators):
            for name in _names(generator.target):
                inner.bind(name, Opaque(f"`{name}` is a loop variable"))
            self._push(scope if index == 0 else inner, (generator.iter,))
            self._push(inner, (generator.target, *generator.ifs))
        if isinstance(node, ast.DictComp):
            self._push(inner, (node.key, node.value))
        else:
            self._push(inner, (node.elt,))


_LOOP = "`{name}` is a loop variable"
_BOUND_BY = "`{name}` is bound by with, except, := or del"
_MATCHED = "`{name}` is bound by a match pattern"
# The other statements that bind names whose value cannot be read: why, and those names.
_OPAQUE: dict[type, tuple[str, Callable[[Any], list[str]]]] = {
    ast.AugAssign: ("`{name}` is changed in place", lambda node: _names(node.target)),
    ast.For: (_LOOP, lambda node: _names(node.target)),
    ast.AsyncFor: (_LOOP, lambda node: _names(node.target)),
    ast.NamedExpr: (_BOUND_BY, lambda node: _names(node.target)),
    ast.withitem: (_BOUND_BY, lambda node: _names(node.optional_vars)),
    ast.Delete: (_BOUND_BY, lambda node: [n for t in node.targets for n in _names(t)]),
    ast.ExceptHandler: (_BOUND_BY, lambda node: [node.name] if node.name else []),
    ast.MatchAs: (_MATCHED, lambda node: [node.name] if node.name else []),
    ast.MatchStar: (_MATCHED, lambda node: [node.name] if node.name else []),
    ast.MatchMapping: (_MATCHED, lambda node: [node.rest] if node.rest else []),
}
# The others that bind a name (or record a return or a global declaration) in their scope.
_STATEMENTS = (
    ast.Assign,
    ast.AnnAssign,
    ast.Import,
    ast.ImportFrom,
    ast.Return,
    ast.Global,
    ast.Nonlocal,
)


def _bind_statement(node: ast.AST, scope: Scope) -> None:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            _bind_target(target, node.value, scope)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        _bind_target(node.target, node.value, scope)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        _bind_import(node, scope)
    elif isinstance(node, ast.Return):
        scope.returns.append(node.value)
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        scope.declared_global.update(node.names)
    elif (opaque := _OPAQUE.get(type(node))) is not None:
        reason, names = opaque
        for name in names(node):
            scope.bind(name, Opaque(reason.format(name=name)))


def _bind_target(target: ast.expr, value: ast.expr, scope: Scope) -> None:
    if isinstance(target, ast.Name):
        scope.bind(target.id, Assigned(value, scope))
    else:
        for name in _names(target):
            scope.bind(name, Opaque(f"`{name}` is unpacked from a sequence"))


def _bind_import(node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
    for alias in node.names:
        if isinstance(node, ast.Import):  # import a.b binds a; import a.b as c binds c to a.b
            bound = alias.asname or alias.name.partition(".")[0]
            scope.bind(bound, Imported(alias.name if alias.asname else bound, None, 0))
        elif alias.name == "*":
            scope.star_imports.append((node.module or "", node.level))
        else:
            binding = Imported(node.module or "", alias.name, node.level)
            scope.bind(alias.asname or alias.name, binding)


def _names(target: ast.expr | None) -> list[str]:
    """The plain names a target binds (``a, (b, *c)``); attributes and subscripts bind none."""
    out: list[str] = []
    stack = [target]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            out.append(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            stack.extend(node.elts)
        elif isinstance(node, ast.Starred):
            stack.append(node.value)
    return out


def _hoist_globals(function: Scope, module: Scope) -> None:
    """A name a function declares ``global`` or ``nonlocal`` is bound (opaque) in the scope it
    names: a constant changed so is not read as bound once."""
    for name in function.declared_global:
        moved = function.bindings.pop(name, [])
        target = _declaring_scope(function, name) or module
        for _ in moved:
            target.bind(name, Opaque(f"`{name}` is rebound inside a function"))


def _declaring_scope(function: Scope, name: str) -> Scope | None:
    scope = function.parent
    while scope is not None and scope.parent is not None:
        if not scope.is_class and name in scope.bindings:
            return scope
        scope = scope.parent
    return None


def _add_children(node: ast.AST, pending: list[ast.AST]) -> None:
    """``node``'s children (not ``ctx``) pushed last first: popped in source order."""
    for name in reversed(node._fields):
        if name == "ctx":
            continue
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            pending.append(value)
        elif isinstance(value, list):
            pending.extend(item for item in reversed(value) if isinstance(item, ast.AST))


def release_locals(functions: tuple[Scope, ...]) -> None:
    """Forget the locals of ``functions`` that no ``return`` reaches, once the module's calls
    are read: a package's trees are not all held at once, yet functions fold through returns."""
    needed: dict[int, set[str]] = {}
    for function in reversed(functions):  # nested functions first: they pass free names up
        wanted = needed.pop(id(function), set())
        for value in function.returns:
            wanted |= _used_names(value)
        kept = _close_over(function, wanted)
        for name in [n for n in function.bindings if n not in kept]:
            del function.bindings[name]
        if function.parent is not None:
            needed.setdefault(id(function.parent), set()).update(wanted - kept)


def _close_over(function: Scope, wanted: set[str]) -> set[str]:
    """The names of ``wanted`` that ``function`` binds, and those their values use in turn."""
    kept: set[str] = set()
    todo = [n for n in wanted if n in function.bindings]
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept.add(name)
        for binding in function.bindings[name]:
            if isinstance(binding, Assigned):
                more = _used_names(binding.value)
                wanted |= more
                todo.extend(n for n in more if n in function.bindings)
    return kept


def _used_names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
