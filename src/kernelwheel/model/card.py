"""The kernel card: ``CARD.md`` rendered in Jinja's immutable sandbox (a card is untrusted) with
the fields of :class:`CardFields` only, else README.md as it is, else ``data/card.md``. The
package is read with ``ast``, never imported (docs/versions.md#kernel-cards)."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import ProjectError
from .project import CARD_FILES, KernelProject

CARD_TEMPLATE, README = CARD_FILES
BENCHMARK = Path("benchmarks") / "benchmark.py"  # kernel-builder's benchmark pointer
MAX_CARD_CHARS = 1_000_000  # a rendered card longer than this is refused
_MAX_REPEAT = 100_000  # `*` and `**` in a card stay below this (a string repeated, a power)
_DEFAULT = "card.md"  # kernelwheel's own template, in kernelwheel/data


@dataclass(frozen=True)
class CardFields:
    """What a card template may read: kernel-builder's fields and kernelwheel's own."""

    name: str
    package: str
    repo_id: str | None = None
    version: int | None = None
    license: str | None = None
    upstream: str | None = None
    source: str | None = None
    functions: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    has_benchmark: bool = False
    dirty: bool = False

    def context(self) -> dict[str, Any]:
        """The template's variables; a field without a value is left out, so printing it fails."""
        return {
            f.name: list(value) if isinstance(value, tuple) else value
            for f in dataclasses.fields(self)
            if (value := getattr(self, f.name)) is not None
        }


FIELDS = tuple(f.name for f in dataclasses.fields(CardFields))

# Why a field has no value: the hint of an error that prints it.
_MISSING_HINT = {
    "repo_id": 'add repo-id = "<owner>/<kernel>" under [general.hub] in build.toml',
    "version": "give general.version (the API major) in build.toml",
    "license": "add general.license to build.toml",
    "upstream": "add general.upstream to build.toml",
    "source": "add general.source to build.toml",
}


def card_fields(
    project: KernelProject, *, version: int | None = None, dirty: bool = False
) -> CardFields:
    """The fields of ``project``'s card; ``version``: the build's API major (else build.toml's)."""
    all_names = _read_all(project.package_dir / "__init__.py")
    functions = tuple(n for n in all_names if n != "layers")
    layers = _read_layers(project.package_dir) if "layers" in all_names else ()
    return CardFields(
        name=project.name,
        package=project.package,
        repo_id=project.hub.repo_id if project.hub is not None else None,
        version=version if version is not None else project.api_version,
        license=project.license.lower() if project.license else None,
        upstream=project.upstream,
        source=project.source,
        functions=functions,
        layers=layers,
        ops=_declared_ops(project),
        has_benchmark=(project.root / BENCHMARK).is_file(),
        dirty=dirty,
    )


def project_card(project: KernelProject, fields: CardFields) -> str:
    """The project's card: CARD.md rendered, else README.md as it is, else the generated one."""
    template = project.root / CARD_TEMPLATE
    if template.is_file():
        return render_card(_read_text(template, project.root), fields, template)
    readme = project.root / README
    if readme.is_file():
        return _read_text(readme, project.root)
    return render_card(default_template(), fields, None)


def default_template() -> str:
    return resources.files("kernelwheel").joinpath("data").joinpath(_DEFAULT).read_text("utf-8")


def render_card(template: str, fields: CardFields, file: Path | None) -> str:
    """``template`` rendered with ``fields`` in the sandbox; ``file`` names it in errors."""
    where = file if file is not None else Path(f"kernelwheel/data/{_DEFAULT}")
    env = _environment(template, where)
    try:
        _check_names(env, template, where)
        out: list[str] = []
        size = 0
        for chunk in env.get_template(where.name).generate(fields.context()):
            size += len(chunk)
            if size > MAX_CARD_CHARS:
                raise ProjectError(
                    f"the rendered card is longer than {MAX_CARD_CHARS} characters",
                    file=where,
                    hint="a card is a page of Markdown: shorten the template or its loops",
                )
            out.append(chunk)
        return "".join(out)
    except jinja2.TemplateSyntaxError as exc:
        hint = "fix the Jinja syntax at that line"
        raise _error(where, exc.lineno, f"template syntax: {exc.message}", hint) from None
    except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError) as exc:
        raise _render_error(where, exc) from None


def strip_front_matter(text: str) -> str:
    """``text`` without its YAML front matter: the Hub's metadata, text in a wheel's description."""
    match = re.match(r"\A---[ \t]*\r?\n.*?^---[ \t]*(\r?\n|\Z)", text, re.S | re.M)
    return text[match.end() :].lstrip("\r\n") if match else text


class _Undefined(jinja2.StrictUndefined):
    """Using a missing value fails, naming it; only a test (``{% if upstream %}``) reads it."""

    __slots__ = ()

    def __bool__(self) -> bool:  # type: ignore[override]  # a test, not a failure
        return False


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with ``*`` and ``**`` bounded: ``'x' * 10**9`` fills no memory."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise jinja2.exceptions.SecurityError(f"the power {right} is too large")
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(count, int):
                    if len(seq) * count > _MAX_REPEAT:
                        raise jinja2.exceptions.SecurityError(
                            f"a repetition longer than {_MAX_REPEAT} items"
                        )
        return super().call_binop(context, operator, left, right)


