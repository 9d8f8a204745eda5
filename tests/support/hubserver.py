"""A loopback HTTP server answering the Hub endpoints huggingface_hub uses to download a repo,
so the real client runs against git repositories made by :mod:`.gitrepo`.

Endpoints (as huggingface_hub 1.x and 2.x call them):

- ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{rev}``: repo info with ``sha``;
- ``GET /api/models/{repo}/refs``: branches and tags with their commits;
- ``GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=…``: the listing, with git blob ids and
  LFS oids, paginated with a ``Link: <…>; rel="next"`` header;
- ``HEAD``/``GET /{repo}/resolve/{rev}/{path}``: file metadata (``X-Repo-Commit``, ``ETag`` or
  ``X-Linked-Etag``/``X-Linked-Size`` for LFS files) and content.

Errors carry ``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound) like the Hub's.
``tamper`` serves other bytes (same size) for a file while the listing keeps announcing the
original: the wrong-sha256 case.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

_LFS_HEAD = b"version https://git-lfs.github.com/spec/v1"


@dataclass(frozen=True)
class Entry:
    path: str
    type: str  # "file" or "directory"
    oid: str
    size: int
    lfs_oid: str | None = None
    lfs_size: int | None = None
    pointer_size: int | None = None


class GitBackedRepo:
    """Reads refs, trees and blobs of one git repository (cached per commit)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, dict[str, Entry]] = {}
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def _git(self, *args: str) -> bytes:
        return subprocess.run(
            ["git", "-C", str(self.root), *args], capture_output=True, check=True
        ).stdout

    def refs(self) -> dict[str, list[dict[str, str]]]:
        out = self._git(
            "for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)"
        ).decode()
        branches, tags = [], []
        for line in out.splitlines():
            name, oid, peeled = line.split("\0")
            if name.startswith("refs/heads/"):
                short = name[len("refs/heads/") :]
                branches.append({"name": short, "ref": name, "targetCommit": oid})
            elif name.startswith("refs/tags/"):
                short = name[len("refs/tags/") :]
                tags.append({"name": short, "ref": name, "targetCommit": peeled or oid})
        return {"branches": branches, "tags": tags, "converts": [], "pullRequests": []}

    def resolve(self, revision: str) -> str | None:
        proc = subprocess.run(
            [
                "git",
                "-C",
                str(self.root),
                "rev-parse",
                "--verify",
                "--quiet",
                f"{revision}^{{commit}}",
            ],
            capture_output=True,
            check=False,
        )
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def tree(self, commit: str) -> dict[str, Entry]:
        with self._lock:
            if commit in self._trees:
                return self._trees[commit]
        out = self._git("ls-tree", "-r", "-t", "-l", "-z", "--full-tree", commit)
        entries: dict[str, Entry] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            _mode, type_, oid, size = meta.decode().split()
            path = raw_path.decode()
            if type_ == "tree":
                entries[path] = Entry(path, "directory", oid, 0)
                continue
            blob = self.blob(oid) if int(size) < 1024 else b""
            if blob.startswith(_LFS_HEAD):
                fields = dict(line.split(" ", 1) for line in blob.decode().splitlines())
                lfs_oid = fields["oid"].removeprefix("sha256:")
                lfs_size = int(fields["size"])
                entries[path] = Entry(path, "file", oid, lfs_size, lfs_oid, lfs_size, int(size))
            else:
                entries[path] = Entry(path, "file", oid, int(size))
        with self._lock:
            self._trees[commit] = entries
        return entries

    def blob(self, oid: str) -> bytes:
        with self._lock:
            if oid in self._blobs:
                return self._blobs[oid]
        data = self._git("cat-file", "blob", oid)
        with self._lock:
            self._blobs[oid] = data
        return data

    def content(self, entry: Entry) -> bytes:
        if entry.lfs_oid is None:
            return self.blob(entry.oid)
        obj = self.root / ".git" / "lfs" / "objects" / entry.lfs_oid[:2] / entry.lfs_oid[2:4]
        return (obj / entry.lfs_oid).read_bytes()


@dataclass
class HubState:
    repos: dict[str, GitBackedRepo] = field(default_factory=dict)
    private: dict[str, str] = field(default_factory=dict)  # repo id -> required token
    tamper: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (repo, path) -> bytes
    page_size: int = 1000
    log: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self, method: str | None = None) -> list[str]:
        with self.lock:
            return [p for m, p in self.log if method is None or m == method]


