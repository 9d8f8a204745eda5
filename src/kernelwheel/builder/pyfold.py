"""Names followed through imports and simple assignments, and constant strings folded (f-strings,
``+``, ``%``, ``.format``, ``join``, a package function's ``return``), across one package's
modules with :mod:`ast` only. What the generated ``_ops`` gives is the build's own (:data:`OWN`);
what cannot be read, a cycle or a depth past :data:`MAX_DEPTH` is an :class:`Unknown` saying why.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeGuard

from .pyscope import Assigned, Binding, Defined, Imported, Scope, read_scopes, release_locals

MAX_DEPTH = 100  # names and expressions followed through at most this many steps
_MAX_TEXT = 4096  # a folded string longer than this is not read further
_MAX_PARTS = 64  # nor one of more parts than this
_MAX_CHOICES = 8  # a name bound more often than this is not followed
_OPS_MODULE = "_ops"  # the generated module that holds the build's own namespace
# The generated functions that prefix an op name with the build's namespace (tvm-ffi's too): a
# call of one the package does not define itself gives the build's own namespace.
OWN_FUNCTIONS = frozenset({"add_op_namespace_prefix", "torch_add_op_namespace_prefix"})


@dataclass(frozen=True)
class Own:
    """Something of the package's generated ``_ops``: the build's own namespace."""


OWN = Own()


@dataclass(frozen=True)
class Unknown:
    """A value that cannot be read without running the code; ``reason`` says why."""

    reason: str


Part = str | Own | Unknown


@dataclass(frozen=True)
class Folded:
    """A string as far as it can be read: literal text, the build's own parts, unknown parts."""

    parts: tuple[Part, ...]

    @property
    def text(self) -> str | None:
        if all(isinstance(p, str) for p in self.parts):
            return "".join(p for p in self.parts if isinstance(p, str))
        return None

    def __add__(self, other: Folded) -> Folded:
        parts: list[Part] = list(self.parts)
        for part in other.parts:
            if parts and isinstance(part, str) and isinstance(parts[-1], str):
                parts[-1] = parts[-1] + part
            elif parts and not isinstance(part, str) and type(parts[-1]) is type(part):
                continue  # two unknown (or own) parts in a row read as one: the first says why
            else:
                parts.append(part)
        return _bounded(parts)


_TOO_LONG = Unknown("a string too long to read")


def _bounded(parts: list[Part]) -> Folded:
    """``parts`` cut to their start (the namespace's): a name doubled at every step stays small."""
    total = 0
    for index, part in enumerate(parts):
        if index >= _MAX_PARTS:
            return Folded((*parts[:index], _TOO_LONG))
        if isinstance(part, str):
            total += len(part)
            if total > _MAX_TEXT:
                return Folded((*parts[:index], part[: len(part) - (total - _MAX_TEXT)], _TOO_LONG))
    return Folded(tuple(parts))


def _unknown(reason: str) -> Folded:
    return Folded((Unknown(reason),))


def _same(results: set[Folded], reason: str) -> Folded:
    """The one string all of ``results`` agree on, else an unknown saying ``reason``."""
    return results.pop() if len(results) == 1 else _unknown(reason)


_EMPTY = Folded(())


# --- what a name or expression refers to -------------------------------------------------------


@dataclass(frozen=True)
class Dotted:
    """A dotted name from outside the package (``torch.library.custom_op``), or one unbound."""

    name: str


@dataclass(frozen=True)
class ModuleRef:
    """A module or folder of the package (``module`` None: a folder without ``__init__.py``)."""

    path: Path  # a package's is its ``__init__.py``
    module: ParsedModule | None
    is_package: bool


@dataclass(frozen=True)
class ValueRef:
    """An expression of the package, read in ``scope``."""

    node: ast.expr
    module: ParsedModule
    scope: Scope


@dataclass(frozen=True)
class DefRef:
    defined: Defined
    module: ParsedModule


@dataclass(frozen=True)
class Choice:
    """A name bound more than once: each binding's referent."""

    name: str
    options: tuple[Ref, ...]


Ref = Dotted | ModuleRef | ValueRef | DefRef | Choice | Own | Unknown


