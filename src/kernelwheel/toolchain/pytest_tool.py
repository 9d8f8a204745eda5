"""The pytest ``kernelwheel test`` brings where the tests' interpreter has none:
recipes/pytest.toml's hashed wheels, installed once by that interpreter's pip (or ``pip --python``)
into ``<cache>/tools/pytest-<digest>/``, never into the environment, and put on PYTHONPATH."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .._util import RUNNER, Runner
from ..model.sources import PipSources
from .envs import made_once


def provision_pytest(
    python: Path,
    cache_dir: Path,
    requirements: Sequence[str],
    sources: PipSources,
    runner: Runner = RUNNER,
) -> Path:
    """The folder holding pytest for ``python``, made once under a lock; one per base
    interpreter (a venv's python resolves to it), as the requirements' markers are its."""
    key = "\n".join([os.path.realpath(python), *requirements])
    root = cache_dir / "tools" / f"pytest-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    listed = "\n".join(requirements) + "\n"

    def install() -> None:
        reqs = root / "kernelwheel-requirements.txt"
        reqs.write_text(listed)
        pip: list[str | Path] = [python, "-m", "pip"]
        if runner.captured([python, "-c", "import pip"]).returncode:  # made without pip
            pip = [sys.executable, "-m", "pip", "--python", python]
        runner.checked(
            [*pip, "install", "--no-input", "--no-deps", "--target", root,
             "--only-binary=:all:", "--require-hashes", *sources.pip_args(), "-r", reqs],
            None,
            "install pytest for the tests (into kernelwheel's cache, not the environment)",
            hint=f"check the index/find-links options, or install pytest into {python} (or "
            "activate a virtual environment holding torch and pytest, or pass --python PY)",
        )  # fmt: skip

    made_once(root, install, listed)
    return root
