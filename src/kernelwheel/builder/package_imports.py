"""The package's imports of its own modules that it no longer holds (``from .packing import
pack`` left after ``packing.py`` was deleted or renamed): the build, the load check and the
wheel pass, and the import of that module (of the package, from its ``__init__.py``) fails with
``ModuleNotFoundError``. kernels-community fla's ``ops/deltaformer/parallel.py`` imports
``...utilslayers.utils``, which the package does not hold."""

from __future__ import annotations

import re
from pathlib import Path

GENERATED = frozenset({"_ops"})  # what the build writes into the package folder


# a relative import of a named module in a module's body: at the line's start (one under
# ``try``/``if`` or in a function is indented); read as text, not parsed (a package of
# hundreds of files is read on every ``dev`` run)
_RELATIVE = re.compile(rb"^from[ \t]+(\.+)[ \t]*([A-Za-z_][\w.]*)[ \t]+import\b", re.M)


def missing_module_warnings(package_dir: Path, root: Path) -> list[str]:
    """A warning, with file and line, for each ``from .name import ...`` in the body of a
    module of ``package_dir`` whose module is not there; one under ``try``/``if`` or in a
    function (an optional's, a lazy one's) is left alone, as is ``from . import name``."""
    warnings = []
    for path in sorted(package_dir.rglob("*.py")):
        try:
            text = path.read_bytes()
        except OSError:
            continue
        for found in _RELATIVE.finditer(text):
            dots, module = found[1].decode(), found[2].decode()
            folder = path.parent
            for _ in range(len(dots) - 1):
                folder = folder.parent
            if not folder.is_relative_to(package_dir) or _holds(folder, module):
                continue
            if folder == package_dir and module in GENERATED:
                continue
            rel = path.relative_to(root).as_posix()
            line = text.count(b"\n", 0, found.start()) + 1
            warnings.append(
                f"warning: {rel}:{line} imports {dots}{module}, which "
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
