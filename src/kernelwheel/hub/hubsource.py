"""A kernel repo on the Hugging Face Hub, read with huggingface_hub (docs/to-wheel.md, "Using
it"): the ``kernel``-type repo, else the ``model``-type one of that id; only ``build/…`` files are
downloaded, into huggingface_hub's cache, and every file is verified before use (:mod:`.safety`)."""

from __future__ import annotations

import functools
import glob
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .._util import secret
from ..errors import HubError, HubUnavailable, UsageError
from ..log import Reporter
from .revision import Ref, RefKind, find_ref
from .safety import Announced, check_repo_path
from .source import BUILD_DIR, FileReader, RepoFile

# huggingface_hub's constants.REPO_TYPE_KERNEL / REPO_TYPE_MODEL (not imported here: the module
# must not import huggingface_hub until a source is made).
KERNEL_REPO = "kernel"
MODEL_REPO = "model"

_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_REPO_ID_MAX = 96  # huggingface_hub's validate_repo_id: the whole id
_TRUE = {"1", "ON", "YES", "TRUE"}
BACKOFF_VARIABLE = "KERNELWHEEL_HUB_BACKOFF"
_DEFAULT_ENDPOINT = "https://huggingface.co"
_VARIANT_DOWNLOADS = 8  # variant folders downloading at once
_FILE_DOWNLOADS = 4  # files of one variant downloading at once
T = TypeVar("T")


def repo_id_problem(text: str) -> str | None:
    """Why huggingface_hub's ``validate_repo_id`` would refuse ``text``; None if it would not."""
    if _REPO_ID.fullmatch(text) is None:
        return "is not org/name of ASCII letters, digits, '-', '_' and '.'"
    if len(text) > _REPO_ID_MAX:
        return f"is {len(text)} characters long; the Hub allows {_REPO_ID_MAX}"
    if ".." in text or "--" in text:
        return "holds '..' or '--', which the Hub refuses"
    if text.endswith(".git"):
        return "ends with '.git', which the Hub refuses (the id names the repo, not its URL)"
    if any(part.endswith(("-", ".")) for part in text.split("/")):
        return "has a part that ends with '-' or '.', which the Hub refuses"
    return None


def checked_endpoint(value: str | None, where: str = "HF_ENDPOINT") -> str:
    """``where``'s Hub address, checked now: huggingface_hub would fail in its first request."""
    text = (value or "").strip()
    if not text:
        return _DEFAULT_ENDPOINT
    if (problem := _endpoint_problem(text)) is not None:
        raise UsageError(
            f"{where}={text!r} {problem}",
            hint=f"set {where} to the Hub's address, e.g. https://huggingface.co or "
            "http://127.0.0.1:8080 (a mirror), or unset it",
        )
    return text.rstrip("/")


def _endpoint_problem(text: str) -> str | None:
    if not text.isascii() or any(c.isspace() or ord(c) < 32 for c in text):
        return "is no URL: it holds whitespace, control or non-ASCII characters"
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        return f"is no URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "is not an http:// or https:// URL"
    if not parts.hostname:
        return "names no host"
    if port == 0:
        return "has port 0: a port is a number from 1 to 65535"
    if parts.query or parts.fragment:
        return "has a query or fragment; the endpoint is a base address"
    return None


