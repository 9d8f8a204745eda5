"""A loopback HTTP server answering the Hub endpoints huggingface_hub uses to download and to
push a repo, so the real client runs against git repositories made by :mod:`.gitrepo`.

Each repo has a type: ``kernel`` (the default: what the Hub holds kernels in) or ``model`` (a
repo from before kernel repos, for the fallback tests). A repo is served only at its type's
endpoints; asking for it as the other type is a 404 RepoNotFound, as on the Hub.

Read endpoints (as huggingface_hub 1.x and 2.x call them; ``{t}`` is ``kernels`` or ``models``):

- ``GET /api/{t}/{repo}`` and ``/api/{t}/{repo}/revision/{rev}``: repo info with ``sha``;
- ``GET /api/{t}/{repo}/refs``: branches and tags with their commits;
- ``GET /api/{t}/{repo}/tree/{rev}[/{path}]?recursive=…``: the listing, with git blob ids and
  LFS oids, paginated with a ``Link: <…>; rel="next"`` header;
- ``HEAD``/``GET /kernels/{repo}/resolve/{rev}/{path}`` (kernel repos) and
  ``/{repo}/resolve/{rev}/{path}`` (model repos): file metadata (``X-Repo-Commit``, ``ETag`` or
  ``X-Linked-Etag``/``X-Linked-Size`` for LFS files) and content.

Write endpoints (``HfApi.create_repo``, ``create_branch``, ``create_commit``), allowed with the
``Bearer`` token ``HubState.write_token``; commits are real git commits made with plumbing (a
temporary index, ``commit-tree``, ``update-ref`` checked against the old head), never touching a
working tree:

- ``POST /api/repos/create`` ``{"name", "organization", "type"}``: a new repo (an initial commit
  with ``.gitattributes`` on ``main``, as the Hub makes); 409 when it exists; 403 for a kernel
  repo when ``HubState.may_create_kernels`` is false (the Hub's kernel-creation access);
- ``POST /api/{t}/{repo}/branch/{branch}`` ``{"startingPoint"?}``: a branch from that
  revision or from ``main``; 409 when it exists;
- ``POST /api/{t}/{repo}/preupload/{rev}``: every file "regular" (its bytes go in the commit
  itself: this server has no LFS or Xet storage), with the blob id of the file already there;
- ``POST /api/{t}/{repo}/commit/{rev}`` (NDJSON: header, ``file`` base64 contents,
  ``deletedFile``, ``deletedFolder``), ``parentCommit`` checked;
- ``POST /api/validate-yaml``: accepts any card.

Faults (``HubState.faults``): a request whose method and path match a :class:`Fault` gets its
status (a 503, say) instead of being handled, or, with status None, is handled and then left
without an answer (the connection closed): a commit made whose answer was lost; either after
``delay`` seconds (a slow Hub).

Errors carry ``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound) like the Hub's.
``tamper`` serves other bytes (same size) for a file while the listing keeps announcing the
original: the wrong-sha256 case.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
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

    def commit_files(
        self,
        branch: str,
        parent: str,
        message: str,
        files: dict[str, bytes],
        deleted: list[str],
        deleted_folders: list[str],
    ) -> str:
        """A commit on ``branch`` (whose head must still be ``parent``) that writes ``files`` and
        removes ``deleted`` and everything under ``deleted_folders``."""
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "GIT_INDEX_FILE": os.path.join(tmp, "index")}
            env.update(
                GIT_AUTHOR_NAME="hub",
                GIT_AUTHOR_EMAIL="hub@example.invalid",
                GIT_COMMITTER_NAME="hub",
                GIT_COMMITTER_EMAIL="hub@example.invalid",
            )

            def run(*args: str, data: bytes | None = None) -> str:
                return (
                    subprocess.run(
                        ["git", "-C", str(self.root), *args],
                        input=data,
                        capture_output=True,
                        check=True,
                        env=env,
                    )
                    .stdout.decode()
                    .strip()
                )

            run("read-tree", parent)
            for folder in deleted_folders:
                run("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", folder.rstrip("/"))
            for path in deleted:
                run("rm", "-q", "--cached", "--ignore-unmatch", "--", path)
            for path, data in files.items():
                oid = run("hash-object", "-w", "--stdin", data=data)
                run("update-index", "--add", "--cacheinfo", f"100644,{oid},{path}")
            tree = run("write-tree")
            commit = run("commit-tree", tree, "-p", parent, "-m", message)
            run("update-ref", f"refs/heads/{branch}", commit, parent)
        return commit

    def create_branch(self, name: str, start: str) -> None:
        self._git("update-ref", f"refs/heads/{name}", start, "0" * 40)

    def content(self, entry: Entry) -> bytes:
        if entry.lfs_oid is None:
            return self.blob(entry.oid)
        obj = self.root / ".git" / "lfs" / "objects" / entry.lfs_oid[:2] / entry.lfs_oid[2:4]
        return (obj / entry.lfs_oid).read_bytes()


KERNEL = "kernel"
MODEL = "model"


@dataclass
class Fault:
    """What the next ``times`` requests of ``method`` whose path contains ``path`` get:
    ``status`` instead of an answer, (None) handled, then no answer at all, or (200) handled
    as usual; each after ``delay`` seconds."""

    method: str
    path: str
    status: int | None = 503
    times: int = 1
    then: Callable[[], None] | None = None  # run when met, before the request is answered
    delay: float = 0.0  # seconds the server waits first (a slow Hub)


@dataclass
class HubState:
    repos: dict[str, GitBackedRepo] = field(default_factory=dict)
    # repo id -> "model" or "kernel+model" (served at both, for older clients); default "kernel"
    types: dict[str, str] = field(default_factory=dict)
    private: dict[str, str] = field(default_factory=dict)  # repo id -> required token
    tamper: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (repo, path) -> bytes
    page_size: int = 1000
    log: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Writes: the token they need, where created repos go, and kernel-creation access.
    write_token: str | None = None
    root: Path | None = None
    may_create_kernels: bool = True
    commits: list[dict[str, Any]] = field(default_factory=list)  # each commit's payload, parsed
    faults: list[Fault] = field(default_factory=list)

    def fault(self, method: str, path: str) -> Fault | None:
        """The fault this request meets (used up one time), if any."""
        with self.lock:
            for fault in self.faults:
                if fault.method == method and fault.path in path and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    def type_of(self, repo_id: str) -> str:
        return self.types.get(repo_id, KERNEL)

    def requests(self, method: str | None = None) -> list[str]:
        with self.lock:
            return [p for m, p in self.log if method is None or m == method]


_API = re.compile(r"^/api/(?P<type>models|kernels)/(?P<repo>[^/]+/[^/]+?)(?P<rest>/.*)?$")
_KERNEL_RESOLVE = re.compile(
    r"^/kernels/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"
)
_MODEL_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_TYPES = {"models": MODEL, "kernels": KERNEL}


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

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        with self.state.lock:
            self.state.log.append(("POST", url.path))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._faulted("POST", url.path):
            return
        if url.path == "/api/validate-yaml":
            self._json({"errors": [], "warnings": []})
            return
        if self.headers.get("Authorization") != f"Bearer {self.state.write_token}" or (
            self.state.write_token is None
        ):
            self._error(401, "Unauthorized", "Invalid credentials in Authorization header")
            return
        if url.path == "/api/repos/create":
            self._create_repo(json.loads(body or b"{}"))
            return
        match = _API.match(url.path)
        if match is None:
            self._error(404, "NotFound", f"no route for POST {url.path}")
            return
        repo_id = unquote(match["repo"])
        repo = self._repo(repo_id, _TYPES[match["type"]], head=False)
        if repo is None:
            return
        rest = match["rest"] or ""
        for prefix, handler in (
            ("/branch/", self._create_branch),
            ("/preupload/", self._preupload),
            ("/commit/", self._commit),
        ):
            if rest.startswith(prefix):
                handler(repo, repo_id, unquote(rest[len(prefix) :]), body)
                return
        self._error(404, "NotFound", f"unsupported API path POST {rest}")

    # -- plumbing -------------------------------------------------------------------------------

    def _faulted(self, method: str, path: str, *, head: bool = False) -> bool:
        """Answer the request's fault, if it has one; True when that answer replaces the
        handling (a status), False when the request is handled (its answer then withheld)."""
        self.withheld = False
        fault = self.state.fault(method, path)
        if fault is None:
            return False
        if fault.then is not None:
            fault.then()
        time.sleep(fault.delay)
        if fault.status == 200:
            return False  # handled as usual (after the delay)
        if fault.status is None:
            self.withheld = True
            return False
        self._error(fault.status, "ServiceUnavailable", "injected fault", head=head)
        return True

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        *,
        head: bool = False,
    ) -> None:
        if getattr(self, "withheld", False):
            self.close_connection = True  # handled, but the client hears nothing
            return
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

    def _repo(self, repo_id: str, kind: str, head: bool) -> GitBackedRepo | None:
        repo = self.state.repos.get(repo_id)
        if repo is not None and kind not in self.state.type_of(repo_id).split("+"):
            repo = None  # the Hub keeps each type apart: a model repo is no kernel repo
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
        if self._faulted("HEAD" if head else "GET", url.path, head=head):
            return
        path = unquote(url.path)
        query = parse_qs(url.query)
        match = _API.match(url.path)
        if match:
            repo = self._repo(unquote(match["repo"]), _TYPES[match["type"]], head)
            if repo is not None:
                self._api(repo, unquote(match["repo"]), match["rest"] or "", query)
            return
        for pattern, kind in ((_KERNEL_RESOLVE, KERNEL), (_MODEL_RESOLVE, MODEL)):
            match = pattern.match(url.path)
            if match:
                repo_id = unquote(match["repo"])
                repo = self._repo(repo_id, kind, head)
                if repo is not None:
                    rev, file = unquote(match["rev"]), unquote(match["path"])
                    self._resolve(repo, repo_id, rev, file, head)
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

    # -- writes ---------------------------------------------------------------------------------

    def _create_repo(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type") or MODEL
        repo_id = f"{payload.get('organization')}/{payload.get('name')}"
        if kind == KERNEL and not self.state.may_create_kernels:
            self._error(
                403,
                "Forbidden",
                "You don't have the rights to create a kernel under this namespace",
            )
            return
        with self.state.lock:
            if repo_id in self.state.repos and self.state.type_of(repo_id) == kind:
                exists = True
            else:
                exists = False
                assert self.state.root is not None, "HubState.root: where created repos go"
                root = self.state.root / kind / repo_id.replace("/", "--")
                root.mkdir(parents=True)
                subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
                repo = GitBackedRepo(root)
                empty = repo._git("hash-object", "-t", "tree", "-w", "/dev/null").decode().strip()
                env = {
                    **os.environ,
                    "GIT_AUTHOR_NAME": "hub",
                    "GIT_AUTHOR_EMAIL": "hub@example.invalid",
                    "GIT_COMMITTER_NAME": "hub",
                    "GIT_COMMITTER_EMAIL": "hub@example.invalid",
                }
                first = (
                    subprocess.run(
                        ["git", "-C", str(root), "commit-tree", empty, "-m", "initial commit"],
                        capture_output=True,
                        check=True,
                        env=env,
                    )
                    .stdout.decode()
                    .strip()
                )
                repo._git("update-ref", "refs/heads/main", first)
                repo.commit_files(
                    "main",
                    first,
                    "Add .gitattributes",
                    {".gitattributes": b"*.so filter=lfs diff=lfs merge=lfs -text\n"},
                    [],
                    [],
                )
                self.state.repos[repo_id] = repo
                self.state.types[repo_id] = kind
        if exists:
            self._error(409, "Conflict", "You already created this repo")
            return
        prefix = "" if kind == MODEL else f"{kind}s/"
        host, port = self.server.server_address[:2]
        self._json({"url": f"http://{host}:{port}/{prefix}{repo_id}", "name": repo_id})

    def _create_branch(self, repo: GitBackedRepo, repo_id: str, branch: str, body: bytes) -> None:
        start = json.loads(body or b"{}").get("startingPoint") or "main"
        commit = repo.resolve(start)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {start}")
            return
        if repo.resolve(f"refs/heads/{branch}") is not None:
            self._error(409, "Conflict", f"Reference already exists: refs/heads/{branch}")
            return
        repo.create_branch(branch, commit)
        self._json({})

    def _preupload(self, repo: GitBackedRepo, repo_id: str, revision: str, body: bytes) -> None:
        commit = repo.resolve(revision)
        tree = repo.tree(commit) if commit is not None else {}
        files = []
        for f in json.loads(body)["files"]:
            there = tree.get(f["path"])
            files.append(
                {
                    "path": f["path"],
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": there.oid if there is not None and there.lfs_oid is None else None,
                }
            )
        self._json({"files": files})

    def _commit(self, repo: GitBackedRepo, repo_id: str, revision: str, body: bytes) -> None:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        with self.state.lock:
            self.state.commits.append({"repo": repo_id, "revision": revision, "lines": lines})
        head = repo.resolve(f"refs/heads/{revision}")
        if head is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        header = next((x["value"] for x in lines if x["key"] == "header"), {})
        parent = header.get("parentCommit")
        if parent is not None and parent != head:
            self._error(412, "PreconditionFailed", f"{revision} has moved on from {parent}")
            return
        files: dict[str, bytes] = {}
        deleted: list[str] = []
        folders: list[str] = []
        for item in lines:
            value = item["value"]
            if item["key"] == "file":
                assert value.get("encoding") == "base64", value
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "deletedFile":
                deleted.append(value["path"])
            elif item["key"] == "deletedFolder":
                folders.append(value["path"])
            elif item["key"] != "header":
                self._error(400, "BadRequest", f"this fake Hub cannot commit {item['key']}")
                return
        message = header.get("summary", "")
        commit = repo.commit_files(revision, head, message, files, deleted, folders)
        kind = self.state.type_of(repo_id)
        host, port = self.server.server_address[:2]
        prefix = "" if kind == MODEL else f"{kind}s/"
        self._json(
            {
                "commitUrl": f"http://{host}:{port}/{prefix}{repo_id}/commit/{commit}",
                "commitOid": commit,
            }
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up on a delayed or withheld answer (the fault tests) closed its end:
        # expected, and not to be printed into whichever test runs when the handler wakes.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


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
