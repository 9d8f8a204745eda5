"""The load check: a freshly linked extension imported in a child of the build environment's
Python before any wheel, so a wrong schema, undefined symbol or registration error fails the
build naming the op (a child: torch aborts the process on an error in static registrations)."""

from __future__ import annotations

import ast
import json
import re
import signal
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from .._toml import parse_toml
from .._util import CommandTimeout, Runner, atomic_write
from ..abi._elf import demangle
from ..errors import BuildError, KernelwheelError
from ..model.variant import Arch, BackendKind, Variant
from ._load_check import COMPOSITE_KEYS, MARK
from .call_schema import call_fault
from .cxx_signature import cxx_signature
from .pyfold import is_getattr

PROGRAM = Path(__file__).with_name("_load_check.py")
TIMEOUT_S = 300  # importing torch on a cold disk takes seconds; a hang is a failure

# torch's message for an implementation whose C++ signature differs from the op's schema
_MISMATCH = "doesn't match the expected function schema"
# one kernel's C++ signature not that of the op's kernel registered before it
_KERNELS = "Mismatch in kernel C++ signatures"


@dataclass(frozen=True)
class LoadReport:
    """What a load check found: the ops registered under the build's namespace (schemas)."""

    ops: tuple[str, ...] = ()
    undefined: tuple[str, ...] = ()  # implemented (ops.impl) but defined by no ops.def
    elsewhere: tuple[str, ...] = ()  # defined by the extension outside the build's namespace
    syntax: tuple[str, ...] = ()  # FILE:LINE: message of package files that do not compile
    lacking: tuple[tuple[str, str], ...] = ()  # (dispatch key, op) without a kernel for it
    no_fake: tuple[str, ...] = ()  # ops without a Meta (fake) kernel: torch.compile fails

    @classmethod
    def read(cls, found: dict[str, Any]) -> LoadReport:
        keys = ("ops", "undefined", "elsewhere", "syntax", "no_fake")
        lacking = found.get("lacking")
        pairs = lacking.items() if isinstance(lacking, dict) else ()
        lacks = tuple((str(key), str(op)) for key, names in pairs for op in names)
        return cls(**{k: tuple(map(str, found.get(k, []))) for k in keys}, lacking=lacks)

    def json(self) -> str:
        lacking: dict[str, list[str]] = {}
        for key, op in self.lacking:
            lacking.setdefault(key, []).append(op)
        keys = ("ops", "undefined", "elsewhere", "no_fake")
        return json.dumps({k: list(getattr(self, k)) for k in keys} | {"lacking": lacking})

    def refuse_syntax(self, log: Path, root: Path | None) -> LoadReport:
        refuse_syntax(self.syntax, root, log, by=" with the build environment's Python")
        return self

    def describe(self, namespace: str) -> str:
        names = [op.split("(", 1)[0].removeprefix(namespace + "::") for op in self.ops]
        return f"{len(names)} op(s) loaded" + (f": {', '.join(names)}" if names else "")

    def names(self, namespace: str) -> tuple[str, ...]:
        """The ops' names, without the namespace or an overload (``split2``)."""
        return tuple(sorted({_bare(op.split("(", 1)[0], namespace) for op in self.ops}))

    def warnings(
        self, namespace: str, key: str = "", package: Path | None = None
    ) -> tuple[str, ...]:
        """Of ops defined in another namespace, implementations no schema defines and ops
        without a kernel for ``key`` (:func:`dispatch_key`) but those the Python of ``package``
        gives one (read afresh: it changes without the extension changing)."""
        found = []
        lacking = any(k == key for k, _ in self.lacking)  # the package read only then
        given = python_kernels(package, key=key) if package is not None and lacking else set()
        if missing := [
            op.removeprefix(namespace + "::")
            for k, op in self.lacking
            if k == key and op.removeprefix(namespace + "::") not in given
        ]:
            found.append(_lacking_warning(missing, key, self._served(namespace, key, missing)))
        if self.elsewhere:
            names = ", ".join(op.split("(", 1)[0] for op in self.elsewhere)
            found.append(
                f"warning: {names} defined outside the build's namespace (a fixed "
                "TORCH_LIBRARY name?): the package's ops lack them, and two builds loaded "
                "together clash; define them in TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)"
            )
        if self.undefined:
            names = ", ".join(name.removeprefix(namespace + "::") for name in self.undefined)
            found.append(
                f"warning: ops.impl of {names}, which no ops.def of the build's namespace "
                "defines: nothing calls it; is the name in ops.impl(...) misspelt?"
            )
        return tuple(found)

    def _served(self, namespace: str, key: str, missing: Sequence[str]) -> dict[str, str]:
        """Of the ``missing`` ops, those with a kernel for the other backend, and its key."""
        lacks = {(k, op.removeprefix(namespace + "::")) for k, op in self.lacking}
        others = [k for k in ("CPU", "CUDA") if k != key]  # _load_check.load_torch's keys
        return {op: k for op in missing for k in others if (k, op) not in lacks}

    def notes(self, namespace: str, package: Path | None = None) -> tuple[str, ...]:
        """The ops torch.compile cannot trace (no fake kernel, from the extension or the Python
        of ``package``): a note, as many authors never compile their ops."""
        given = python_kernels(package, fake=True) if package and self.no_fake else set()
        names = [
            op.removeprefix(namespace + "::")
            for op in self.no_fake
            if op.removeprefix(namespace + "::") not in given
        ]
        if not names:
            return ()
        first = names[0]  # an overload is registered by its full name: "add_one.out"
        return (
            f"note: {', '.join(names)} {'has' if len(names) == 1 else 'have'} no fake (Meta) "
            "kernel: torch.compile and torch.library.opcheck fail on "
            f"{'it' if len(names) == 1 else 'them'}; register one in the package's Python "
            f'(@torch.library.register_fake(add_op_namespace_prefix("{first}")), the prefix '
            f'from ._ops) or in the binding (ops.impl("{first}", torch::kMeta, &fn))',
        )