@dataclass(frozen=True)
class HubSettings:
    """huggingface_hub's environment settings, read now. ``None`` leaves huggingface_hub's
    default (its stored token; ``~/.cache/huggingface/hub``)."""

    endpoint: str
    token: str | None
    cache_dir: Path | None
    offline: bool
    # Seconds to wait for the Hub to connect or answer (huggingface_hub's own variables, whose
    # defaults are 10 s; its HTTP client otherwise waits forever for an API answer).
    timeout: float = 10.0
    # Seconds before a failed call's second try; the n-th pause is n times it (1 s, then 2 s).
    backoff: float = 1.0

    def pause(self, attempt: int) -> float:
        return self.backoff * attempt

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HubSettings:
        env = os.environ if environ is None else environ
        cache: str | None = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
        if not cache and env.get("HF_HOME"):
            cache = os.path.join(env["HF_HOME"], "hub")
        backoff = env.get(BACKOFF_VARIABLE)
        token_variable = "HF_TOKEN" if env.get("HF_TOKEN") else "HUGGING_FACE_HUB_TOKEN"
        return cls(
            endpoint=checked_endpoint(env.get("HF_ENDPOINT")),
            token=checked_token(env.get(token_variable), token_variable),
            cache_dir=Path(os.path.expandvars(os.path.expanduser(cache))) if cache else None,
            offline=(env.get("HF_HUB_OFFLINE") or "").upper() in _TRUE,
            timeout=hub_timeout(env) or 10.0,
            backoff=seconds(backoff, BACKOFF_VARIABLE, zero=True, most=300) if backoff else 1.0,
        )


def checked_token(value: str | None, where: str) -> str | None:
    """``where``'s token, registered as a secret, stripped (``$(cat FILE)`` keeps a newline no
    HTTP header may hold); None when blank; an odd character is named by position, never shown."""
    if value is None:
        return None
    secret(value)
    token = value.strip()
    if not token:
        return None
    bad = next((i for i, c in enumerate(token) if not "!" <= c <= "~"), None)
    if bad is not None:
        char = token[bad]
        kind = "whitespace" if char.isspace() else "a control character"
        if ord(char) > 127:
            kind = "a non-ASCII character"
        raise UsageError(
            f"{where}: the Hub token holds {kind} (character {bad + 1} of {len(token)}), which "
            "no Hub token has; it was not sent",
            hint=f"set {where} to the token alone, as huggingface.co/settings/tokens shows it "
            "(from a file: HF_TOKEN=$(tr -d '[:space:]' < FILE))",
        )
    return token


def hub_token(settings: HubSettings) -> str | None:
    """HF_TOKEN, else the token huggingface_hub stored (``hf auth login``), checked alike."""
    if settings.token is not None:
        return settings.token
    from huggingface_hub import constants, get_token

    if constants.HF_HUB_DISABLE_IMPLICIT_TOKEN:
        return None
    return checked_token(get_token(), f"the stored Hub token ({constants.HF_TOKEN_PATH})")


def hub_timeout(environ: Mapping[str, str]) -> float | None:
    """``HF_HUB_DOWNLOAD_TIMEOUT``, else ``HF_HUB_ETAG_TIMEOUT``, checked; None if neither."""
    for name in ("HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_ETAG_TIMEOUT"):
        if (environ.get(name) or "").strip():
            return seconds(environ[name], name)
    return None


_MOST_SECONDS = 86400.0  # a day: more is a typo, and huge floats overflow the HTTP client


def seconds(text: str, where: str, *, zero: bool = False, most: float = _MOST_SECONDS) -> float:
    """Seconds as given in ``where`` (a variable, a flag): > 0 (``zero``: or 0), <= ``most``."""
    try:
        value = float(text.strip())
    except ValueError:
        value = float("nan")
    if not (0 <= value if zero else 0 < value) or not value <= most:  # nan fails too
        least = "from 0" if zero else "more than 0"
        what = f"a number of seconds ({least}, at most {most:g})"
        raise _invalid(where, text, what, "a number of seconds such as 30 or 2.5")
    return value


