"""Where a kernel repo comes from: the Hugging Face Hub or a local git clone. Both answer the
same questions (refs, the commit a revision names, the files under ``build/`` with the hashes
the source announces, their bytes); everything after that (layout, safety, wheels) is shared."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from .revision import Ref, RefKind
from .safety import Announced

BUILD_DIR = "build"


@dataclass(frozen=True)
class RepoFile:
    """One file under ``build/`` at the resolved commit."""

    path: str  # repo path, e.g. "build/torch27-cxx11-cu128-x86_64-linux/img2gray/_ops.py"
    announced: Announced

    @property
    def variant(self) -> str:
        return self.path.split("/", 2)[1]

    @property
    def inner(self) -> str:
        """The path inside the variant folder."""
        return self.path.split("/", 2)[2]


class FileReader(Protocol):
    """Bytes of fetched files, with what the source announced for each (a clone's LFS file: the
    pointer's oid and size, known once it is read); the caller verifies one against the other."""

    def read(self, file: RepoFile) -> tuple[bytes, Announced]: ...


class RepoSource(Protocol):
    """A kernel repo. ``name`` is the repo's own name (the last part of its id or path)."""

    @property
    def name(self) -> str: ...

    @property
    def where(self) -> str:
        """How messages name the repo: 'Hub repo org/name' or 'git clone /path'."""

    def refs(self) -> Sequence[Ref]:
        """Tags and branches with their commits."""

    def rev_parse(self, revision: str) -> tuple[RefKind, str]:
        """The kind and commit of a branch, tag or commit (for --revision)."""

    def list_build(self, commit: str) -> Sequence[RepoFile]:
        """Every file under build/ at ``commit``; raises HubError when there is no build/."""

    def fetch(self, commit: str, files: Sequence[RepoFile]) -> AbstractContextManager[FileReader]:
        """Make ``files`` readable (downloading them where needed) for the ``with`` block."""


def group_by_variant(files: Sequence[RepoFile]) -> dict[str, list[RepoFile]]:
    """Files by variant folder, sorted; those directly in build/ (a README) are left out."""
    out: dict[str, list[RepoFile]] = {}
    for f in files:
        if f.path.startswith(BUILD_DIR + "/") and f.path.count("/") >= 2:
            out.setdefault(f.variant, []).append(f)
    return dict(sorted(out.items()))