def _bare(op: str, namespace: str) -> str:
    """``ns::split.out`` -> ``split``."""
    return op.removeprefix(namespace + "::").split(".")[0]


# Calls that register a kernel from Python, and a fake one (or impl(..., "Meta"), a composite)
_KERNEL_CALLS = frozenset({"impl", "register_kernel"})
_FAKE_CALLS = frozenset({"register_fake", "impl_abstract", "register_meta"})
_SERVES_META = frozenset({"Meta", *COMPOSITE_KEYS})
_KNOWN_KEYS = _SERVES_META | {"CPU", "CUDA"}  # a call naming none of them: every backend
# torch.library.impl's and register_kernel's device types, as the dispatch keys torch makes them
_DEVICE_KEYS = {
    "meta": "Meta",
    "cpu": "CPU",
    "cuda": "CUDA",
    "default": "CompositeExplicitAutograd",
}
_QUOTED_NAME = re.compile(r"""["'](?:\w+::)?([A-Za-z_]\w*(?:\.\w+)?)["']""")  # "ns::op.out"


def python_kernels(folder: Path, *, fake: bool = False, key: str = "") -> set[str]:
    """The ops the Python below ``folder`` registers a kernel for (``fake``: a fake one;
    ``key``: for that dispatch key, a composite one or one naming no key; "": any), by each
    call's first argument; one whose op is a variable counts every name the file quotes
    (read, not run: silence over a false alarm)."""
    wanted = {*COMPOSITE_KEYS, *([key] if key else ["CPU", "CUDA"])}
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        text = _text(path)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
            callee = call.func
            name = getattr(callee, "attr", None) or getattr(callee, "id", None)
            keys = {
                _DEVICE_KEYS.get(n.value, n.value) if isinstance(n.value, str) else n.value
                for n in ast.walk(call)
                if isinstance(n, ast.Constant)
            }
            registers = (
                name in _FAKE_CALLS or (name in _KERNEL_CALLS and bool(keys & _SERVES_META))
                if fake
                else name in _KERNEL_CALLS and (not keys & _KNOWN_KEYS or bool(keys & wanted))
            )
            if not registers or not call.args:
                continue
            named = [
                n.value.rsplit("::", 1)[-1]
                for n in ast.walk(call.args[0])
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ] + _ops_attributes(call.args[0])
            quoted = [(q, q.split(".")[0]) for q in _QUOTED_NAME.findall(text)]  # either
            found.update(n.removesuffix(".default") for n in named or chain(*quoted))
    return found