def count(text: str, where: str, most: int) -> int:
    """A whole number from 1 to ``most`` as given in ``where`` (a variable, a flag)."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit() and 1 <= int(stripped) <= most):
        raise _invalid(where, text, f"a whole number from 1 to {most}", "a number such as 3")
    return int(stripped)


def _invalid(where: str, text: str, what: str, example: str) -> UsageError:
    """``--tries '0'`` (a flag) or ``KERNELWHEEL_UPLOAD_TRIES='0'`` (a variable) is not ``what``."""
    if where.startswith("--"):
        return UsageError(f"{where} {text!r} is not {what}", hint=f"give {where} {example}")
    hint = f"give {where} {example}, or unset it"
    return UsageError(f"{where}={text!r} is not {what}", hint=hint)


_TRIES = 3  # a call that times out or cannot connect is tried this often (HubSettings.pause)
# Server answers worth another try (the Hub busy, restarting or rate limiting), for calls that
# may be repeated: reads, and writes that are no-ops the second time.
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_BOUNDED: list[float] = []  # the timeout the installed client factory uses, once installed


def bound_http(timeout: float) -> None:
    """Give huggingface_hub's shared HTTP client a timeout (its default client has none: an
    endpoint that accepts and never answers would hold to-wheel forever)."""
    if _BOUNDED == [timeout]:
        return
    import httpx2
    from huggingface_hub.utils import _http

    def factory() -> httpx2.Client:
        client = _http.default_client_factory()
        client.timeout = httpx2.Timeout(timeout)
        return client

    _http.set_client_factory(factory)
    _BOUNDED[:] = [timeout]


class _Quiet:
    """A do-nothing progress bar: the library never prints (huggingface_hub calls its
    tqdm_class with keyword arguments only when it is not its own tqdm subclass)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.n = 0
        self.total = kwargs.get("total")
        self.disable = True
        self.format_dict: dict[str, Any] = {}

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


