"""The layout is the architecture: docs/architecture.md names every module, nothing below the CLI
imports it, the top level stays small, and every subpackage ships in the wheel."""

from __future__ import annotations

import ast
import re
import sys
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
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)/` \|.*$", DOC, re.M)}
    assert sorted(rows) == sorted(p.name for p in _packages())
    for package in _packages():
        for module in sorted(p for p in package.glob("*.py") if p.stem != "__init__"):
            assert f"`{module.stem}`" in rows[package.name], f"{module} missing from its row"
    top = [p.stem for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__")]
    for name in top:
        assert f"`{name}`" in DOC, f"top-level module {name} missing from the page"


def test_at_most_eight_top_level_modules() -> None:
    assert len(list(SRC.glob("*.py"))) <= 8


def test_nothing_below_the_cli_imports_it() -> None:
    offenders = []
    for path in _modules():
        rel = path.relative_to(SRC)
        if rel.parts[0] in ("cli", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = "." * node.level + (node.module or "")
                if re.match(r"(kernelwheel\.|\.+)cli\b", target):
                    offenders.append(f"{rel}: from {target} import ...")
    assert offenders == []


def test_every_subpackage_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    for package in _packages():
        dotted = "kernelwheel." + ".".join(package.relative_to(SRC).parts)
        assert dotted in listed, f"{dotted} would be missing from the wheel"
