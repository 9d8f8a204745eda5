"""A kernel repo cloned with git: refs, trees and blobs read from the object store at the
resolved commit (never from the working tree, which may be dirty or checked out elsewhere). LFS
objects come from ``<git dir>/lfs/objects``; symlinks are followed inside the repo only."""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, closing
from pathlib import Path
from typing import NamedTuple

from .._util import RUNNER, Runner, release
from ..errors import HubError
from .revision import Ref, RefKind, find_ref
from .safety import Announced, LfsPointer, check_repo_path, verify
from .source import BUILD_DIR, FileReader, RepoFile

_MODE_LINK = "120000"
_MODE_SUBMODULE = "160000"
_MAX_LINK_HOPS = 16


class _NotTrusted(HubError):
    """git's safe.directory refusal: the folder is a clone, just not one git will read."""


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_MISSING_OBJECT = ("not a tree object", "bad object", "Not a valid object name", "unknown revision")


class _Entry(NamedTuple):
    mode: str
    type: str
    oid: str
    path: str


class GitSource:
    """A local git clone (or bare repository) holding a Hub kernel repo."""

    def __init__(self, path: Path, runner: Runner = RUNNER) -> None:
        self.path = path.resolve()
        self.runner = runner
        if not self.path.is_dir():
            raise HubError(f"{path} is not a folder", hint="pass a git clone or a Hub repo id")
        try:
            git_dir = self._git("rev-parse", "--git-common-dir").decode().strip()
        except _NotTrusted:
            raise
        except HubError:
            raise HubError(
                f"{path} is a folder but not a git clone",
                hint="clone the kernel repo with git, or pass its Hub id (org/name)",
            ) from None
        common = Path(git_dir)
        self.git_dir = common if common.is_absolute() else (self.path / common).resolve()

    @property
    def name(self) -> str:
        return self.path.name.removesuffix(".git")

    @property
    def where(self) -> str:
        return f"git clone {self.path}"

    def _git(self, *args: str) -> bytes:
        """``git -C <clone> args``' output, through this source's runner."""
        repo = self.path
        try:
            proc = self.runner.captured_bytes(["git", "-C", str(repo), *args])
        except FileNotFoundError:
            raise HubError(
                "git is not installed", hint="install git to convert a local clone"
            ) from None
        if proc.returncode != 0:
            stderr = proc.stderr.decode(errors="replace").strip()
            if "dubious ownership" in stderr or "safe.directory" in stderr:
                raise _NotTrusted(
                    f"git refuses to read {repo}: the clone is owned by another user (git's "
                    "safe.directory check)",
                    hint=f"if you trust it, run 'git config --global --add safe.directory "
                    f"{repo}', or clone it again as yourself",
                )
            missing = [a for a in args if _OBJECT_ID.fullmatch(a)]
            if missing and any(m in stderr for m in _MISSING_OBJECT):
                raise HubError(
                    f"git clone {repo}: commit {missing[0]} is not in this clone ({stderr})",
                    hint=f"fetch it: 'git -C {repo} fetch --all --tags' (a shallow clone needs "
                    "'--unshallow'); if the commit is gone upstream, pin another revision",
                )
            raise HubError(
                f"git clone {repo}: 'git {' '.join(args)}' failed: {stderr}",
                hint="check that the folder is a git clone of a kernel repo",
            )
        return proc.stdout

    def refs(self) -> Sequence[Ref]:
        out = self._git(
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(*objectname)",
            "refs/tags",
            "refs/heads",
            "refs/remotes",
        )
        tags: list[Ref] = []
        branches: dict[str, Ref] = {}
        remote_branches: dict[str, Ref] = {}
        for line in out.decode().splitlines():
            refname, oid, peeled = line.split("\0")
            commit = peeled or oid
            space, _, name = refname.removeprefix("refs/").partition("/")
            if space == "tags":
                tags.append(Ref(name, RefKind.TAG, commit))
            elif space == "heads":
                branches[name] = Ref(name, RefKind.BRANCH, commit)
            elif space == "remotes":
                remote, _, name = name.partition("/")
                if name == "HEAD" or not name:
                    continue
                # A fresh clone has only the default branch locally; prefer origin's others.
                if name not in remote_branches or remote == "origin":
                    remote_branches[name] = Ref(name, RefKind.BRANCH, commit)
        for name, ref in remote_branches.items():
            branches.setdefault(name, ref)
        return [*tags, *branches.values()]

    def rev_parse(self, revision: str) -> tuple[RefKind, str]:
        if (ref := find_ref(self.refs(), revision)) is not None:
            return ref.kind, ref.commit
        try:
            commit = self._git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
        except HubError:
            raise HubError(
                f"{self.where} has no branch, tag or commit {revision!r}",
                hint=f"list them with 'git -C {self.path} tag' and 'git -C {self.path} branch -a'",
            ) from None
        return RefKind.COMMIT, commit.decode().strip()

    def _ls(self, commit: str, path: str, *, recursive: bool) -> list[_Entry]:
        flags = ("-r",) if recursive else ()
        out = self._git("ls-tree", "-z", "--full-tree", *flags, commit, "--", path)
        entries = []
        for record in filter(None, out.split(b"\0")):
            meta, _, name = record.partition(b"\t")
            mode, type_, oid = meta.decode().split()
            entries.append(_Entry(mode, type_, oid, name.decode("utf-8", "surrogateescape")))
        return entries

    def list_build(self, commit: str) -> Sequence[RepoFile]:
        entries = self._ls(commit, BUILD_DIR + "/", recursive=True)
        if not entries:
            raise HubError(
                f"{self.where} has no build/ folder (or it is empty) at commit {commit}",
                hint="convert a revision that has build/<variant>/ folders (see 'git log -- "
                "build'), or pass another VERSION/--revision",
            )
        return [f for entry in entries for f in self._expand(commit, entry, entry.path, hops=0)]

    def _expand(self, commit: str, entry: _Entry, shown_as: str, *, hops: int) -> list[RepoFile]:
        """Files for one tree entry seen at ``shown_as``; symlinks are followed in the repo."""
        check_repo_path(shown_as, where=self.where)
        if entry.mode == _MODE_SUBMODULE:
            raise HubError(
                f"{self.where}: {shown_as} is a git submodule; kernel files must be in the repo",
                hint="commit the files themselves under build/",
            )
        if entry.type == "tree":
            children = self._ls(commit, entry.path + "/", recursive=True)
            out: list[RepoFile] = []
            for child in children:
                rel = child.path[len(entry.path) + 1 :]
                out.extend(self._expand(commit, child, f"{shown_as}/{rel}", hops=hops))
            return out
        if entry.mode != _MODE_LINK:
            return [RepoFile(shown_as, Announced(blob_id=entry.oid))]
        if hops >= _MAX_LINK_HOPS:
            raise HubError(
                f"{self.where}: {shown_as}: too many levels of symlinks",
                hint="replace the symlink cycle with real files",
            )
        target = self._git("cat-file", "blob", entry.oid).decode("utf-8", "surrogateescape")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), target))
        if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
            raise HubError(
                f"{self.where}: refusing symlink {shown_as} -> {target}: it points outside the "
                "repository",
                hint="replace the symlink with the file itself",
            )
        found = self._ls(commit, resolved, recursive=False)
        match = [e for e in found if e.path == resolved]
        if not match:
            raise HubError(
                f"{self.where}: symlink {shown_as} -> {target} points to nothing at commit "
                f"{commit}",
                hint="fix or remove the dangling symlink",
            )
        return self._expand(commit, match[0], shown_as, hops=hops + 1)

    def fetch(self, commit: str, files: Sequence[RepoFile]) -> AbstractContextManager[FileReader]:
        return closing(_BlobReader(self))


