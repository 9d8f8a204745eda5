"""Session-wide helpers for the Hub tests (imported by each test module)."""

from __future__ import annotations

from pathlib import Path

from .gitrepo import HubRepo, variant_files


def wheels_in(folder: Path) -> list[str]:
    if not folder.exists():
        return []
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".whl")


def leftovers(folder: Path) -> list[str]:
    """Anything in an output folder that is not a finished wheel (or the command's logs/)."""
    if not folder.exists():
        return []

    def is_log_folder(p: Path) -> bool:
        return p.name == "logs" and p.is_dir() and all(f.suffix == ".log" for f in p.iterdir())

    return sorted(p.name for p in folder.iterdir() if p.suffix != ".whl" and not is_log_folder(p))


def move_relu(repo: HubRepo, so_cache: Path, version: str) -> str:
    """Build relu ``version`` (flat layout, torch 2.14 cu130) and move branch v1 onto it."""
    meta = {"name": "relu", "version": version, "python-depends": []}
    files = variant_files(
        "torch214-cxx11-cu130-x86_64-linux",
        layout="flat",
        package="relu",
        so_cache=so_cache,
        metadata=meta,
        salt=version,
    )
    repo.set_variants([files])
    commit = repo.commit(f"build {version}")
    repo.branch("v1", commit)
    return commit