def _ops_attributes(node: ast.AST) -> list[str]:
    """The ops ``node`` names as ``ops.NAME`` or ``ops.NAME.OVERLOAD`` (``NAME.OVERLOAD``)."""
    found, inner = [], set()
    for n in ast.walk(node):  # outer first: ops.a.out before its ops.a
        if not isinstance(n, ast.Attribute) or id(n) in inner:
            continue
        if isinstance(n.value, ast.Attribute) and getattr(n.value.value, "id", None) == "ops":
            found.append(f"{n.value.attr}.{n.attr}")
            inner.add(id(n.value))
        elif getattr(n.value, "id", None) == "ops":
            found.append(n.attr)
    return found


def _lacking_warning(missing: Sequence[str], key: str, served: dict[str, str]) -> str:
    """The warning of the ``missing`` ops, which have no ``key`` kernel; ``served``: those with
    a kernel for another backend, and its key."""
    one = len(missing) == 1
    by_key = {k: [op for op, other in served.items() if other == k] for k in served.values()}
    works = "; ".join(
        f"{', '.join(ops)} {'runs' if len(ops) == 1 else 'run'} on {k} tensors"
        for k, ops in by_key.items()
    )
    first = missing[0]
    backend = key.lower()
    return (
        f"warning: {', '.join(missing)} {'has' if one else 'have'} no {key} kernel in this "
        f'build: a call with {key} tensors raises NotImplementedError ("Could not run ... '
        f"from the '{key}' backend\"){f' ({works})' if works else ''}; register "
        f'{"one" if one else "each"} in the binding: ops.impl("{first}", torch::k{key}, &fn) '
        f"under #if defined({key}_KERNEL), fn's source in the src of a build.toml kernel with "
        f'backend = "{backend}"'
    )


def call_warnings(
    report: LoadReport, namespace: str, package: Path, root: Path | None
) -> tuple[str, ...]:
    """The warning of the ``ops.NAME`` the Python of ``package`` calls that the build (its
    ``report``) does not define, and of each call its schemas refuse (an argument left out, too
    many, a keyword none has): read afresh every run, as the Python is edited."""
    ours = report.names(namespace)
    files = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(root).as_posix() if root and path.is_relative_to(root) else path
        try:
            files.append((str(where), path.read_bytes()))
        except OSError:
            continue
    uses = _op_uses(files)
    found = _argument_warnings(uses, report.ops)
    if calls := [f"ops.{use.name} ({use.where})" for use in uses if use.name not in ours]:
        defined = f"ops.def defines (this build's ops: {', '.join(ours) or 'none'})"
        found.insert(0, _call_warning(calls, defined))
    return tuple(found)


def _argument_warnings(uses: Sequence[_OpUse], schemas: Sequence[str]) -> list[str]:
    """A warning for each call in ``uses`` that none of its op's ``schemas`` accepts."""
    found = []
    for use in uses:
        if use.call is None:
            continue
        # the packet's every overload (torch takes the first that matches), or the one named
        full = {None: None, "default": use.name}.get(use.overload, f"{use.name}.{use.overload}")
        named = [
            s
            for s in schemas
            if (op := s.split("(", 1)[0].rpartition("::")[2]) == full
            or (full is None and op.partition(".")[0] == use.name)
        ]
        if named and (fault := call_fault(use.call, named)):
            shown = f"ops.{use.name}" + (f".{use.overload}" if use.overload else "")
            found.append(
                f"warning: {use.where}: {shown}(...) raises RuntimeError, as no schema of the "
                f"op accepts it: {fault}"
            )
    return found


def _call_warning(calls: Sequence[str], undefined_by: str) -> str:
    """The warning of ``calls`` (``ops.NAME (FILE:LINE)``) that ``undefined_by`` does not
    define, read after "which no"."""
    return (
        f"warning: the package calls {', '.join(calls)}, which no {undefined_by}: each such "
        "call raises AttributeError (a registration naming it with add_op_namespace_prefix "
        "fails the package's import); rename the call or define the op"
    )


def op_calls(files: Iterable[tuple[str, bytes]]) -> list[tuple[str, str]]:
    """``(NAME, FILE:LINE)`` of each ``ops.NAME`` (or ``getattr(ops, "NAME")``) a file (name,
    bytes) reaches through ``from ._ops import ops``: not in a function binding an ``ops`` of
    its own, nor of an op the package's Python defines itself (``custom_op``, ``define``)."""
    return [(use.name, use.where) for use in _op_uses(files)]


@dataclass(frozen=True)
class _OpUse:
    name: str
    where: str  # FILE:LINE
    call: ast.Call | None  # the call of it: ops.NAME(...), ops.NAME.overload(...)
    overload: str | None  # "out" of ops.NAME.out(...), "default"; None: the packet's