class HubSource:
    """A ``kernel``-type Hub repo such as ``drbh/img2gray``, else the ``model``-type one."""

    def __init__(self, repo_id: str, reporter: Reporter | None = None) -> None:
        if (problem := repo_id_problem(repo_id)) is not None:
            raise HubError(
                f"{repo_id!r} is neither a local folder nor a Hub repo id: it {problem}",
                hint="pass org/name (e.g. drbh/img2gray) or the path of a git clone",
            )
        # checked before huggingface_hub is imported: it parses HF_ENDPOINT as it loads
        self.settings = HubSettings.from_env()
        from huggingface_hub import HfApi, constants

        assert constants.REPO_TYPE_KERNEL == KERNEL_REPO  # huggingface_hub >= 1.10
        self.repo_id = repo_id
        self.token = hub_token(self.settings)
        self.api = HfApi(endpoint=self.settings.endpoint, token=self.token or False)
        bound_http(self.settings.timeout)
        self._cache = str(self.settings.cache_dir) if self.settings.cache_dir else None
        self.reporter = reporter
        self.repo_type = KERNEL_REPO
        self._type_settled = False

    @property
    def name(self) -> str:
        return self.repo_id.rsplit("/", 1)[1]

    @property
    def where(self) -> str:
        offline = ", offline" if self.settings.offline else ""
        kind = ", model-type repo" if self.repo_type == MODEL_REPO else ""
        return f"Hub repo {self.repo_id} ({self.settings.endpoint}{offline}{kind})"

    def _typed(self, what: str, fn: Callable[[str], T]) -> T:
        """``fn(repo_type)``: the kernel-type repo until one type has answered; when it is not
        found, the model-type one, and the reporter is told."""
        from huggingface_hub import errors as hf

        if self._type_settled:
            return self._call(what, lambda: fn(self.repo_type))

        def as_type(kind: str) -> T | None:  # None: no repo of that type and id
            try:
                return fn(kind)
            except hf.GatedRepoError:
                raise  # found, but gated: _call says so
            except hf.RepositoryNotFoundError:
                return None

        first = self._call(what, functools.partial(as_type, KERNEL_REPO))
        if first is not None:
            self._type_settled = True
            return first
        second = self._call(what, functools.partial(as_type, MODEL_REPO))
        if second is None:
            raise HubError(
                f"{self.where}: {what}: repository not found (or private), neither as a kernel "
                "repo nor as a model repo",
                hint="check the repo id; for a private repo set HF_TOKEN",
            )
        self._settle_on_model(
            f"{self.repo_id}: no kernel-type repo at {self.settings.endpoint}; reading the "
            "model-type repo of that id (a mirror or a repo from before kernel repos; the "
            "kernels library (>= 0.14) loads only kernel-type repos)"
        )
        return second

    def _settle_on_model(self, message: str) -> None:
        self.repo_type = MODEL_REPO
        self._type_settled = True
        if self.reporter is not None:
            self.reporter.info(self.name, message)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return call_hub(
            self.where, what, fn, pause=self.settings.pause, timeout=self.settings.timeout
        )

    def refs(self) -> Sequence[Ref]:
        if self.settings.offline:
            return self._cached_refs()
        refs = self._typed(
            "listing refs", lambda kind: self.api.list_repo_refs(self.repo_id, repo_type=kind)
        )
        return [Ref(t.name, RefKind.TAG, t.target_commit) for t in refs.tags] + [
            Ref(b.name, RefKind.BRANCH, b.target_commit) for b in refs.branches
        ]

    def _cached_refs(self) -> list[Ref]:
        from huggingface_hub import scan_cache_dir

        info = self._call("reading the cache", lambda: scan_cache_dir(self._cache))
        kinds = [self.repo_type] if self._type_settled else [KERNEL_REPO, MODEL_REPO]
        for kind in kinds:
            found = [
                Ref(name, RefKind.CACHED, revision.commit_hash)
                for repo in info.repos
                if (repo.repo_id, repo.repo_type) == (self.repo_id, kind)
                for revision in repo.revisions
                for name in revision.refs
            ]
            if found:
                if kind == MODEL_REPO and not self._type_settled:
                    self._settle_on_model(
                        f"{self.repo_id}: the cache holds no kernel-type repo of this id "
                        f"(kernels--{self.repo_id.replace('/', '--')}); reading its model-type "
                        "one (models--…), cached before kernel repos"
                    )
                self._type_settled = True
                return sorted(found, key=lambda r: r.name)
        raise HubError(
            f"{self.where}: no refs of this repo are in the local cache "
            f"({self.settings.cache_dir or 'the default HF_HUB_CACHE'}; looked for "
            f"{' and '.join(f'{k}s--' for k in kinds)}{self.repo_id.replace('/', '--')})",
            hint="run once without HF_HUB_OFFLINE to download it, or check HF_HUB_CACHE/HF_HOME",
        )

    def pin(self, name: str, commit: str) -> str:
        """The commit ``name`` names now, recorded in the cache for later offline runs."""
        if self.settings.offline:
            return commit
        resolved = self._typed(
            f"resolving {name}",
            lambda kind: self.api.resolve_revision(
                self.repo_id, revision=name, cache_dir=self._cache, repo_type=kind
            ),
        )
        return str(resolved.resolved)

    def rev_parse(self, revision: str) -> tuple[RefKind, str]:
        if (ref := find_ref(self.refs(), revision, RefKind.CACHED)) is not None:
            return ref.kind, self.pin(revision, ref.commit)
        if re.fullmatch(r"[0-9a-f]{40}", revision):
            if not self.settings.offline:
                self._typed(
                    f"looking up commit {revision}",
                    # timeout given: repo_info's default (None) would turn the bound off
                    lambda kind: self.api.repo_info(
                        self.repo_id,
                        revision=revision,
                        repo_type=kind,
                        timeout=self.settings.timeout,
                    ),
                )
            return RefKind.COMMIT, revision
        if self.settings.offline:
            raise HubError(
                f"{self.where}: revision {revision!r} is not in the local cache",
                hint="run once without HF_HUB_OFFLINE, or pass a cached commit hash",
            )
        return RefKind.COMMIT, self.pin(revision, revision)

    def list_build(self, commit: str) -> Sequence[RepoFile]:
        files = self._cached_listing(commit) if self.settings.offline else self._listing(commit)
        if not files:
            raise HubError(
                f"{self.where} has no build/ folder (or it is empty) at commit {commit}",
                hint="convert a revision that has build/<variant>/ folders, or pass another "
                "VERSION/--revision",
            )
        return files

    def _listing(self, commit: str) -> list[RepoFile]:
        from huggingface_hub import errors as hf
        from huggingface_hub.hf_api import RepoFile as HfRepoFile

        def listing(kind: str) -> list[Any]:
            try:
                return list(
                    self.api.list_repo_tree(
                        self.repo_id,
                        path_in_repo=BUILD_DIR,
                        recursive=True,
                        revision=commit,
                        repo_type=kind,
                    )
                )
            except hf.RemoteEntryNotFoundError:
                return []

        out = []
        for item in self._typed("listing build/", listing):
            if not isinstance(item, HfRepoFile):
                continue
            check_repo_path(item.path, where=self.where)
            if item.path.startswith(BUILD_DIR + "/"):
                lfs = item.lfs
                size, sha256 = (item.size, None) if lfs is None else (lfs.size, lfs.sha256)
                out.append(RepoFile(item.path, Announced(size, item.blob_id, sha256)))
        return out

    def _cached_listing(self, commit: str) -> list[RepoFile]:
        from huggingface_hub import get_cached_repo_tree

        if not self._type_settled:
            self._cached_refs()  # settles the repo type by what the cache holds
        tree = self._call(
            "reading the cached listing",
            lambda: get_cached_repo_tree(
                self.repo_id, revision=commit, cache_dir=self._cache, repo_type=self.repo_type
            ),
        )
        out = []
        for item in tree:
            if item.path.startswith(BUILD_DIR + "/"):
                check_repo_path(item.path, where=self.where)
                out.append(RepoFile(item.path, Announced(size=item.size, blob_id=item.blob_id)))
        return out

    @contextmanager
    def fetch(self, commit: str, files: Sequence[RepoFile]) -> Iterator[FileReader]:
        """Each variant folder downloaded in the background, so converting one overlaps
        downloading the next; the later downloads reuse the listing the first one caches."""
        variants = sorted({f.variant for f in files})
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(_VARIANT_DOWNLOADS, len(variants))),
            thread_name_prefix="kernelwheel-download",
        )
        futures: dict[str, Future[Path]] = {}
        first: Future[Path] | None = None  # the later downloads wait for the first one
        for variant in variants:
            futures[variant] = pool.submit(self._download, commit, variant, first)
            first = first or futures[variant]
        try:
            yield _StreamingReader(futures, self.where)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _download(self, commit: str, variant: str, first: Future[Path] | None) -> Path:
        from huggingface_hub import snapshot_download

        if first is not None:
            first.result()  # the first download, whose listing is cached once it is done
        snapshot = self._typed(
            f"downloading build/{variant}/",
            lambda kind: snapshot_download(
                self.repo_id,
                repo_type=kind,
                revision=commit,
                allow_patterns=[f"{BUILD_DIR}/{glob.escape(variant)}/*"],
                cache_dir=self._cache,
                endpoint=self.settings.endpoint,
                token=self.token or False,
                local_files_only=self.settings.offline,
                tqdm_class=_Quiet,
                max_workers=_FILE_DOWNLOADS,
                etag_timeout=self.settings.timeout,
            ),
        )
        return Path(snapshot)


