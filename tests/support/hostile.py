"""An outer checkout whose pytest configuration no kernel project's tests could run under: a
plugin that does not exist, every warning an error, other test paths, and a conftest.py that
leaves a mark when it is imported. A project made inside it must bring its own configuration."""

from __future__ import annotations

from pathlib import Path

PYPROJECT = """\
[tool.pytest.ini_options]
addopts = "-p no_such_plugin_of_the_outer_checkout --strict-markers"
testpaths = ["elsewhere"]
filterwarnings = ["error"]
"""
CONFTEST = """\
from pathlib import Path
Path(__file__).with_name("outer-conftest-ran").write_text("it ran")
raise RuntimeError("the outer checkout's conftest.py was imported")
"""
MARK = "outer-conftest-ran"  # written beside the conftest.py if pytest ever imports it


def hostile_checkout(folder: Path) -> Path:
    """``folder`` made such a checkout (its pyproject.toml and conftest.py); ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (folder / "conftest.py").write_text(CONFTEST)
    return folder
