"""``kernelwheel upload``: push a Hub layout (``build --hub-layout``) to a ``kernel``-type repo.

As kernel-builder publishes: the repo is a ``kernel``-type repository (created when missing), the
variants go to the branch ``v<major>`` (created from the default branch when missing), which
``get_kernel(repo, version=<major>)`` and ``kernelwheel to-wheel repo <major>`` read, and the
kernel card (the layout's ``README.md``) goes beside ``build/``.

One commit of explicit operations (``create_commit``, never ``upload_folder`` with delete
patterns): every file of the uploaded variants is added or updated; a file left in the repo's
folder of an uploaded variant that the new build does not have is removed (``kernels`` checks the
folder against metadata.json's digest, so a stale ``.so`` would break it); every other variant
folder already on the branch is kept as it is. The commit names its parent, so a branch that
moved meanwhile refuses it instead of losing the other push. ``dry_run`` computes the same plan
and changes nothing.

Every call is bounded in time. Reads and the writes that are no-ops the second time (creating the
repo or the branch with ``exist_ok``) are tried again after no answer or a server error (5xx,
429). The commit is not repeated blindly: after a failed try the branch is read again; at the
same head the commit did not happen and is tried again, at a new head holding exactly the
uploaded files it did (the answer was lost), and any other head is someone else's push, refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from ..errors import HubError, HubUnavailable, UsageError
from ..log import Reporter, SilentReporter, step
from .export import CARD
from .hubsource import (
    KERNEL_REPO,
    RETRY_STATUS,
    HubSettings,
    bound_http,
    call_hub,
    hub_token,
    is_repo_id,
)
from .metadata import DEV_BUILD_MARK, METADATA_JSON, Digest, KernelMetadata
from .safety import check_repo_path, git_blob_id
from .source import BUILD_DIR

__all__ = ["Change", "PlannedFile", "UploadRequest", "UploadResult", "read_layout", "upload"]

T = TypeVar("T")
_TRIES = 3  # each call, the commit included (see the module's docstring)
# The HTTP client's bound on each connect, read and write of an upload (not on the whole call):
# a commit's answer can take the Hub many seconds; HF_HUB_DOWNLOAD_TIMEOUT raises it.
_UPLOAD_TIMEOUT = 120.0
_TOKEN_HINT = (
    "set HF_TOKEN to a token with write access to the repo's namespace (huggingface.co/settings/"
    "tokens), or run 'hf auth login'; --dry-run needs none"
)


class Change(str, Enum):
    ADD = "add"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    REMOVE = "remove"  # left in an uploaded variant's folder by an older build


@dataclass(frozen=True)
class PlannedFile:
    path: str  # in the repo
    change: Change
    size: int | None = None  # of the new content (None for a removal)


@dataclass(frozen=True)
class UploadRequest:
    folder: Path  # what `build --hub-layout` wrote: build/<variant>/…, README.md
    repo: str  # org/name
    version: int | None = None  # the API major; default: the variants' metadata.json version
    dry_run: bool = False
    message: str | None = None


@dataclass(frozen=True)
class Layout:
    """A Hub layout on disk: repo path -> file, and the major its variants agree on."""

    files: dict[str, Path]
    variants: tuple[str, ...]
    major: int


@dataclass(frozen=True)
class UploadResult:
    repo: str
    where: str  # the repo as messages name it, with the endpoint
    branch: str
    dry_run: bool
    create_repo: bool  # the kernel repo did not exist (and was, or would be, created)
    create_branch: bool  # the branch did not exist (and was, or would be, made from the default)
    variants: tuple[str, ...]  # uploaded
    kept: tuple[str, ...]  # variant folders already on the branch, left as they are
    files: tuple[PlannedFile, ...]
    commit: str | None = None  # the new commit (None: dry run, or nothing changed)
    commit_url: str | None = None
    head: str | None = field(default=None)  # the branch's commit before (None: no branch yet)
    base: str | None = None  # the branch a new one starts from (None: the new repo's default)

    @property
    def changes(self) -> tuple[PlannedFile, ...]:
        return tuple(f for f in self.files if f.change is not Change.UNCHANGED)


def read_layout(folder: Path, version: int | None = None) -> Layout:
    """The files of a Hub layout: ``build/<variant>/**`` of every variant (bytecode left out)
    and the card ``README.md``; every variant's metadata.json must give the same integer
    version (the branch ``v<version>``), which ``version`` may state but not change, and a
    digest there must describe the folder as it is."""
    build = folder / BUILD_DIR
    if not build.is_dir():
        raise UsageError(
            f"{folder}: no {BUILD_DIR}/ folder: not a Hub layout",
            hint="pass the folder 'kernelwheel build --hub-layout DIR' wrote",
        )
    variants = sorted(p.name for p in build.iterdir() if p.is_dir() and not p.is_symlink())
    if not variants:
        raise UsageError(
            f"{build}: holds no variant folders",
            hint="build some variants with 'kernelwheel build --hub-layout DIR' first",
        )
    files: dict[str, Path] = {}
    majors: dict[str, int] = {}
    for name in variants:
        root = build / name
        meta_path = root / METADATA_JSON
        if not meta_path.is_file():
            raise UsageError(
                f"{meta_path}: missing: {BUILD_DIR}/{name} is not a variant kernelwheel exported",
                hint="rebuild it with 'kernelwheel build --hub-layout', or remove the folder",
            )
        meta = KernelMetadata.parse(meta_path.read_bytes(), where=str(meta_path))
        if meta.version is None or not meta.version.isdigit():
            raise UsageError(
                f"{meta_path}: 'version' is {meta.version!r}, not an integer API major",
                hint="rebuild the variant with 'kernelwheel build --hub-layout'",
            )
        if meta.provenance is not None and DEV_BUILD_MARK in meta.provenance.builder_version:
            raise UsageError(
                f"{meta_path}: {BUILD_DIR}/{name} is a 'kernelwheel dev' build, not a release",
                hint="publish what 'kernelwheel build --hub-layout DIR' writes",
            )
        majors[name] = int(meta.version)
        inner: dict[str, bytes] = {}
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                raise UsageError(
                    f"{path}: a symlink; the Hub stores files",
                    hint="replace it with the file it points to, or rebuild the variant",
                )
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            check_repo_path(rel, where=str(folder))
            files[rel] = path
            inner[path.relative_to(root).as_posix()] = path.read_bytes()
        _check_digest(meta, inner, meta_path)
    found = sorted(set(majors.values()))
    if len(found) > 1:
        by = ", ".join(f"{n}: {v}" for n, v in sorted(majors.items()))
        raise UsageError(
            f"{folder}: the variants' metadata.json give different versions ({by})",
            hint="one upload goes to one branch v<version>: upload each version's variants "
            "from its own layout",
        )
    if version is not None and version != found[0]:
        raise UsageError(
            f"--version {version}, but the variants' metadata.json say version {found[0]}",
            hint=f"drop --version (branch v{found[0]}), or rebuild with version {version}",
        )
    card = folder / CARD
    if card.is_file() and not card.is_symlink():
        files[CARD] = card
    return Layout(files, tuple(variants), found[0])


def _check_digest(meta: KernelMetadata, files: dict[str, bytes], where: Path) -> None:
    """The folder must be what its metadata.json's digest describes (``kernels`` checks it on
    load): nothing edited, added or missing since the export."""
    if meta.digest is None:
        return
    expected = Digest.of(files, meta.digest.algorithm)
    if expected == meta.digest:
        return
    listed, present = dict(meta.digest.files), dict(expected.files)
    problems = [f"{p} is missing" for p in sorted(set(listed) - set(present))]
    problems += [
        meta.digest.problem(p, files[p]) or ""
        for p in sorted(present)
        if listed.get(p) != present[p]
    ]
    raise UsageError(
        f"{where}: the folder does not match its digest: {'; '.join(problems[:3])}"
        + (f" and {len(problems) - 3} more" if len(problems) > 3 else ""),
        hint="rebuild the variant with 'kernelwheel build --hub-layout' (kernels would refuse "
        "to load it as it is)",
    )


class _Hub:
    """The calls upload makes, each error mapped to one that says the fix."""

    def __init__(self, repo: str, settings: HubSettings, token: str | None) -> None:
        from huggingface_hub import HfApi

        self.repo = repo
        self.timeout = max(settings.timeout, _UPLOAD_TIMEOUT)
        self.pause = settings.pause
        bound_http(self.timeout)
        self.api = HfApi(endpoint=settings.endpoint, token=token or False)
        self.where = f"Hub kernel repo {repo} ({settings.endpoint})"

    def call(self, what: str, fn: Callable[[], T], *, tries: int = _TRIES) -> T:
        """``fn()`` with its errors mapped; tried again (``tries`` in all) after no answer or
        a server error, so only for calls that may be repeated."""
        from huggingface_hub import errors as hf

        def guarded() -> T:
            try:
                return fn()
            except hf.HfHubHTTPError as exc:
                status = exc.response.status_code if exc.response is not None else None
                if status == 401 and not isinstance(exc, hf.RepositoryNotFoundError):
                    raise HubError(
                        f"{self.where}: {what}: the Hub refused the token (401 Unauthorized)",
                        hint=_TOKEN_HINT,
                    ) from exc
                if status == 403:
                    raise HubError(
                        f"{self.where}: {what}: forbidden (403 {_first_line(exc)}): the token "
                        f"may not do this in {self.repo.split('/')[0]}",
                        hint="use a token with write access to that namespace; creating a "
                        "kernel repo also needs the account's kernel-creation access (ask the "
                        "Hub for it, or have someone who has it create the kernel repo, then "
                        "rerun)",
                    ) from exc
                raise

        return call_hub(
            self.where,
            what,
            guarded,
            pause=self.pause,
            timeout=self.timeout,
            tries=tries,
            retry_status=RETRY_STATUS,
            unanswered_hint="check the network and HF_ENDPOINT, then rerun: nothing is pushed "
            "twice (a slow link may need a longer HF_HUB_DOWNLOAD_TIMEOUT, in seconds)",
        )

    def exists(self) -> bool:
        from huggingface_hub import errors as hf

        def info() -> bool:
            try:
                # timeout given: repo_info's default (None) would turn the bound off
                self.api.repo_info(self.repo, repo_type=KERNEL_REPO, timeout=self.timeout)
            except hf.GatedRepoError:
                return True
            except hf.RepositoryNotFoundError:
                return False
            return True

        return self.call("looking the repo up", info)

    def branches(self) -> dict[str, str]:
        refs = self.call(
            "listing branches", lambda: self.api.list_repo_refs(self.repo, repo_type=KERNEL_REPO)
        )
        return {b.name: b.target_commit for b in refs.branches}

    def default_branch(self, branches: dict[str, str]) -> str:
        from huggingface_hub.constants import DEFAULT_REVISION

        return DEFAULT_REVISION if DEFAULT_REVISION in branches else sorted(branches)[0]

    def tree(self, revision: str) -> dict[str, tuple[str | None, str | None]]:
        """Repo path -> (git blob id, LFS sha256) of every file at ``revision``."""
        from huggingface_hub.hf_api import RepoFile as HfRepoFile

        items = self.call(
            f"listing the files of {revision}",
            lambda: list(
                self.api.list_repo_tree(
                    self.repo, recursive=True, revision=revision, repo_type=KERNEL_REPO
                )
            ),
        )
        return {
            i.path: (i.blob_id, i.lfs.sha256 if i.lfs is not None else None)
            for i in items
            if isinstance(i, HfRepoFile)
        }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _change(data: bytes, remote: tuple[str | None, str | None] | None) -> Change:
    if remote is None:
        return Change.ADD
    blob_id, lfs_sha256 = remote
    if lfs_sha256 is not None:
        same = hashlib.sha256(data).hexdigest() == lfs_sha256
    else:
        same = git_blob_id(data) == blob_id
    return Change.UNCHANGED if same else Change.UPDATE


def upload(
    req: UploadRequest,
    reporter: Reporter | None = None,
    *,
    settings: HubSettings | None = None,
) -> UploadResult:
    """Plan, and unless ``req.dry_run`` make, the commit that puts the layout's variants on the
    kernel repo's branch ``v<major>``."""
    reporter = reporter or SilentReporter()
    if not is_repo_id(req.repo):
        raise UsageError(
            f"{req.repo!r} is not a Hub repo id", hint="pass org/name, e.g. my-org/img2gray"
        )
    settings = settings or HubSettings.from_env()
    if settings.offline:
        raise UsageError(
            "HF_HUB_OFFLINE is set: upload (even --dry-run) needs the Hub",
            hint="unset HF_HUB_OFFLINE",
        )
    layout = read_layout(req.folder, req.version)
    branch = f"v{layout.major}"
    token = hub_token(settings)
    if token is None and not req.dry_run:
        raise UsageError(f"no Hub token to push {req.repo} with", hint=_TOKEN_HINT)
    hub = _Hub(req.repo, settings, token)
    scope = req.repo.rsplit("/", 1)[1]

    with step(reporter, scope, f"compare with {hub.where}, branch {branch}") as detail:
        exists = hub.exists()
        branches = hub.branches() if exists else {}
        head = branches.get(branch)
        base = branch if head is not None else (hub.default_branch(branches) if branches else None)
        remote = hub.tree(base) if base is not None else {}
        detail.append(
            f"branch {branch} at {head[:12]}"
            if head
            else f"no branch {branch} (from {base})"
            if base
            else "no repo yet"
        )
    planned: list[PlannedFile] = []
    contents: dict[str, bytes] = {}
    for path, file in sorted(layout.files.items()):
        data = file.read_bytes()
        change = _change(data, remote.get(path))
        planned.append(PlannedFile(path, change, len(data)))
        if change is not Change.UNCHANGED:
            contents[path] = data
    uploaded = {f"{BUILD_DIR}/{v}/" for v in layout.variants}
    planned += [
        PlannedFile(path, Change.REMOVE)
        for path in sorted(remote)
        if path.startswith(tuple(uploaded)) and path not in layout.files
    ]
    kept = sorted(
        {
            p.split("/")[1]
            for p in remote
            if p.startswith(BUILD_DIR + "/")
            and p.count("/") >= 2
            and p.split("/")[1] not in layout.variants
        }
    )
    result = UploadResult(
        repo=req.repo,
        where=hub.where,
        branch=branch,
        dry_run=req.dry_run,
        create_repo=not exists,
        create_branch=head is None,
        variants=layout.variants,
        kept=tuple(kept),
        files=tuple(planned),
        head=head,
        base=None if head is not None else base,
    )
    if req.dry_run:
        return result
    return _push(hub, req, result, contents, reporter, scope)


def _push(
    hub: _Hub,
    req: UploadRequest,
    plan: UploadResult,
    contents: dict[str, bytes],
    reporter: Reporter,
    scope: str,
) -> UploadResult:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    head = plan.head
    if plan.create_repo:
        with step(reporter, scope, "create the kernel repo"):
            hub.call(
                "creating the kernel repo",
                lambda: hub.api.create_repo(hub.repo, repo_type=KERNEL_REPO, exist_ok=True),
            )
    if head is None:
        with step(reporter, scope, f"create branch {plan.branch}"):
            hub.call(
                f"creating branch {plan.branch}",
                lambda: hub.api.create_branch(
                    hub.repo,
                    branch=plan.branch,
                    revision=plan.base,  # the default branch (None: the new repo's default)
                    repo_type=KERNEL_REPO,
                    exist_ok=True,
                ),
            )
            head = hub.branches().get(plan.branch)
    operations: list[Any] = [
        CommitOperationAdd(path_in_repo=path, path_or_fileobj=data)
        for path, data in contents.items()
    ]
    operations += [
        CommitOperationDelete(path_in_repo=f.path) for f in plan.files if f.change is Change.REMOVE
    ]
    if not operations:
        return plan
    message = req.message or f"Upload {', '.join(plan.variants)} (kernelwheel)"
    with step(reporter, scope, f"commit to {plan.branch}") as detail:
        oid, url = _commit(hub, plan, operations, message, head, contents)
        detail.append(f"{len(operations)} change(s), commit {oid[:12]}")
    return dataclasses.replace(plan, commit=oid, commit_url=url)


def _commit(
    hub: _Hub,
    plan: UploadResult,
    operations: list[Any],
    message: str,
    parent: str | None,
    contents: dict[str, bytes],
) -> tuple[str, str | None]:
    """The commit's id and URL (None when its answer was lost): made once, whatever the
    network does (the module's docstring)."""
    what = f"committing to {plan.branch}"
    for attempt in range(1, _TRIES + 1):
        try:
            info = hub.call(
                what,
                lambda: hub.api.create_commit(
                    hub.repo,
                    operations,
                    commit_message=message,
                    revision=plan.branch,
                    repo_type=KERNEL_REPO,
                    parent_commit=parent,
                ),
                tries=1,
            )
            return info.oid, str(info.commit_url)
        except HubUnavailable as err:
            if attempt == _TRIES:
                raise HubUnavailable(
                    f"{err.message}; the commit was tried {attempt} times and is not on "
                    f"{plan.branch}",
                    hint=err.hint,
                ) from None
        now = hub.branches().get(plan.branch)
        if now is not None and now != parent:
            if _holds(hub.tree(now), contents, plan):
                return now, None  # it landed; only its answer was lost
            raise HubError(
                f"{hub.where}: {what}: the branch moved from {(parent or '?')[:12]} to "
                f"{now[:12]} while the commit's answer was awaited, and not by this commit",
                hint="someone else pushed to it: rerun 'kernelwheel upload', which compares "
                "with the new head and keeps the other variants",
            )
        time.sleep(hub.pause(attempt))
    raise AssertionError("unreachable")


def _holds(
    tree: dict[str, tuple[str | None, str | None]], contents: dict[str, bytes], plan: UploadResult
) -> bool:
    """Whether ``tree`` has every added or updated file with the uploaded bytes and none of
    those the upload removes."""
    removed = [f.path for f in plan.files if f.change is Change.REMOVE]
    return all(
        _change(data, tree.get(path)) is Change.UNCHANGED for path, data in contents.items()
    ) and not any(path in tree for path in removed)