_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?P<rest>/.*)?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, delayed ACKs add ~40 ms to
        # every response on loopback.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def state(self) -> HubState:
        return self.server.state

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch(head=True)

    # -- plumbing -------------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        *,
        head: bool = False,
    ) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self._send(200, body, {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, code: str, message: str, *, head: bool = False) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"X-Error-Code": code, "X-Error-Message": message}
        self._send(status, body, {"Content-Type": "application/json", **headers}, head=head)

    def _repo(self, repo_id: str, head: bool) -> GitBackedRepo | None:
        repo = self.state.repos.get(repo_id)
        token = self.state.private.get(repo_id)
        authorized = token is None or self.headers.get("Authorization") == f"Bearer {token}"
        if repo is None or not authorized:
            self._error(
                401 if repo is not None else 404,
                "RepoNotFound",
                "Repository not found",
                head=head,
            )
            return None
        return repo

    def _dispatch(self, *, head: bool) -> None:
        url = urlsplit(self.path)
        with self.state.lock:
            self.state.log.append(("HEAD" if head else "GET", url.path))
        path = unquote(url.path)
        query = parse_qs(url.query)
        match = _API.match(url.path)
        if match:
            repo = self._repo(unquote(match["repo"]), head)
            if repo is not None:
                self._api(repo, unquote(match["repo"]), match["rest"] or "", query)
            return
        match = _RESOLVE.match(url.path)
        if match:
            repo_id = unquote(match["repo"])
            repo = self._repo(repo_id, head)
            if repo is not None:
                self._resolve(repo, repo_id, unquote(match["rev"]), unquote(match["path"]), head)
            return
        self._error(404, "NotFound", f"no route for {path}", head=head)

    # -- API ------------------------------------------------------------------------------------

    def _api(
        self, repo: GitBackedRepo, repo_id: str, rest: str, query: dict[str, list[str]]
    ) -> None:
        if rest in ("", "/") or rest.startswith("/revision/"):
            revision = (
                unquote(rest[len("/revision/") :]) if rest.startswith("/revision/") else "main"
            )
            commit = repo.resolve(revision)
            if commit is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            siblings = [
                {"rfilename": e.path} for e in repo.tree(commit).values() if e.type == "file"
            ]
            self._json(
                {
                    "id": repo_id,
                    "modelId": repo_id,
                    "sha": commit,
                    "private": repo_id in self.state.private,
                    "siblings": siblings,
                    "tags": ["kernel"],
                }
            )
            return
        if rest == "/refs":
            self._json(repo.refs())
            return
        if rest.startswith("/tree/"):
            revision, _, sub = rest[len("/tree/") :].partition("/")
            self._tree(repo, unquote(revision), unquote(sub), query)
            return
        self._error(404, "NotFound", f"unsupported API path {rest}")

    def _tree(
        self, repo: GitBackedRepo, revision: str, sub: str, query: dict[str, list[str]]
    ) -> None:
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        tree = repo.tree(commit)
        sub = sub.strip("/")
        if sub and (sub not in tree or tree[sub].type != "directory"):
            self._error(404, "EntryNotFound", f"{sub} does not exist on {revision}")
            return
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        prefix = sub + "/" if sub else ""
        items = []
        for path, entry in sorted(tree.items()):
            if not path.startswith(prefix):
                continue
            if not recursive and "/" in path[len(prefix) :]:
                continue
            item: dict[str, Any] = {
                "type": entry.type,
                "oid": entry.oid,
                "size": entry.size,
                "path": path,
            }
            if entry.lfs_oid is not None:
                item["lfs"] = {
                    "oid": entry.lfs_oid,
                    "size": entry.lfs_size,
                    "pointerSize": entry.pointer_size,
                }
            items.append(item)
        start = int(query.get("cursor", ["0"])[0])
        page = items[start : start + self.state.page_size]
        headers = {}
        if start + self.state.page_size < len(items):
            host, port = self.server.server_address[:2]
            nxt = (
                f"http://{host}:{port}{urlsplit(self.path).path}?recursive={str(recursive).lower()}"
                f"&expand=false&cursor={start + self.state.page_size}"
            )
            headers["Link"] = f'<{nxt}>; rel="next"'
        self._json(page, headers)

    def _resolve(
        self, repo: GitBackedRepo, repo_id: str, revision: str, path: str, head: bool
    ) -> None:
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=head)
            return
        entry = repo.tree(commit).get(path)
        if entry is None or entry.type != "file":
            self._send(
                404,
                b"",
                {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit},
                head=head,
            )
            return
        body = self.state.tamper.get((repo_id, path)) or repo.content(entry)
        headers = {"X-Repo-Commit": commit, "Content-Type": "application/octet-stream"}
        if entry.lfs_oid is not None:
            headers["X-Linked-Etag"] = f'"{entry.lfs_oid}"'
            headers["X-Linked-Size"] = str(entry.lfs_size)
            headers["ETag"] = f'"{entry.lfs_oid}"'
        else:
            headers["ETag"] = f'"{entry.oid}"'
        self._send(200, body, headers, head=head)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState


@contextmanager
def serve(state: HubState) -> Iterator[str]:
    """Run the server on 127.0.0.1 for the ``with`` block; yields its base URL."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = state
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def serve_as_hub(state: HubState, monkeypatch: pytest.MonkeyPatch, cache: Path) -> Iterator[str]:
    """:func:`serve`, with huggingface_hub pointed at it for the block: ``HF_ENDPOINT`` set, a
    fresh ``HF_HUB_CACHE`` at ``cache``, and this machine's token, offline switch and Hub home
    left out."""
    with serve(state) as url:
        for var in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HOME", "HUGGINGFACE_HUB_CACHE"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_HUB_CACHE", str(cache))
        yield url