class _BlobReader:
    """Reads blobs through one long-lived ``git cat-file --batch`` process."""

    def __init__(self, source: GitSource) -> None:
        self.source = source
        self.lock = threading.Lock()
        self.proc = source.runner.spawn(["git", "-C", str(source.path), "cat-file", "--batch"])

    def _blob(self, oid: str) -> bytes:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:
            self.proc.stdin.write(oid.encode() + b"\n")
            self.proc.stdin.flush()
            header = self.proc.stdout.readline().decode().split()
            if len(header) != 3 or header[1] != "blob":
                raise HubError(
                    f"{self.source.where}: cannot read blob {oid} ({' '.join(header)})",
                    hint="run 'git fsck' on the clone",
                )
            size = int(header[2])
            data = self.proc.stdout.read(size)
            self.proc.stdout.read(1)  # the newline after each object
        return data

    def read(self, file: RepoFile) -> tuple[bytes, Announced]:
        assert file.announced.blob_id is not None
        raw = self._blob(file.announced.blob_id)
        pointer = LfsPointer.parse(raw)
        if pointer is None:
            return raw, Announced(size=len(raw), blob_id=file.announced.blob_id)
        # The pointer is what git stores: check it against its blob id, then read the object.
        verify(file.path, raw, file.announced, where=self.source.where)
        oid = pointer.oid
        obj = self.source.git_dir / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
        try:
            data = obj.read_bytes()
        except FileNotFoundError:
            raise HubError(
                f"{self.source.where}: {file.path} is a Git LFS pointer whose object "
                f"{pointer.oid} was never fetched",
                hint=f"run 'git -C {self.source.path} lfs pull' (install git-lfs first)",
            ) from None
        return data, Announced(size=pointer.size, lfs_sha256=pointer.oid)

    def close(self) -> None:
        release(self.proc)