def _environment(template: str, where: Path) -> _Sandbox:
    def load(_name: str) -> tuple[str, str, Any]:
        return template, str(where), lambda: True

    # trim_blocks as kernel-builder renders (a block tag's own newline is dropped); no HTML
    # escaping: the output is Markdown.
    return _Sandbox(
        loader=jinja2.FunctionLoader(load),
        undefined=_Undefined,
        trim_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _check_names(env: _Sandbox, template: str, where: Path) -> None:
    """Every name the template reads is a field (a typo would otherwise read as false)."""
    tree = env.parse(template)
    unknown = meta.find_undeclared_variables(tree).difference(FIELDS)
    if not unknown:
        return
    first = min(
        (n for n in tree.find_all(nodes.Name) if n.name in unknown and n.ctx == "load"),
        key=lambda n: n.lineno,
    )
    close = difflib.get_close_matches(first.name, FIELDS, n=1)
    raise _error(
        where,
        first.lineno,
        f"{first.name!r} is not a card field",
        (f"did you mean {close[0]!r}? " if close else "") + f"the fields are {', '.join(FIELDS)}",
    )


def _render_error(where: Path, exc: Exception) -> ProjectError:
    line = _line(exc.__traceback__, where)
    if isinstance(exc, jinja2.exceptions.SecurityError):
        hint = "a card may print its fields (docs/versions.md#kernel-cards), nothing else"
        return _error(where, line, f"refused by the sandbox: {exc}", hint)
    if not isinstance(exc, jinja2.UndefinedError):
        return _error(where, line, f"cannot render: {exc}", "fix the template at that line")
    name = re.match(r"'(\w+)' is undefined", exc.message or "")
    if name and name.group(1) in _MISSING_HINT:
        field = name.group(1)
        return _error(
            where,
            line,
            f"{field} has no value for this project",
            f"{_MISSING_HINT[field]}, or print it only inside {{% if {field} %}}",
        )
    return _error(
        where, line, f"cannot render: {exc.message}", "guard the expression with {% if ... %}"
    )


def _error(where: Path, line: int | None, message: str, hint: str) -> ProjectError:
    at = f"line {line}: " if line else ""
    return ProjectError(f"{at}{message}", file=where, hint=hint)


def _line(tb: TracebackType | None, where: Path) -> int | None:
    """The template's line in a rendering traceback (Jinja rewrites it to name the template)."""
    found = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(where):
            found = tb.tb_lineno
        tb = tb.tb_next
    return found


def _read_text(path: Path, root: Path) -> str:
    if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
        raise ProjectError(
            "a symlink pointing outside the project",
            file=path,
            hint="copy the file into the project instead",
        )
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProjectError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=path,
            hint="save it as UTF-8: it becomes the wheels' description and the Hub's card",
        ) from None
    except OSError as exc:
        raise ProjectError(
            f"cannot read it ({exc.strerror or exc})", file=path, hint="check its permissions"
        ) from None


def _parse(path: Path) -> ast.Module | None:
    """A Python file, parsed; None when missing or broken (the import reports that)."""
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _read_all(init: Path) -> tuple[str, ...]:
    """The string literals of the package's ``__all__ = [...]`` (or a tuple), in order."""
    tree = _parse(init)
    if tree is None:
        return ()
    for stmt in tree.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        named = any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
        if named and isinstance(value, (ast.List, ast.Tuple)):
            literals = (e.value for e in value.elts if isinstance(e, ast.Constant))
            return tuple(literal for literal in literals if isinstance(literal, str))
    return ()


def _read_layers(package_dir: Path) -> tuple[str, ...]:
    """The classes a ``layers`` package or module of the package defines at its top level."""
    for path in (package_dir / "layers" / "__init__.py", package_dir / "layers.py"):
        tree = _parse(path)
        if tree is not None:
            return tuple(s.name for s in tree.body if isinstance(s, ast.ClassDef))
    return ()


# ops.def("name(Tensor x) -> Tensor") in a binding: the schema string literal (adjacent
# literals joined, as C++ joins them).
_OPS_DEF = re.compile(r'\.def\s*\(\s*((?:"(?:[^"\\\n]|\\.)*"\s*)+)[,)]')
_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def _declared_ops(project: KernelProject) -> tuple[str, ...]:
    """The op schemas the binding's sources declare (``ops.def("...")``), in order."""
    sources = project.torch.src if project.torch is not None else ()
    found: dict[str, None] = {}
    for path in sources:
        if path.suffix not in (".cpp", ".cc", ".cxx", ".h", ".hpp"):
            continue
        try:
            text = (project.root / path).read_text("utf-8", errors="replace")
        except OSError:
            continue
        for match in _OPS_DEF.finditer(text):
            schema = "".join(_LITERAL.findall(match.group(1)))
            if "(" in schema:
                found[schema] = None
    return tuple(found)
