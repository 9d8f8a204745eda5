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

# Called with (file, sha256 of its content) before the conversion uses the file; raises to stop.
FileHook = Callable[[RepoFile, str], None]


@dataclass(frozen=True)
class PinnedSource:
    inner: RepoSource
    repo: str  # the Hub repo id: the wheels' name is derived from its second part
    ref: str
    request: VersionRequest  # ref's origin: a major version is a branch, any other a tag
    commit: str
    hook: FileHook

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]

    @property
    def where(self) -> str:
        return self.inner.where

    def refs(self) -> Sequence[Ref]:
        kind = RefKind.BRANCH if self.request.kind is RequestKind.MAJOR else RefKind.TAG
        return [Ref(self.ref, kind, self.commit)]

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
