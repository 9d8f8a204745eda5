"""kernelwheel test names the modules its tests import that the test interpreter lacks
(kernels-community's tests import ``kernels``; a build environment holds torch alone), before
pytest's collection errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernelwheel.builder.test_imports import PROBE, module_imports


def test_the_tests_module_level_imports_are_named_with_their_line(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "kernels").mkdir(parents=True)
    (tests / "__init__.py").write_text("")
    (tests / "utils.py").write_text("import numpy_not_here_kw\n")
    (tests / "kernels" / "test_op.py").write_text(
        "import os, math\n"
        "import pytest\n"
        "from . import helpers\n"
        "from .utils import x\n"
        "from tests.utils import y\n"  # the project's own folder, on pytest's path
        "import utils\n"
        "from kernels_not_here_kw.layers import Layer\n"
        "try:\n    import optional_not_here_kw\nexcept ImportError:\n    pass\n"
        "def test_it():\n    import inner_not_here_kw\n"
    )
    (tests / "kernels" / "helpers.py").write_text("x = 1\n")
    found = module_imports(tests)
    assert found == {
        "numpy_not_here_kw": "tests/utils.py:1",
        "pytest": "tests/kernels/test_op.py:2",
        "kernels_not_here_kw": "tests/kernels/test_op.py:7",
    }
    # what the test interpreter cannot find, run as kernelwheel test runs it (in the project)
    probe = [sys.executable, "-c", PROBE, *sorted(found)]
    ran = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert ran.stdout.split() == ["kernels_not_here_kw", "numpy_not_here_kw"]


def test_a_file_python_cannot_parse_is_left_to_pytest(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_bad.py").write_text("import kernels\ndef broken(:\n")
    assert module_imports(tmp_path / "tests") == {}