def _op_uses(files: Iterable[tuple[str, bytes]]) -> list[_OpUse]:
    """:func:`op_calls`, each with the call that calls it, if one does."""
    found: list[_OpUse] = []
    trees = []
    for where, source in files:
        try:
            trees.append((where, ast.parse(source)))
        except (SyntaxError, ValueError):
            continue
    own = {name for _, tree in trees for name in _python_defined(tree)}
    for where, tree in trees:
        imported = [  # (name, as) of what the file imports from ._ops
            (alias.name, alias.asname or alias.name)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level and node.module == "_ops"
            for alias in node.names
        ]
        names = {own_name for name, own_name in imported if name == "ops"}
        prefixes = {own_name for name, own_name in imported if name == "add_op_namespace_prefix"}
        shadowed = {
            id(node)
            for scope in ast.walk(tree)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            and _binds(scope, names)
            for node in ast.walk(scope)
        }
        # probed: hasattr(ops, "NAME") anywhere in the file, or in a try that catches
        # AttributeError (an op a variant may lack: megablocks' `if hasattr(ops, "sort")`)
        probed = {
            n.args[1].value
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and getattr(n.func, "id", None) == "hasattr"
            and len(n.args) == 2
            and getattr(n.args[0], "id", None) in names
            and isinstance(n.args[1], ast.Constant)
        }
        shadowed |= {
            id(node)
            for attempt in ast.walk(tree)
            if isinstance(attempt, ast.Try) and any(map(_catches_attribute_error, attempt.handlers))
            for statement in attempt.body
            for node in ast.walk(statement)
        }
        called = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
        overloads = {  # ops.NAME.out(...): the call of NAME's attribute
            id(n.value): (n.attr, called[id(n)])
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and id(n) in called
        }
        calls = []
        for node in ast.walk(tree):
            name = _op_named(node, names, prefixes) if id(node) not in shadowed else None
            if name and not name.startswith("_") and name not in own | probed:
                overload, call = overloads.get(id(node), (None, called.get(id(node))))
                line = getattr(node, "lineno", 0)
                calls.append((line, name, _OpUse(name, f"{where}:{line}", call, overload)))
        found += [use for _, _, use in sorted(calls, key=lambda c: c[:2])]  # in line order
    return found


def _catches_attribute_error(handler: ast.ExceptHandler) -> bool:
    """Whether ``handler`` catches AttributeError (bare, by name or a base of it)."""
    caught = handler.type
    kinds = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return caught is None or any(
        getattr(kind, "id", None) in {"AttributeError", "Exception", "BaseException"}
        for kind in kinds
    )


