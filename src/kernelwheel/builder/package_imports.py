"""The package's imports of its own modules that it no longer holds (``from .packing import
pack`` left after ``packing.py`` was deleted or renamed): the build, the load check and the
wheel pass, and the import of that module (of the package, from its ``__init__.py``) fails with
``ModuleNotFoundError``. kernels-community fla's ``ops/deltaformer/parallel.py`` imports
``...utilslayers.utils``, which the package does not hold."""

from __future__ import annotations

import ast
from pathlib import Path

GENERATED = frozenset({"_ops"})  # what the build writes into the package folder


def missing_module_warnings(package_dir: Path, root: Path) -> list[str]:
    """A warning, with file and line, for each ``from .name import ...`` in the body of a
    module of ``package_dir`` whose module is not there; one under ``try``/``if`` or in a
    function (an optional's, a lazy one's) is left alone, as is ``from . import name``."""
    warnings = []
    for path in sorted(package_dir.rglob("*.py")):
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (SyntaxError, ValueError, OSError):
            continue  # the syntax check names it
        for node in tree.body:
            if not isinstance(node, ast.ImportFrom) or not node.level or not node.module:
                continue
            folder = path.parent
            for _ in range(node.level - 1):
                folder = folder.parent
            if not folder.is_relative_to(package_dir) or _holds(folder, node.module):
                continue
            if folder == package_dir and node.module in GENERATED:
                continue
            rel = path.relative_to(root).as_posix()
            warnings.append(
                f"warning: {rel}:{node.lineno} imports {'.' * node.level}{node.module}, which "
                f"{folder.relative_to(root).as_posix()}/ does not hold (deleted or renamed?): "
                f"importing {rel} fails with ModuleNotFoundError, from the wheel too; mend the "
                "import or bring the module back"
            )
    return warnings


def _holds(folder: Path, dotted: str) -> bool:
    """Whether ``folder`` holds the module ``dotted``: a package or namespace folder, or a file
    ``name.*`` (``.py``, an extension's ``.so``) at each step."""
    *parents, last = dotted.split(".")
    target = folder.joinpath(*parents)
    if not target.is_dir():
        return False
    return any(p.name.split(".")[0] == last for p in target.iterdir() if p.name != "__pycache__")
