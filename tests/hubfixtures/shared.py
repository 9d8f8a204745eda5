"""Session-wide helpers for the Hub tests (imported by each test module)."""

from __future__ import annotations

from pathlib import Path

import pytest


def so_dir(factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the whole session, shared by every module."""
    path = factory.getbasetemp() / "hub-so-cache"
    path.mkdir(exist_ok=True)
    return path


def wheels_in(folder: Path) -> list[str]:
    if not folder.exists():
        return []
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".whl")


def leftovers(folder: Path) -> list[str]:
    """Anything in an output folder that is not a finished wheel."""
    return sorted(p.name for p in folder.iterdir() if p.suffix != ".whl") if folder.exists() else []
