"""The layout is the architecture: docs/architecture.md names every module, nothing below the CLI
imports it, the top level stays small, and every subpackage ships in the wheel."""

from __future__ import annotations

import ast
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "kernelwheel"
DOC = (REPO / "docs" / "architecture.md").read_text()


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _packages() -> list[Path]:
    return sorted(p.parent for p in SRC.rglob("__init__.py") if p.parent != SRC)


def test_every_package_and_module_is_on_the_architecture_page() -> None:
    # each package's heading and its bullets, up to the next heading
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^### `(\w+)/`.*?(?=^##)", DOC + "\n##", re.M | re.S)
    }
    assert sorted(rows) == sorted(p.name for p in _packages())
    for package in _packages():
        for module in sorted(p for p in package.glob("*.py") if p.stem != "__init__"):
            assert f"`{module.stem}`" in rows[package.name], f"{module} missing from its row"
    top = [p.stem for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__")]
    for name in top:
        assert f"`{name}`" in DOC, f"top-level module {name} missing from the page"


def test_at_most_eight_top_level_modules() -> None:
    assert len(list(SRC.glob("*.py"))) <= 8


# --- layers: the import graph, lazy imports included ------------------------------------------

TOP = "top level"


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (dotted module names under kernelwheel) at ``where``."""

    source: str
    target: str
    where: str


def _dotted(src: Path, path: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(("kernelwheel", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _is_module(src: Path, dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (src / rel).with_suffix(".py").is_file() or (src / rel / "__init__.py").is_file()


def import_graph(src: Path) -> list[Edge]:
    """Every import of a kernelwheel module by a kernelwheel module: each Import/ImportFrom node
    anywhere in the tree, so imports inside functions and ``if TYPE_CHECKING`` count."""
    edges = []
    for path in sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts):
        source = _dotted(src, path)
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(src)}:{getattr(node, 'lineno', 0)}"
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:  # ``from pkg import module`` imports the module
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if _is_module(src, sub) else base)
            edges += [Edge(source, t, where) for t in targets if t.split(".")[0] == "kernelwheel"]
    return edges


def unit(dotted: str) -> str:
    """The package a module belongs to; a top-level module is a unit of its own (``__main__``,
    the entry point, belongs to the CLI)."""
    parts = dotted.split(".")[1:]
    if not parts:
        return "__init__"
    if parts[0] == "__main__":
        return "cli"
    return parts[0]


def layer(name: str, packages: set[str]) -> str:
    return name if name in packages else TOP


def upward_imports(edges: list[Edge], order: list[str]) -> list[str]:
    """The imports of a layer above: ``order`` lists the layers top to bottom (the packages, then
    "top level" for the modules directly under kernelwheel)."""
    packages = set(order) - {TOP}
    rank = {name: index for index, name in enumerate(order)}
    found = []
    for edge in edges:
        source = layer(unit(edge.source), packages)
        target = layer(unit(edge.target), packages)
        if rank[target] < rank[source]:
            found.append(f"{edge.where}: {source} imports {edge.target} ({target} is above it)")
    return found


def package_cycles(edges: list[Edge]) -> list[list[str]]:
    """The cycles between units (packages, top-level modules): strongly connected components of
    more than one unit, each sorted."""
    return cycles(edges, unit)


def module_cycles(edges: list[Edge]) -> list[list[str]]:
    """The cycles between modules, inside a package too (``pipeline`` importing ``tvm_ffi``
    lazily while ``tvm_ffi`` imports ``pipeline``), lazy imports included."""
    return cycles(edges, lambda dotted: dotted)


def cycles(edges: list[Edge], unit: Callable[[str], str]) -> list[list[str]]:
    """The strongly connected components of more than one node of the graph of ``unit``s."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        a, b = unit(edge.source), unit(edge.target)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if a != b:
            graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:  # Tarjan
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def documented_order(doc: str) -> list[str]:
    """The layers in the order of the page's headings, top to bottom."""
    return [m.group(1) or TOP for m in re.finditer(r"^### (?:`(\w+)/`|top level):", doc, re.M)]


ORDER = documented_order(DOC)


def test_the_page_orders_every_package_and_the_top_level() -> None:
    assert ORDER[0] == "cli" and ORDER[-1] == TOP
    assert sorted(ORDER) == sorted([*(p.name for p in _packages()), TOP])


@cache
def _graph() -> list[Edge]:
    return import_graph(SRC)


def test_no_package_imports_one_above_it() -> None:
    assert upward_imports(_graph(), ORDER) == []


def test_no_cycles_between_packages() -> None:
    assert package_cycles(_graph()) == []


def test_no_cycles_between_modules() -> None:
    assert module_cycles(_graph()) == []


def test_a_cycle_inside_a_package_is_caught() -> None:
    edges = [
        Edge("kernelwheel.builder.pipeline", "kernelwheel.builder.tvm_ffi", "pipeline.py:9"),
        Edge("kernelwheel.builder.tvm_ffi", "kernelwheel.builder.pipeline", "tvm_ffi.py:5"),
        Edge("kernelwheel.builder.tvm_ffi", "kernelwheel.builder.steps", "tvm_ffi.py:6"),
    ]
    assert package_cycles(edges) == []
    assert module_cycles(edges) == [["kernelwheel.builder.pipeline", "kernelwheel.builder.tvm_ffi"]]


def test_a_planted_upward_import_is_caught(tmp_path: Path) -> None:
    """A lazy import of the builder from the model, planted in a copy of the tree: it is an
    upward import and, with the builder's imports of the model, a cycle."""
    copy = tmp_path / "kernelwheel"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    variant = copy / "model" / "variant.py"
    lines = variant.read_text().count("\n")
    variant.write_text(
        variant.read_text() + "\n\ndef _planted() -> None:\n    from ..builder import codegen\n"
    )
    edges = import_graph(copy)
    assert upward_imports(edges, ORDER) == [
        f"model/variant.py:{lines + 4}: model imports kernelwheel.builder.codegen "
        "(builder is above it)"
    ]
    assert [c for c in package_cycles(edges) if {"builder", "model"} <= set(c)] != []


def test_a_cycle_among_top_level_modules_is_caught() -> None:
    edges = [
        Edge("kernelwheel.errors", "kernelwheel._util", "errors.py:1"),
        Edge("kernelwheel._util", "kernelwheel.errors", "_util.py:1"),
        Edge("kernelwheel.model.variant", "kernelwheel.errors", "model/variant.py:1"),
    ]
    assert package_cycles(edges) == [["_util", "errors"]]
    assert upward_imports(edges, ["model", TOP]) == []
    assert upward_imports(edges, [TOP, "model"]) == [
        "model/variant.py:1: model imports kernelwheel.errors (top level is above it)"
    ]


# --- one process runner ---------------------------------------------------------------------

RUNNER = "_util.py"
# compile/_compile_worker.py is a program of its own, run inside the build environment (stdlib,
# setuptools and torch only): it cannot import kernelwheel, and kernelwheel runs it through the
# runner.
OWN_PROGRAMS = {"compile/_compile_worker.py"}
PROCESS_MODULES = {"subprocess", "multiprocessing", "pty", "asyncio.subprocess"}


# The runner's primitives: the rest of kernelwheel is given a Runner and calls its methods, so a
# runner passed in sees every command.
PRIMITIVES = {"run_logged", "run_captured", "run_attached", "spawn_piped"}


def process_imports(src: Path) -> list[str]:
    """Where a module other than the runner imports a module that starts processes, or the
    runner's primitives instead of being given a Runner."""
    found = []
    for path in sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts):
        rel = path.relative_to(src).as_posix()
        if rel == RUNNER or rel in OWN_PROGRAMS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_util"):
                names = [alias.name for alias in node.names if alias.name in PRIMITIVES]
                found += [f"{rel}:{node.lineno}: imports _util.{n}" for n in names]
                continue
            found += [f"{rel}:{node.lineno}: imports {n}" for n in names if n in PROCESS_MODULES]
        calls = re.finditer(r"\bos\.(system|popen|exec\w*|spawn\w*)\(", path.read_text())
        found += [f"{rel}: calls os.{m[1]}" for m in calls]
    return found