@dataclass(eq=False)
class ParsedModule:
    """A parsed file's module scope (its calls are handed out once, by :meth:`Package.calls`,
    so a package's syntax trees are not all kept at once)."""

    path: Path
    scope: Scope


class Package:
    """The ``.py`` files of the package folder ``root``, parsed once each, and what names mean."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name
        self._parsed: dict[Path, ParsedModule | Unknown] = {}
        # Each value folded once, keyed by its node (kept, so the id is not reused); None: being
        # folded (a cycle).
        self._folded: dict[int, tuple[ast.expr, Folded | None]] = {}
        self._calls: dict[Path, tuple[tuple[ast.Call, Scope], ...]] = {}
        self._functions: dict[Path, tuple[Scope, ...]] = {}
        self._following: set[int] = set()
        # A binding list's referent, followed once (the list kept, so its id is not reused).
        self._names: dict[int, tuple[list[Binding], Ref]] = {}
        self._modules: dict[tuple[Path, tuple[str, ...]], Ref] = {}
        self._real_root = root.resolve()

    def module(self, path: Path) -> ParsedModule | Unknown:
        if path not in self._parsed:
            self._parsed[path] = self._parse(path)
        return self._parsed[path]

    def calls(self, path: Path) -> tuple[tuple[ast.Call, Scope], ...]:
        self.module(path)
        return self._calls.pop(path, ())

    def release(self, path: Path) -> None:
        """Forget the locals of ``path``'s functions that their returns do not reach."""
        release_locals(self._functions.pop(path, ()))

    def _parse(self, path: Path) -> ParsedModule | Unknown:
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
            scopes = read_scopes(tree)
        except (RecursionError, MemoryError):  # from the parser: deeper than it goes
            return Unknown("nested too deeply for Python's parser")
        except (SyntaxError, ValueError, OSError) as exc:  # ValueError: another encoding
            return Unknown(str(exc) or type(exc).__name__)
        self._calls[path] = scopes.calls
        self._functions[path] = scopes.functions
        return ParsedModule(path, scopes.module)

    def _module_at(self, folder: Path, parts: list[str]) -> Ref:
        """The module ``parts`` names under ``folder`` (empty: ``folder`` itself), found once."""
        key = (folder, tuple(parts))
        if key not in self._modules:
            self._modules[key] = self._find_module(folder, parts)
        return self._modules[key]

    def _find_module(self, folder: Path, parts: list[str]) -> Ref:
        if _OPS_MODULE in parts:
            return OWN
        target = folder.joinpath(*parts)
        dotted = ".".join(parts) or "."
        if not target.resolve().is_relative_to(self._real_root):
            return Unknown(f"`{dotted}` lies outside the package")
        candidates = [(target / "__init__.py", True)]
        if parts:
            candidates.insert(0, (target.with_name(target.name + ".py"), False))
        for path, is_package in candidates:
            if path.is_file():
                parsed = self.module(path)
                if isinstance(parsed, Unknown):
                    return Unknown(
                        f"{display_path(path, self.root)} could not be read ({parsed.reason})"
                    )
                return ModuleRef(path, parsed, is_package)
        if target.is_dir():
            return ModuleRef(target / "__init__.py", None, True)
        return Unknown(f"no module `{dotted}` in the package")

    def _imported_module(self, module: ParsedModule, name: str, level: int) -> Ref:
        """The module ``from <level dots><name> import ...`` (or ``import <name>``) names."""
        parts = [p for p in name.split(".") if p]
        if level == 0:
            if not parts or parts[0] != self.name:
                return Dotted(name)
            return self._module_at(self.root, parts[1:])
        folder = module.path.parent
        for _ in range(level - 1):
            folder = folder.parent
        if not folder.is_relative_to(self.root):
            return Unknown(f"`{'.' * level}{name}` lies outside the package")
        return self._module_at(folder, parts)

    def _module_attribute(self, ref: ModuleRef, name: str, depth: int) -> Ref:
        """``module.name``: a name the module binds, else a submodule of a package."""
        if ref.module is not None:
            module_scope = ref.module.scope
            if name in module_scope.bindings or module_scope.star_imports:
                found = self._name(name, ref.module, module_scope, depth + 1)
                if not isinstance(found, Dotted) or name in module_scope.bindings:
                    return found
        if ref.is_package:
            return self._module_at(ref.path.parent, [name])
        return Unknown(f"`{name}` is not found in {display_path(ref.path, self.root)}")

    def resolve(self, node: ast.expr, module: ParsedModule, scope: Scope, depth: int = 0) -> Ref:
        """What ``node`` refers to: a name its binding, an attribute its base's, else itself."""
        if depth > MAX_DEPTH:
            return Unknown("nested too deeply to read")
        if isinstance(node, ast.Name):
            return self._name(node.id, module, scope, depth + 1)
        attr: str | None
        if isinstance(node, ast.Attribute):
            base, attr = node.value, node.attr
        elif is_getattr(node):
            base, attr = node.args[0], self.fold(node.args[1], module, scope, depth + 1).text
            if attr is None:
                return Unknown("a getattr whose name cannot be read")
        else:
            return ValueRef(node, module, scope)
        return self._attribute(self.resolve(base, module, scope, depth + 1), attr, depth)

    def _attribute(self, base: Ref, attr: str, depth: int) -> Ref:
        if isinstance(base, Dotted):
            return Dotted(f"{base.name}.{attr}")
        if isinstance(base, ModuleRef):
            return self._module_attribute(base, attr, depth)
        if isinstance(base, (Own, Unknown)):
            return base
        if isinstance(base, Choice):
            return Choice(base.name, tuple(self._attribute(o, attr, depth) for o in base.options))
        return Unknown(f"`.{attr}` of a value computed when the code runs")

    def _name(self, name: str, module: ParsedModule, scope: Scope, depth: int) -> Ref:
        bindings = scope.lookup(name)
        if bindings is None:
            return self._star_imported(name, module, depth)
        if len(bindings) > _MAX_CHOICES:
            return Unknown(f"`{name}` is bound {len(bindings)} times")
        key = id(bindings)
        if key in self._names:
            return self._names[key][1]
        if key in self._following:
            return Unknown(f"`{name}` is defined in terms of itself")
        self._following.add(key)
        try:
            options = tuple(self._binding(b, name, module, depth) for b in bindings)
        finally:
            self._following.discard(key)
        ref = options[0] if len(options) == 1 else Choice(name, options)
        if not self._following:  # not inside a cycle being followed: the answer is final
            self._names[key] = (bindings, ref)
        return ref

    def _star_imported(self, name: str, module: ParsedModule, depth: int) -> Ref:
        for source, level in module.scope.star_imports:
            ref = self._imported_module(module, source, level)
            if isinstance(ref, ModuleRef) and ref.module is not None:
                if ref.module.scope.lookup(name) is not None:
                    return self._module_attribute(ref, name, depth)
        return Dotted(name)

    def _binding(self, binding: Binding, name: str, module: ParsedModule, depth: int) -> Ref:
        if isinstance(binding, Assigned):
            value = binding.value
            if isinstance(value, (ast.Name, ast.Attribute)) or is_getattr(value):
                return self.resolve(value, module, binding.scope, depth + 1)
            return ValueRef(value, module, binding.scope)
        if isinstance(binding, Imported):
            return self._import(binding, module, depth)
        if isinstance(binding, Defined):
            return DefRef(binding, module)
        return Unknown(binding.reason)

    def _import(self, binding: Imported, module: ParsedModule, depth: int) -> Ref:
        source = self._imported_module(module, binding.module, binding.level)
        if binding.name is None:
            return source
        if isinstance(source, Dotted):
            return Dotted(f"{source.name}.{binding.name}" if source.name else binding.name)
        if isinstance(source, ModuleRef):
            if binding.name == _OPS_MODULE:
                return OWN
            return self._module_attribute(source, binding.name, depth + 1)
        return source

    def fold(self, node: ast.expr, module: ParsedModule, scope: Scope, depth: int = 0) -> Folded:
        if depth > MAX_DEPTH:
            return _unknown("nested too deeply to read")
        if isinstance(node, ast.Constant):
            return (
                Folded((node.value,)) if isinstance(node.value, str) else _unknown("not a string")
            )
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node, module, scope, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.fold(node.left, module, scope, depth + 1)
            return left + self.fold(node.right, module, scope, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self._percent(node, module, scope, depth)
        if isinstance(node, (ast.Name, ast.Attribute)) or is_getattr(node):
            return self.fold_ref(self.resolve(node, module, scope, depth + 1), depth + 1)
        if isinstance(node, ast.Call):
            return self._call(node, module, scope, depth)
        if isinstance(node, ast.Subscript):  # ops.__name__.split(".")[-1]: still the build's
            value = self.fold(node.value, module, scope, depth + 1)
            if value.parts and all(isinstance(p, Own) for p in value.parts):
                return value
        return _unknown(f"an expression the check does not evaluate (`{_unparse(node)}`)")

    def fold_ref(self, ref: Ref, depth: int) -> Folded:
        if isinstance(ref, ValueRef):
            return self._fold_once(ref, depth)
        if isinstance(ref, Own):
            return Folded((OWN,))
        if isinstance(ref, Unknown):
            return Folded((ref,))
        if isinstance(ref, Choice):
            folded = {self.fold_ref(option, depth + 1) for option in ref.options}
            return _same(folded, f"`{ref.name}` is bound more than once")
        if isinstance(ref, Dotted):
            return _unknown(f"`{ref.name}` is not a constant of the package")
        if isinstance(ref, DefRef):
            return _unknown(f"`{ref.defined.name}` is a function or class")
        return _unknown("a module")

    def _fold_once(self, ref: ValueRef, depth: int) -> Folded:
        """Folded once however often used (``A = B + B; B = C + C; ...`` stays linear)."""
        key = id(ref.node)
        if key in self._folded:
            done = self._folded[key][1]
            return done if done is not None else _unknown("a value defined in terms of itself")
        self._folded[key] = (ref.node, None)
        result = self.fold(ref.node, ref.module, ref.scope, depth + 1)
        self._folded[key] = (ref.node, result)
        return result

    def _fstring(
        self, node: ast.JoinedStr, module: ParsedModule, scope: Scope, depth: int
    ) -> Folded:
        out = _EMPTY
        for value in node.values:
            if not isinstance(value, ast.FormattedValue):
                out = out + self.fold(value, module, scope, depth + 1)
                continue
            folded = self.fold(value.value, module, scope, depth + 1)
            if value.format_spec is not None:
                out = out + _unknown("a formatted field with a format spec")
            else:
                conversion = "s" if value.conversion == -1 else chr(value.conversion)
                out = out + _converted(folded, conversion, "a formatted field with !r or !a")
        return out

    def _percent(self, node: ast.BinOp, module: ParsedModule, scope: Scope, depth: int) -> Folded:
        template = self.fold(node.left, module, scope, depth + 1).text
        if template is None:
            return _unknown("a % format whose template cannot be read")
        if isinstance(node.right, ast.Dict):
            return _unknown("a % format with a mapping")
        elements = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        if any(isinstance(e, ast.Starred) for e in elements):
            return _unknown("a % format with *arguments")
        values = [self.fold(e, module, scope, depth + 1) for e in elements]
        return _percent_format(template, values)

    def _call(self, node: ast.Call, module: ParsedModule, scope: Scope, depth: int) -> Folded:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("format", "join"):
            base = self.fold(func.value, module, scope, depth + 1).text
            if base is not None:
                fold = partial(self.fold, module=module, scope=scope, depth=depth + 1)
                if func.attr == "format":
                    return _str_format(base, node, fold)
                return _join(base, node, fold)
        callee = self.resolve(func, module, scope, depth + 1)
        return self._call_result(callee, func, depth)

    def _call_result(self, callee: Ref, func: ast.expr, depth: int) -> Folded:
        if isinstance(callee, Own):
            return Folded((OWN,))
        if isinstance(callee, Dotted) and callee.name.rpartition(".")[2] in OWN_FUNCTIONS:
            return Folded((OWN,))  # the generated prefix function, imported from elsewhere
        if isinstance(callee, DefRef) and callee.defined.scope is not None:
            return self._returned(callee.defined.name, callee.defined.scope, callee.module, depth)
        if isinstance(callee, Unknown):
            return Folded((callee,))
        if isinstance(callee, Choice):
            results = {self._call_result(option, func, depth + 1) for option in callee.options}
            return _same(results, f"`{callee.name}` is bound more than once")
        return _unknown(f"the result of calling `{_unparse(func)}`")

    def _returned(self, name: str, function: Scope, module: ParsedModule, depth: int) -> Folded:
        """What every ``return`` of a package function gives (its parameters unknown)."""
        if not function.returns:
            return _unknown(f"`{name}` returns nothing")
        if len(function.returns) > _MAX_CHOICES:
            return _unknown(f"`{name}` has more than {_MAX_CHOICES} returns")
        results = {
            self._fold_once(ValueRef(value, module, function), depth + 1)
            if value is not None
            else _unknown(f"`{name}` returns None")
            for value in function.returns
        }
        return _same(results, f"`{name}` returns different strings")


def _join(separator: str, node: ast.Call, fold: Callable[[ast.expr], Folded]) -> Folded:
    if len(node.args) != 1 or node.keywords or not isinstance(node.args[0], (ast.List, ast.Tuple)):
        return _unknown("a str.join of something other than a literal list or tuple")
    items = node.args[0].elts
    if any(isinstance(e, ast.Starred) for e in items):
        return _unknown("a str.join with *items")
    out = _EMPTY
    for index, item in enumerate(items):
        if index:
            out = out + Folded((separator,))
        out = out + fold(item)
    return out


def display_path(path: Path, root: Path) -> str:
    return str(path.relative_to(root) if path.is_relative_to(root) else path)


def is_getattr(node: ast.AST) -> TypeGuard[ast.Call]:
    """Whether ``node`` is ``getattr(OBJ, NAME)``, no default: one that raises."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) == 2
        and not node.keywords
    )


def _unparse(node: ast.expr) -> str:
    try:
        text = ast.unparse(node)
    except (RecursionError, ValueError):
        return type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _percent_format(template: str, values: list[Folded]) -> Folded:
    """``template % values``: ``%s``, ``%r``, ``%a`` and ``%%``; any other an unknown part."""
    pieces = re.split("%(.?)", template, flags=re.DOTALL)  # literal, conversion, ..., literal
    literals, conversions = pieces[::2], pieces[1::2]
    taking = [c for c in conversions if c != "%"]
    if len(taking) > len(values):
        return _unknown("a % format with too few arguments")
    if len(taking) < len(values):
        return _unknown("a % format with too many arguments")
    out, given = _EMPTY, iter(values)
    for literal, conversion in zip(literals, conversions, strict=False):  # one more literal
        out = out + Folded((literal,))
        if conversion == "%":
            out = out + Folded(("%",))
        else:
            reason = "a % conversion the check does not evaluate"
            out = out + _converted(next(given), conversion, reason)
    return out + Folded((literals[-1],))


def _converted(value: Folded, conversion: str, reason: str) -> Folded:
    """``value`` converted by ``s``, ``r`` or ``a``; else an unknown saying ``reason``."""
    if conversion == "s":
        return value
    text = value.text
    if conversion not in ("r", "a") or text is None:
        return _unknown(reason)
    return Folded((repr(text) if conversion == "r" else ascii(text),))


def _str_format(template: str, node: ast.Call, fold: Callable[[ast.expr], Folded]) -> Folded:
    """``template.format(...)``: ``{}``, ``{0}``, ``{name}``; any other field an unknown part."""
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return _unknown("a str.format with *arguments")
    positional = [fold(a) for a in node.args]
    named = {k.arg: fold(k.value) for k in node.keywords if k.arg is not None}
    try:
        pieces = list(string.Formatter().parse(template))
    except ValueError:
        return _unknown("a str.format template that does not parse")
    out = _EMPTY
    auto = 0
    for literal, field, spec, conversion in pieces:
        out = out + Folded((literal,))
        if field is None:
            continue
        if field == "":
            field = str(auto)
            auto += 1
        if spec or conversion not in (None, "s"):
            out = out + _unknown("a str.format field with a spec or conversion")
        elif field.isdigit() and int(field) < len(positional):
            out = out + positional[int(field)]
        elif field in named:
            out = out + named[field]
        else:
            out = out + _unknown(f"a str.format field `{{{field}}}` that cannot be read")
    return out