def _op_named(node: ast.AST, names: set[str], prefixes: set[str]) -> str | None:
    """The op ``node`` reaches on one of ``names``: ``ops.NAME``, ``getattr(ops, "NAME")``
    (with no default: one with a default is a probe that never raises), or names through one
    of ``prefixes``: ``add_op_namespace_prefix("NAME.overload")`` (register_fake's op)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id in names else None
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", None) in prefixes
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value.split(".")[0]
    if (
        is_getattr(node)
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in names
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


# the calls that define an op from Python: its name in the first argument
_DEFINE_CALLS = frozenset({"custom_op", "triton_op", "define"})


def _python_defined(tree: ast.AST) -> set[str]:
    """The ops a Python file defines itself: the names its define calls' first argument quotes;
    one whose name is not quoted there (``define(name + "(Tensor x) -> Tensor")``) counts
    every name the file quotes (read, not run: silence over a false alarm)."""
    found: set[str] = set()
    for call in ast.walk(tree):
        if (
            isinstance(call, ast.Call)
            and (getattr(call.func, "attr", None) or getattr(call.func, "id", None))
            in _DEFINE_CALLS
            and call.args
        ):
            named = _quoted_ops(call.args[0])
            found |= named or _quoted_ops(tree)
    return found


def _quoted_ops(node: ast.AST) -> set[str]:
    """The op names the strings below ``node`` start with (``ns::name.overload(...) -> ...``)."""
    names = (
        constant.value.rsplit("::", 1)[-1].split("(")[0].split(".")[0].strip()
        for constant in ast.walk(node)
        if isinstance(constant, ast.Constant) and isinstance(constant.value, str)
    )
    return {name for name in names if name.isidentifier()}


def _binds(scope: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, names: set[str]) -> bool:
    """Whether a function binds one of ``names`` itself (an argument, an assignment)."""
    args = scope.args
    every = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
    return any(arg is not None and arg.arg in names for arg in every) or any(
        isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Store)
        for node in ast.walk(scope)
    )


def _named(name: str, data: bytes) -> bool:
    """Whether the shared object ``data`` holds ``name`` as an op's string: a literal
    (``name\\0``) or a schema's start (``name(``, ``name.overload(``: no NUL of its own). Any
    byte may lead it: a name ending a longer one is missed, never a defined op called undefined."""
    return re.search(re.escape(name.encode()) + rb"[\x00(.]", data) is not None


def wheel_call_warnings(wheel: Path) -> tuple[str, ...]:
    """:func:`call_warnings` of a finished wheel, unimported: a name its shared object holds as
    no op's string (:func:`_named`) is undefined. A package with no shared object beside a
    ``torch.ops`` ``_ops.py`` (noarch: its ops are Python's) has none."""
    found: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for ops_py in (n for n in names if n.endswith("/_ops.py")):
            package = ops_py.removesuffix("_ops.py")
            inside = [n for n in names if n.startswith(package)]
            own = [n for n in inside if n.endswith(".so") and "/" not in n[len(package) :]]
            objects = [data for n in own if (data := _member(archive, n))]
            if not objects or b"torch.ops" not in _member(archive, ops_py):
                continue
            sources = [(n, _member(archive, n)) for n in inside if n.endswith(".py")]
            calls = [
                f"ops.{name} ({where})"
                for name, where in op_calls(sources)
                if not any(_named(name, data) for data in objects)
            ]
            if calls:
                found.append(
                    _call_warning(
                        calls,
                        "ops.def of the wheel's extension defines (no string of it names the op)",
                    )
                )
    return tuple(found)


def _member(archive: zipfile.ZipFile, name: str) -> bytes:
    """A file's bytes; none of one that cannot be read (``check``'s record rule names it)."""
    try:
        return archive.read(name)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
        return b""


def refuse_syntax(
    found: Sequence[str], root: Path | None, log: Path | None = None, *, by: str = ""
) -> None:
    """A :class:`BuildError` for the package's files that do not compile (``FILE:LINE:
    message``; ``by``: with which interpreter): the wheel would build, and its import fail."""
    if not found:
        return
    shown = [line.removeprefix(f"{root}/") if root else line for line in found]
    raise BuildError(
        f"{len(shown)} Python file(s) of the package do not compile{by}: importing the package "
        "would fail",
        log=log,
        hint="fix the syntax at that line",
        diagnostics=tuple(f"  {line}" for line in shown),
    )


def dispatch_key(variant: Variant) -> str:
    """The dispatch key whose kernels ``variant`` builds (``CPU``, ``CUDA``); "" for others."""
    kind = variant.backend.kind if variant.backend is not None else None
    return {BackendKind.CPU: "CPU", BackendKind.CUDA: "CUDA"}.get(kind, "") if kind else ""


def skip_reason(variant: Variant) -> str | None:
    """Why this host cannot load ``variant``'s extension (another arch), else None."""
    here = Arch.host()
    if variant.arch is not None and variant.arch is not here:
        return f"an {variant.arch.value} extension cannot be loaded on this {here.value} host"
    return None


@dataclass(frozen=True)
class DeferredLoad:
    """A dev build's load check left to the tests' interpreter, before pytest in the same
    process: torch imported once, not twice."""

    shared_object: Path
    namespace: str
    log: Path
    record: Path  # the dev build's record of the last shared object that loaded
    digest: str  # this one's sha256: the record's text once it loaded
    package: Path  # the package's Python sources, compiled by that interpreter
    root: Path | None = None  # the project, whose sources a failure's lines name


def recorded_report(record: Path, digest: str) -> LoadReport | None:
    """What the load check found in the shared object of ``digest`` (:func:`record_load`);
    None when it has not loaded (or the record is damaged or an older kernelwheel's)."""
    try:
        first, found, *_ = [*record.read_text().splitlines(), "", ""]
        return LoadReport.read(json.loads(found)) if first == digest else None
    except (OSError, ValueError, AttributeError, TypeError):  # damaged: checked again
        return None


def record_load(record: Path, digest: str, report: LoadReport) -> None:
    """Keep that the shared object of ``digest`` loaded, and what the check found: every run
    reusing it warns again from it until the object changes."""
    atomic_write(record, f"{digest}\n{report.json()}\n")


def then_pytest_command(python: Path, deferred: DeferredLoad, pytest_args: list[str]) -> list[str]:
    """``python`` loading the extension (output to the log), then ``python -m pytest ARGS``."""
    shared_object, namespace, package = deferred.shared_object, deferred.namespace, deferred.package
    program = (python, PROGRAM, "torch+pytest", shared_object, namespace, package, deferred.log)
    return [*map(str, program), *pytest_args]


def deferred_result(deferred: DeferredLoad, code: int, offset: int) -> LoadReport | None:
    """What :func:`then_pytest_command`'s run loaded, from the log past ``offset``; None
    without pytest there; a failed load a :class:`BuildError`."""
    with open(deferred.log, errors="replace") as fh:
        fh.seek(offset)
        output = fh.read()
    for line in reversed(output.splitlines()):
        if line.startswith(MARK):
            found = json.loads(line[len(MARK) :])
            if "missing" in found:
                return None
            return LoadReport.read(found).refuse_syntax(deferred.log, deferred.root)
    message, details, fix = explain_failure(code, output, deferred.namespace, deferred.root)
    raise BuildError(message, log=deferred.log, hint=fix, diagnostics=details)


def check_load(
    python: Path,
    shared_object: Path,
    namespace: str,
    kind: str,
    package: Path,
    log: Path,
    runner: Runner,
    root: Path | None = None,
) -> LoadReport:
    """Import ``shared_object`` with ``python`` (``kind``: ``torch`` or ``tvm-ffi``) and
    compile the Python of ``package``, output to ``log``; a failure a :class:`BuildError`."""
    cmd: list[str | Path] = [python, PROGRAM, kind, shared_object, namespace, package]
    try:
        proc = runner.captured(cmd, timeout=TIMEOUT_S)
    except CommandTimeout:
        raise BuildError(
            f"the load check of {shared_object.name} did not finish in {TIMEOUT_S} s",
            log=log,
            hint="a static initializer in the extension hangs; pass --no-load-check to skip "
            "the check",
        ) from None
    with open(log, "a") as fh:
        fh.write(f"\n$ load check: {python} {PROGRAM.name} {kind} {shared_object}\n")
        fh.write(proc.stdout + proc.stderr)
    if proc.returncode == 0:
        lines = proc.stdout.strip().splitlines()
        return LoadReport.read(json.loads(lines[-1]) if lines else {}).refuse_syntax(log, root)
    message, details, fix = explain_failure(proc.returncode, proc.stderr, namespace, root)
    raise BuildError(message, log=log, hint=fix, diagnostics=details)


def check_syntax(python: Path, package: Path, runner: Runner, root: Path) -> None:
    """Refuse the files of ``package`` that ``python`` cannot compile: the load check's step
    for a dev build whose shared object loaded before and is not loaded again."""
    proc = runner.captured([python, PROGRAM, "syntax", package], timeout=TIMEOUT_S)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        found = json.loads(lines[-1]).get("syntax", [])
        refuse_syntax(found, root, by=" with the build environment's Python")


def explain_failure(
    code: int, stderr: str, namespace: str, root: Path | None = None
) -> tuple[str, tuple[str, ...], str]:
    """What a load check that exited ``code`` with ``stderr`` tells the author: the error line,
    the lines under it (the project's at ``root``, where found) and the fix."""
    how = f"the extension {_how_it_ended(code)} when loaded"
    reason = _reason(stderr)
    if _MISMATCH in reason:
        op = _field(reason, "operator")
        name = _strip_namespace(op, namespace) if op else "an op"
        # torch names each registration block's first line; the line to edit is the op's own
        # ops.def("name(...)") or ops.impl("name", ...) (or ops.def("name(...)", &fn)), found
        # in the project's file.
        lines, defining = [], rf'"\s*{re.escape(name)}\s*\('
        for label, key, own in (
            ("schema", "expected schema", defining),
            (
                "implementation",
                "inferred schema",
                rf'"{re.escape(name)}"|{defining}.*"\s*,\s*[&\w]',
            ),
        ):
            if (value := _field(reason, key)) is None:
                continue
            where = _registered_at(reason, key)
            at = f"  ({_own_line(_strip_namespace(where, namespace), own, root)})" if where else ""
            lines.append(f"  {label:<14} {_strip_namespace(value, namespace)}{at}")
        why = _field(reason, "reason")
        schema = _field(reason, "expected schema")
        wanted = cxx_signature(_strip_namespace(schema, namespace)) if schema else None
        return (
            f"{how}: op {name}: its C++ implementation does not match the schema it was "
            "defined with",
            (*lines, *([f"  {why}"] if why else [])),
            f"give the function the C++ types the schema asks for, {wanted}, or make the "
            f'schema in ops.def("{name}(...)") match the function'
            if wanted
            else f'make the schema in ops.def("{name}(...)") match the implementation\'s '
            "parameters and return type, or fix the function",
        )
    if _KERNELS in reason:
        return _kernels_differ(how, reason, namespace, root)
    text = _strip_namespace(reason, namespace) or "(no message)"
    first, *rest = text.splitlines()
    if (bad := re.search(r"^(.+)\n *~+ <--- HERE$", text, re.MULTILINE)) is not None:
        schema = bad[1].strip()
        # else its start: a schema written as several literals, one per line, is one string
        start = f'"{schema.split("(", 1)[0]}(' if "(" in schema else None
        place = _quoted_in(f'"{schema}"', root) or (start and _quoted_in(start, root))
        where = f" ({place})" if place else ""
        return (
            f"{how}: the op schema {schema!r}{where} does not parse: {first}",
            tuple(f"  {line}" for line in rest),
            "fix that schema in its ops.def(...); torch reads schemas such as "
            '"add(Tensor x, Tensor y, float alpha=1) -> Tensor"; the ~~ marks where it stopped',
        )
    undefined = re.search(r"undefined symbol: (\S+)", reason)
    fix = (
        _undefined_fix(demangle(undefined[1]), root)
        if undefined
        else "fix the error above (the log has the full output); pass --no-load-check to skip "
        "the check"
    )
    return f"{how}: {first}", tuple(f"  {line}" for line in rest), fix


def _kernels_differ(
    how: str, reason: str, namespace: str, root: Path | None
) -> tuple[str, tuple[str, ...], str]:
    """torch's refusal of an op's kernel whose C++ signature is not that of the op's kernel
    registered before it (the schema and the Meta kernel changed, the CUDA one not): the schema
    and each kernel with its own ``ops.def``/``ops.impl`` line."""
    schema = _strip_namespace(_field(reason, "operator") or "", namespace)
    name = schema.split("(", 1)[0] or "an op"

    def at(where: str | None, pattern: str) -> str:
        own = where and _own_line(_strip_namespace(where, namespace), pattern, root)
        return f"  ({own})" if own else ""

    defining, implementing = rf'"\s*{re.escape(name)}\s*\(', rf'"{re.escape(name)}"'
    operator = re.search(r"^\s*operator:.*\n\s*registered at (\S+)", reason, re.MULTILINE)
    lines = [f"  {'schema':<14} {schema}{at(operator and operator[1], defining)}"]
    keys = []
    for sig, key, where in re.findall(
        r"^\s*kernel \d+: (.+)\n\s*dispatch key: (.+)\n\s*(?:registered at (\S+))?",
        reason,
        re.MULTILINE,
    ):
        keys.append("catch-all" if key.strip() == "(none)" else key.strip())  # no key named
        label = f"{keys[-1]} kernel"
        lines.append(f"  {label:<14} {sig.strip()}{at(where, implementing)}")
    wanted = cxx_signature(schema) if "(" in schema else None
    them = f"each kernel of {name} ({', '.join(keys)})"
    return (
        f"{how}: op {name}: its kernels' C++ signatures differ",
        tuple(lines),
        f"give {them} the C++ types the schema asks for, {wanted}"
        if wanted
        else f"give {them} the same C++ parameters and return type",
    )


def _undefined_fix(function: str, root: Path | None) -> str:
    """The fix for an undefined ``function``: an unlisted source of the project that names it
    (its definition left out); else a listed one defining that name (another signature,
    namespace or backend); else the general one."""
    said = f"{function} is declared but not defined in any compiled source"
    name = function.split("(", 1)[0].rsplit("::", 1)[-1]
    unlisted, defined = [], []
    if root is not None and name.isidentifier():
        listed = _listed(root)
        body = re.compile(rf"\b{name}\s*\([^;{{}}]*\)[^;{{}}()]*\{{")  # name(...) ... {
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.suffix not in _SOURCE_SUFFIXES or rel[0] == ".":
                continue
            text = _text(path)
            if path.resolve() not in listed:
                if re.search(rf"\b{name}\s*\(", text):
                    unlisted.append(rel)
            elif found := body.search(text):
                defined.append(f"{rel}:{text.count(chr(10), 0, found.start()) + 1}")
    if unlisted:
        return (
            f"{said}: {', '.join(unlisted)} names it and is in no build.toml src list: add it to "
            "the src of the kernel that calls it"
        )
    if defined:
        return (
            f"{said}: {', '.join(defined)} defines a {name}: make its parameters and "
            "namespace the declaration's, and check that its kernel is compiled for this variant"
        )
    return f"{said}: define it, add its source to build.toml's src, or link the library that has it"


def _how_it_ended(code: int) -> str:
    if code < 0:
        try:
            return f"crashed ({signal.Signals(-code).name})"
        except ValueError:
            return f"crashed (signal {-code})"
    return "failed"


def _reason(stderr: str) -> str:
    """The heart of the child's stderr: a C++ exception's ``what():``, else the last line of a
    Python traceback, else the last lines."""
    what = stderr.find("what():")
    if what >= 0:
        body = stderr[what + len("what():") :]
        body = body.split("Exception raised from", 1)[0]
        # each line's indent kept: a schema error's ~~ marks a column of the line above
        return "\n".join(line.rstrip() for line in body.strip().splitlines() if line.strip())
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if any(line.startswith("Traceback") for line in lines):
        return lines[-1].strip()
    return "\n".join(lines[-5:])


def _field(reason: str, label: str) -> str | None:
    match = re.search(rf"^\s*{re.escape(label)}:\s*(.+)$", reason, re.MULTILINE)
    return match.group(1).strip() if match else None


# The compilers' -ffile-prefix-map names for the project (compile_plan.prefix_maps): torch's
# "registered at FILE:LINE" then names the author's own path.
_PROJECT_PREFIXES = ("/kernelwheel/build/project/", "/kernelwheel/src/")


def _registered_at(reason: str, label: str) -> str | None:
    match = re.search(rf"^\s*{re.escape(label)}:.*\n\s*registered at (\S+)", reason, re.MULTILINE)
    return match.group(1) if match else None


def _own_line(where: str, pattern: str, root: Path | None) -> str:
    """``where`` (FILE:LINE in the project) moved to the first line at or after it, else before
    it, that matches ``pattern``."""
    file, _, line = where.rpartition(":")
    if root is None or not line.isdigit() or Path(file).is_absolute():
        return where
    try:
        text = (root / file).read_text(errors="replace").splitlines()
    except OSError:
        return where
    start = min(int(line) - 1, len(text))
    for number in [*range(start, len(text)), *range(start)]:
        if re.search(pattern, text[number]):
            return f"{file}:{number + 1}"
    return where


def _quoted_in(needle: str, root: Path | None) -> str | None:
    """FILE:LINE of the project's first C++ source line holding ``needle``, or None."""
    if root is None:
        return None
    # the binding's folder first: a project may vendor thousands of headers
    for path in sorted(root.rglob("*"), key=lambda p: (p.parts[len(root.parts)] != "torch-ext", p)):
        if path.suffix not in _CXX_SUFFIXES:
            continue
        for number, line in enumerate(_text(path).splitlines(), 1):
            if needle in line:
                return f"{path.relative_to(root).as_posix()}:{number}"
    return None


def _listed(root: Path) -> set[Path]:
    """Every file a ``src`` list of ``root``'s build.toml names, resolved."""
    try:
        data = parse_toml(_text(root / "build.toml"), file=root / "build.toml")
    except KernelwheelError:
        return set()
    tables, found = [data], set[Path]()
    while tables:
        for key, value in tables.pop().items():
            if isinstance(value, dict):
                tables.append(value)
            elif key == "src" and isinstance(value, list):
                found.update((root / v).resolve() for v in value if isinstance(v, str))
    return found


def _text(path: Path) -> str:
    """A file's text; "" for one that cannot be read: it must not hide the check's own error."""
    try:
        return path.read_text(errors="replace") if path.is_file() else ""
    except OSError:
        return ""


_CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".cu", ".h", ".hpp", ".cuh"})
_SOURCE_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".cu"})  # compile units


def _strip_namespace(text: str, namespace: str) -> str:
    """Op names without the generated namespace, and the project's mapped paths relative."""
    for prefix in _PROJECT_PREFIXES:
        text = text.replace(prefix, "")
    return text.replace(namespace + "::", "")