def test_every_process_goes_through_the_runner() -> None:
    """So an interrupt stops every command kernelwheel started (_util.stop_running)."""
    assert process_imports(SRC) == []


def _planted(tmp_path: Path, rel: str, code: str) -> tuple[list[str], int]:
    """process_imports of a copy of the package with ``code`` appended to ``rel``, and the
    appended code's last line."""
    copy = tmp_path / "kernelwheel"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    probe = copy / rel
    probe.write_text(probe.read_text() + code)
    return process_imports(copy), probe.read_text().count("\n")


def test_a_planted_subprocess_call_is_caught(tmp_path: Path) -> None:
    code = "\n\ndef _planted() -> None:\n    import subprocess\n"
    found, line = _planted(tmp_path, "toolchain/envs.py", code)
    assert found == [f"toolchain/envs.py:{line}: imports subprocess"]


def test_a_planted_primitive_import_is_caught(tmp_path: Path) -> None:
    code = "\n\nfrom .._util import run_captured as _rc\n"
    found, line = _planted(tmp_path, "hub/gitsource.py", code)
    assert found == [f"hub/gitsource.py:{line}: imports _util.run_captured"]


def test_every_subpackage_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    for package in _packages():
        dotted = "kernelwheel." + ".".join(package.relative_to(SRC).parts)
        assert dotted in listed, f"{dotted} would be missing from the wheel"


def zip_writers(root: Path) -> list[str]:
    """Where a module other than wheels/writer opens a zip archive for writing (``"w"``,
    ``"a"`` or ``"x"`` mode, found with ast): every wheel is made or changed by that module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "wheels/writer.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("ZipFile")):
                continue
            modes = [a for a in node.args[1:2]] + [
                k.value for k in node.keywords if k.arg == "mode"
            ]
            if any(isinstance(m, ast.Constant) and m.value in ("w", "a", "x") for m in modes):
                found.append(f"{rel}:{node.lineno}")
    return found


def test_one_module_writes_wheel_archives(tmp_path: Path) -> None:
    assert zip_writers(SRC) == []
    copy = tmp_path / "kernelwheel"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    planted = copy / "wheels" / "variants.py"
    planted.write_text(planted.read_text() + "\n\ndef _w(p):\n    zipfile.ZipFile(p, 'w')\n")
    assert zip_writers(copy) == [f"wheels/variants.py:{planted.read_text().count(chr(10))}"]
