"""``kernelwheel upload``: push a Hub layout (``build --hub-layout``) to the branch ``v<major>``
of a ``kernel``-type repo, as kernel-builder publishes (docs/upload.md). One ``create_commit``
naming its parent; the commit is never repeated blindly: after a failed try the branch is read
again (same head: retry; a head holding exactly the uploaded files: it landed; other: refused)."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    _first_line,
    bound_http,
    call_hub,
    count,
    hub_timeout,
    hub_token,
    repo_id_problem,
    seconds,
)
from .layoutcheck import Layout, LayoutFile, read_layout
from .source import BUILD_DIR

T = TypeVar("T")
# By default (--tries/--timeout, else their variables: docs/options.md), how often each call is
# tried, the commit included, and the HTTP client's bound on each connect, read and write (not
# on the whole call: a commit's answer can take the Hub many seconds).
_TRIES = 3
_MOST_TRIES = 20
_UPLOAD_TIMEOUT = 120.0
TIMEOUT_VARIABLE = "KERNELWHEEL_UPLOAD_TIMEOUT"
TRIES_VARIABLE = "KERNELWHEEL_UPLOAD_TRIES"
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
    # --timeout and --tries as given (None: the variables, else the defaults: upload_bounds)
    timeout: str | None = None
    tries: str | None = None


def _first_set(
    given: str | None, flag: str, variable: str, parse: Callable[[str, str], T]
) -> T | None:
    """``parse`` of the flag's value, else of the variable's when set; None when neither is."""
    if given is not None:
        return parse(given, flag)
    if (os.environ.get(variable) or "").strip():
        return parse(os.environ[variable], variable)
    return None


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
    head: str | None = None  # the branch's commit before (None: no branch yet)
    base: str | None = None  # the branch a new one starts from (None: the new repo's default)

    @property
    def changes(self) -> tuple[PlannedFile, ...]:
        return tuple(f for f in self.files if f.change is not Change.UNCHANGED)


class _Hub:
    """The calls upload makes, each error mapped to one that says the fix."""

    def __init__(
        self, repo: str, settings: HubSettings, token: str | None, timeout: float, tries: int
    ) -> None:
        from huggingface_hub import HfApi

        self.repo = repo
        self.timeout = timeout
        self.tries = tries
        self.pause = settings.pause
        bound_http(self.timeout)
        self.api = HfApi(endpoint=settings.endpoint, token=token or False)
        self.where = f"Hub kernel repo {repo} ({settings.endpoint})"

    def call(self, what: str, fn: Callable[[], T], *, tries: int | None = None) -> T:
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
            tries=tries or self.tries,
            retry_status=RETRY_STATUS,
            unanswered_hint="check the network and HF_ENDPOINT, then rerun: nothing is pushed "
            f"twice (a slow link may need a longer --timeout or {TIMEOUT_VARIABLE}, in seconds)",
        )

    def exists(self) -> bool:
        from huggingface_hub import errors as hf

        def info() -> bool:
            try:
                # timeout given: repo_info's default (None) would turn the bound off
                self.api.repo_info(self.repo, repo_type=KERNEL_REPO, timeout=self.timeout)
            except hf.RepositoryNotFoundError as exc:
                return isinstance(exc, hf.GatedRepoError)  # a gated repo exists
            return True

        return self.call("looking the repo up", info)

    def branches(self) -> dict[str, str]:
        refs = self.call(
            "listing branches", lambda: self.api.list_repo_refs(self.repo, repo_type=KERNEL_REPO)
        )
        return {b.name: b.target_commit for b in refs.branches}

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


def _change(file: LayoutFile, remote: tuple[str | None, str | None] | None) -> Change:
    """How the repo's file (blob id, LFS sha256) compares with ``file``."""
    if remote is None:
        return Change.ADD
    blob_id, lfs_sha256 = remote
    if lfs_sha256 is not None:
        same = file.sha256 == lfs_sha256.lower()
    else:
        same = file.blob_id == (blob_id or "").lower()
    return Change.UNCHANGED if same else Change.UPDATE


_GET_KERNEL = re.compile(r"""get_kernel\(\s*["']([^"']+)["']""")


def _check_card_repo(layout: Layout, repo: str) -> None:
    """A card whose ``get_kernel(...)`` lines all name another repo (build.toml's
    ``[general.hub] repo-id`` not the ``--repo``) would send the readers of ``repo`` there."""
    card = layout.files.get(CARD)
    if card is None:
        return
    with card.path.open("rb") as f:
        named = dict.fromkeys(_GET_KERNEL.findall(f.read(1 << 20).decode("utf-8", "replace")))
    if named and repo.lower() not in {n.lower() for n in named}:
        other = next(iter(named))
        raise UsageError(
            f"{card.path}: the kernel card tells readers get_kernel({other!r}), but --repo is "
            f"{repo}",
            hint=f'set repo-id = "{repo}" under [general.hub] in build.toml and build with '
            f"--hub-layout again, or pass --repo {other}",
        )