@dataclass(frozen=True)
class _StreamingReader:
    snapshots: dict[str, Future[Path]]
    where: str

    def read(self, file: RepoFile) -> tuple[bytes, Announced]:
        root = self.snapshots[file.variant].result()
        try:
            return (root / file.path).read_bytes(), file.announced
        except FileNotFoundError:
            raise HubError(
                f"{self.where}: {file.path} is listed but was not downloaded",
                hint="delete the repo's folder in the Hub cache and retry",
            ) from None


def call_hub(
    where: str,
    what: str,
    fn: Callable[[], T],
    *,
    pause: Callable[[int], float],
    timeout: float,
    tries: int = _TRIES,
    retry_status: frozenset[int] = frozenset(),
    unanswered_hint: str = "check the network and HF_ENDPOINT; a slow link may need a longer "
    "HF_HUB_DOWNLOAD_TIMEOUT (seconds); HF_HUB_OFFLINE=1 uses what is cached",
) -> T:
    """``fn()``, its huggingface_hub and network errors as HubErrors naming ``where``, ``what``
    and the fix. No answer within ``timeout`` (or one of ``retry_status``) is tried again, up
    to ``tries`` times, ``pause(n)`` seconds after the n-th, then a :class:`HubUnavailable`."""
    for attempt in range(1, tries + 1):
        try:
            return _call_hub_once(where, what, fn, retry_status)
        except _Unanswered as exc:
            if attempt < tries:
                time.sleep(pause(attempt))
                continue
            if exc.status is not None:
                raise HubUnavailable(
                    f"{where}: {what}: the Hub answered {exc}"
                    + (f" ({attempt} tries)" if attempt > 1 else ""),
                    hint="the Hub is busy or down (status.huggingface.co): retry later",
                ) from None
            plural = "try" if attempt == 1 else "tries"
            failed = f"no answer within {timeout:g} s" if exc.timed_out else "no connection"
            raise HubUnavailable(
                f"{where}: {what}: {failed}, {attempt} {plural} ({exc})", hint=unanswered_hint
            ) from None
    raise AssertionError("unreachable")


