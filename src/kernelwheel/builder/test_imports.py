"""What a project's tests import at module level: ``kernelwheel test`` names the modules its test
interpreter cannot import (kernels-community's tests import ``kernels``, which a build
environment never holds) before pytest reports each file's collection error."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# the test interpreter's modules its tests import that it cannot find (run with -c: the project,
# its working folder, leads sys.path)
PROBE = (
    "import importlib.util, sys\n"
    "print(' '.join(n for n in sys.argv[1:] if importlib.util.find_spec(n) is None))"
)


def module_imports(tests: Path) -> dict[str, str]:
    """Each top-level module the files of ``tests`` import unconditionally (in the module's
    body, not under ``try``/``if``) with the first ``FILE:LINE`` importing it; the standard
    library's, relative imports and modules of the project's and the tests' folders left out."""
    found: dict[str, str] = {}
    local = {p.stem for p in tests.parent.iterdir()}  # the project's folder: on pytest's path
    for path in sorted(tests.rglob("*.py")):
        local |= {p.stem for p in path.parent.iterdir()}
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (SyntaxError, ValueError, OSError):
            continue  # pytest says so itself
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                where = f"{path.relative_to(tests.parent)}:{node.lineno}"
                found.setdefault(name.split(".")[0], where)
    skip = local | set(sys.stdlib_module_names) | {"__future__"}
    return {name: where for name, where in found.items() if name not in skip}