def upload(req: UploadRequest, reporter: Reporter | None = None) -> UploadResult:
    """Plan, and unless ``req.dry_run`` make, the commit of the variants to branch ``v<major>``."""
    reporter = reporter or SilentReporter()
    if (problem := repo_id_problem(req.repo)) is not None:
        raise UsageError(
            f"--repo {req.repo!r} is not a Hub repo id: it {problem}",
            hint="pass org/name, e.g. my-org/img2gray",
        )
    settings = HubSettings.from_env()
    timeout = (
        _first_set(req.timeout, "--timeout", TIMEOUT_VARIABLE, seconds)
        or hub_timeout(os.environ)
        or _UPLOAD_TIMEOUT
    )
    tries = (
        _first_set(req.tries, "--tries", TRIES_VARIABLE, lambda t, w: count(t, w, _MOST_TRIES))
        or _TRIES
    )
    if settings.offline:
        raise UsageError(
            "HF_HUB_OFFLINE is set: upload (even --dry-run) needs the Hub",
            hint="unset HF_HUB_OFFLINE",
        )
    scope = req.repo.rsplit("/", 1)[1]
    with step(reporter, scope, f"check the layout in {req.folder}") as detail:
        layout = read_layout(req.folder, req.version)
        _check_card_repo(layout, req.repo)
        detail.append(f"{len(layout.variants)} variant(s), {len(layout.files)} file(s): ok")
    branch = f"v{layout.major}"
    token = hub_token(settings)
    if token is None and not req.dry_run:
        raise UsageError(f"no Hub token to push {req.repo} with", hint=_TOKEN_HINT)
    hub = _Hub(req.repo, settings, token, timeout, tries)
    from huggingface_hub.constants import DEFAULT_REVISION

    with step(reporter, scope, f"compare with {hub.where}, branch {branch}") as detail:
        exists = hub.exists()
        branches = hub.branches() if exists else {}
        head = branches.get(branch)
        default = DEFAULT_REVISION if DEFAULT_REVISION in branches else min(branches, default=None)
        base = branch if head is not None else default
        remote = hub.tree(base) if base is not None else {}
        detail.append(
            f"branch {branch} at {head[:12]}"
            if head
            else f"no branch {branch} (from {base})"
            if base
            else "no repo yet"
        )
    planned: list[PlannedFile] = []
    contents: dict[str, LayoutFile] = {}  # what the commit adds or updates
    for path, file in sorted(layout.files.items()):
        change = _change(file, remote.get(path))
        planned.append(PlannedFile(path, change, file.size))
        if change is not Change.UNCHANGED:
            contents[path] = file
    uploaded = {f"{BUILD_DIR}/{v}/" for v in layout.variants}
    planned += [
        PlannedFile(path, Change.REMOVE)
        for path in sorted(remote)
        if path.startswith(tuple(uploaded)) and path not in layout.files
    ]
    on_branch = {
        p.split("/")[1] for p in remote if p.startswith(BUILD_DIR + "/") and p.count("/") >= 2
    }
    kept = sorted(on_branch - set(layout.variants))
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
    contents: dict[str, LayoutFile],
    reporter: Reporter,
    scope: str,
) -> UploadResult:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    # Paths, not bytes: huggingface_hub reads each file in chunks when it sends it. Made first:
    # a file changed since the check stops the upload before the Hub is changed at all.
    operations: list[Any] = [_add(CommitOperationAdd, path, f) for path, f in contents.items()]
    operations += [
        CommitOperationDelete(path_in_repo=f.path) for f in plan.files if f.change is Change.REMOVE
    ]
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
    contents: dict[str, LayoutFile],
) -> tuple[str, str | None]:
    """The commit's id and URL (None: its answer was lost), made once (the module docstring)."""
    what = f"committing to {plan.branch}"
    for attempt in range(1, hub.tries + 1):
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
            if attempt == hub.tries:
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


def _add(operation: Any, path: str, file: LayoutFile) -> Any:
    """The commit's operation adding ``file``, which huggingface_hub hashes again as it makes
    it: a file changed since read_layout checked it is refused, not pushed unchecked."""
    op = operation(path_in_repo=path, path_or_fileobj=str(file.path))
    if op.upload_info.sha256.hex() != file.sha256:
        raise UsageError(
            f"{file.path}: changed since the layout was checked",
            hint="let whatever writes the layout finish, then rerun the upload",
        )
    return op


def _holds(
    tree: dict[str, tuple[str | None, str | None]],
    contents: dict[str, LayoutFile],
    plan: UploadResult,
) -> bool:
    """Whether ``tree`` holds the upload's added and updated files and none it removes."""
    removed = [f.path for f in plan.files if f.change is Change.REMOVE]
    return all(
        _change(file, tree.get(path)) is Change.UNCHANGED for path, file in contents.items()
    ) and not any(path in tree for path in removed)
