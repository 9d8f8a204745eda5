"""A git repository's state: what a build reads of its project and the provenance record of a
Hub variant's metadata.json (``{commit, dirty}``), with its one parser and formatter."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# A full commit id: SHA-1 or SHA-256, lowercase.
OBJECT_ID = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})")


@dataclass(frozen=True)
class GitState:
    """HEAD's full commit id, whether tracked files had changes (untracked ones do not count, as
    in kernel-builder), and the ``v*`` tags on HEAD when the repository is the project's own."""

    commit: str
    dirty: bool
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not OBJECT_ID.fullmatch(self.commit):
            raise ValueError(f"{self.commit!r} is not a full lowercase commit id")

    @classmethod
    def parse(cls, value: Mapping[str, Any]) -> GitState:
        """A provenance record (``sha``: the older spelling of ``commit``); else ValueError."""
        commit = value.get("commit", value.get("sha"))
        dirty = value.get("dirty")
        if isinstance(commit, str) and isinstance(dirty, bool):
            if OBJECT_ID.fullmatch(commit.lower()):
                return cls(commit.lower(), dirty)
        raise ValueError(
            f"{{commit: {commit!r}, dirty: {dirty!r}}}: a full commit id (40 or 64 hex digits) "
            "and a boolean go together"
        )

    def to_dict(self) -> dict[str, object]:
        return {"commit": self.commit, "dirty": self.dirty}
