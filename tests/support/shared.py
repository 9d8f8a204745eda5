"""Session-wide helpers for the Hub tests (imported by each test module)."""

from __future__ import annotations

from pathlib import Path

from .gitrepo import HubRepo, variant_files
from .variants import HUB_NESTED, TORCH214_CU130


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
        TORCH214_CU130,
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


class LockWorld:
    """Two kernel repositories as local git clones under ``root``, for lock and download: img2gray
    in the nested layout, one commit per release tag (``annotated`` ones as annotated tags), and
    relu in the flat layout on branch v1; plus a wheelhouse path and projects that depend on
    them."""

    def __init__(
        self, root: Path, so_cache: Path, tags: tuple[str, ...], annotated: tuple[str, ...] = ()
    ) -> None:
        self.root = root
        self.so_cache = so_cache
        self.legacy = HubRepo(root / "img2gray")
        for tag in tags:
            self.legacy.set_variants(
                variant_files(v, so_cache=so_cache, salt=tag) for v in HUB_NESTED
            )
            self.legacy.commit(tag)
            self.legacy.tag(tag, annotated=tag in annotated)
        self.relu = HubRepo(root / "relu")
        self.relu_commit = move_relu(self.relu, so_cache, "1.4.0")
        self.house = root / "wheelhouse"

    def project(self, name: str, deps: str) -> Path:
        """A project ``name`` whose pyproject.toml declares ``deps``."""
        project = self.root / name
        project.mkdir()
        (project / "pyproject.toml").write_text('[project]\nname = "app"\n\n' + deps)
        return project
