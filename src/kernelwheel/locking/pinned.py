"""A kernel repo seen at one commit, for the to-wheel machinery: its only ref is the locked tag
or branch at the locked commit (wherever the real ref has moved since), and every file the
conversion reads passes a hook that records its sha256 (``lock``) or checks it (``download``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..hub.revision import Ref, RefKind, RequestKind, VersionRequest
from ..hub.safety import Announced
from ..hub.source import FileReader, RepoFile, RepoSource

__all__ = ["FileHook", "PinnedSource"]

# Called with (file, sha256 of its content) before the conversion uses the file; raises to stop.
FileHook = Callable[[RepoFile, str], None]


def ref_kind(request: VersionRequest) -> RefKind:
    """The kind of ref a request resolves to: a branch for a major version, else a tag."""
    return RefKind.BRANCH if request.kind is RequestKind.MAJOR else RefKind.TAG


@dataclass(frozen=True)
class PinnedSource:
    inner: RepoSource
    name: str  # the name the wheels are derived from (the Hub repo id's second part)
    ref: str
    kind: RefKind
    commit: str
    hook: FileHook

    @property
    def where(self) -> str:
        return self.inner.where

    def refs(self) -> Sequence[Ref]:
        return [Ref(self.ref, self.kind, self.commit)]

    def rev_parse(self, revision: str) -> tuple[RefKind, str]:
        return self.inner.rev_parse(revision)

    def list_build(self, commit: str) -> Sequence[RepoFile]:
        return self.inner.list_build(commit)

    @contextmanager
    def fetch(self, commit: str, files: Sequence[RepoFile]) -> Iterator[FileReader]:
        with self.inner.fetch(commit, files) as reader:
            yield _HookedReader(reader, self.hook)


class _HookedReader:
    def __init__(self, inner: FileReader, hook: FileHook) -> None:
        self.inner = inner
        self.hook = hook

    def read(self, file: RepoFile) -> tuple[bytes, Announced]:
        data, announced = self.inner.read(file)
        self.hook(file, hashlib.sha256(data).hexdigest())
        return data, announced