def _call_hub_once(where: str, what: str, fn: Callable[[], T], retry_status: frozenset[int]) -> T:
    from huggingface_hub import errors as hf

    try:
        return fn()
    except hf.GatedRepoError as exc:
        raise HubError(
            f"{where}: {what}: the repo is gated ({_first_line(exc)})",
            hint="accept its terms on the Hub and set HF_TOKEN to a token of that account",
        ) from exc
    except hf.RepositoryNotFoundError as exc:
        raise HubError(
            f"{where}: {what}: repository not found (or private)",
            hint="check the repo id; for a private repo set HF_TOKEN",
        ) from exc
    except hf.RevisionNotFoundError as exc:
        raise HubError(
            f"{where}: {what}: no such revision ({_first_line(exc)})",
            hint="list the repo's branches and tags on the Hub, or pass another VERSION",
        ) from exc
    except (hf.LocalEntryNotFoundError, hf.CacheNotFound, hf.CachedRepoTreeNotFoundError) as exc:
        raise HubError(
            f"{where}: {what}: not in the local cache ({_first_line(exc)})",
            hint="run once without HF_HUB_OFFLINE to download it, or check HF_HUB_CACHE/HF_HOME",
        ) from exc
    except hf.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in retry_status:
            raise _Unanswered(f"{status}: {_first_line(exc)}", status) from exc
        raise HubError(
            f"{where}: {what}: {_first_line(exc)}",
            hint="check HF_ENDPOINT and HF_TOKEN, or retry later",
        ) from exc
    except Exception as exc:
        if (cause := _unanswered(exc)) is not None:
            timed_out = isinstance(cause, TimeoutError) or "Timeout" in type(cause).__name__
            raise _Unanswered(f"{type(exc).__name__}: {exc}", timed_out=timed_out) from exc
        if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "requests"):
            raise HubError(
                f"{where}: {what}: cannot reach the Hub ({type(exc).__name__}: {exc})",
                hint="check the network and HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use "
                "what is cached",
            ) from exc
        raise


class _Unanswered(Exception):
    """A Hub call that timed out, could not connect (``status`` None) or got a server error
    worth another try (``status``); ``timed_out``: no answer in time, rather than none at all
    (the host not found, the connection refused or dropped)."""

    def __init__(self, message: str, status: int | None = None, *, timed_out: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.timed_out = timed_out


def _unanswered(exc: BaseException) -> BaseException | None:
    """The timeout or refused connection in ``exc``'s chain, from whichever HTTP library, or
    wrapped by huggingface_hub (its errors keep the cause); None when it is neither."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        name = type(seen).__name__
        module = type(seen).__module__.split(".")[0]
        if isinstance(seen, TimeoutError) or (
            module in ("httpx", "httpx2", "httpcore", "requests", "urllib3")
            and ("Timeout" in name or name in ("ConnectError", "ReadError", "RemoteProtocolError"))
        ):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
