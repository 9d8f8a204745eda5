"""A git repository's state at one moment (:class:`GitState`): HEAD's commit, whether tracked
files had changes, and the ``v*`` tags on HEAD. One type for what a build reads of its project
(the version, the Hub export's provenance) and for the provenance records of a Hub variant's
metadata.json (``{commit, dirty}``), with its one parser and formatter."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# A full commit id: SHA-1 or SHA-256, lowercase.
OBJECT_ID = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})")


@dataclass(frozen=True)
class GitState:
    """HEAD's ``commit`` (a full lowercase id), whether tracked files had changes (untracked
    files do not count, as in kernel-builder's provenance), and the ``v*`` tags on HEAD when
    the repository is the project's own (its top folder is the project root)."""

    commit: str
    dirty: bool
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not OBJECT_ID.fullmatch(self.commit):
            raise ValueError(f"{self.commit!r} is not a full lowercase commit id")

    @classmethod
    def parse(cls, value: Mapping[str, Any]) -> GitState:
        """A provenance record ``{commit, dirty}`` (``sha`` is the older spelling of
        ``commit``; upper-case hex is accepted); ValueError saying what is wrong."""
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
        """The provenance record: ``{commit, dirty}`` (the tags are the build's own)."""
        return {"commit": self.commit, "dirty": self.dirty}
