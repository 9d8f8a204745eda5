"""Candidate wheels from the places ``kernelwheel install`` is told to look: ``--find-links``
folders and pages, PEP 503 indexes (docs/install.md, "Selection", step 2). Links keep their
``#sha256=`` fragment, which the pinned pip command hands back to pip."""

from __future__ import annotations

import base64
import os
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from http.client import HTTPResponse
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote, urldefrag, urljoin, urlparse, urlsplit, urlunsplit

from packaging.utils import canonicalize_name

from ..errors import KernelwheelError, UsageError
from ..model.sources import PipSources, is_index_url
from ..wheels.reader import dist_info_entries, parse_metadata

_TIMEOUT = 60  # seconds: a page's whole read, a download's each read
# A wheel's whole download (the socket's timeout bounds each read alone: a server trickling a
# byte a minute would hold install for ever); 30 min: 2 GiB at 1.2 MB/s.
DOWNLOAD_TIMEOUT_VARIABLE = "KERNELWHEEL_DOWNLOAD_TIMEOUT"
_DOWNLOAD_TIMEOUT = 1800.0
_PAGE_LIMIT = 64 << 20  # bytes: PyPI's largest simple pages are a few MiB
_NOT_THERE = (403, 404, 410)  # HTTP codes of a project page an index does not hold
_METADATA_LIMIT = 1 << 20  # bytes of a local wheel's METADATA read for its Requires-Python
# An index root's walk (``variants``): pages read at most, and seconds in all. A kernelwheel
# site's root links a few dozen; PyPI's links 600,000 projects, PyTorch's /whl/ thousands.
_ROOT_PAGES = 500
_ROOT_TIMEOUT = 300


@dataclass(frozen=True)
class Candidate:
    filename: str
    location: str  # a local path, or a URL without its fragment
    sha256: str | None  # from the link's #sha256= fragment (local files: hashed when chosen)
    source: str  # the folder, page or index it was listed by
    yanked: str | None = None  # PEP 592: the reason, "" when none is given
    # Requires-Python: a page's data-requires-python (PEP 503), a local wheel's METADATA
    requires_python: str | None = None

    @property
    def is_local(self) -> bool:
        return "://" not in self.location


class _Links(HTMLParser):
    """The attributes of every ``<a>`` of the page ``text``: ``_Links(text).links``; its first
    ``<base href>``, which its relative links resolve against (as pip resolves them)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []
        self.base: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))
        elif tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")


def _check_url(url: str, option: str) -> None:
    if not is_index_url(url):
        raise UsageError(
            f"{option} {url!r} is not an http(s):// or file:// URL",
            hint=f"e.g. {option} https://example.org/simple/torch2.14/cu130/",
        )


def _read_page(
    url: str, option: str, *, missing_ok: bool, skipped: list[str] | None = None
) -> tuple[str, str] | None:
    """The page's URL after redirects (its relative links resolve against it, as pip's do) and its
    text; None when missing and ``missing_ok`` (HTTP answers but 404 noted in ``skipped``)."""
    if url.startswith("file:"):
        path = Path(unquote(urlparse(url).path))
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            if missing_ok:
                return None
            raise UsageError(f"{option} {url}: no such page ({path})", hint="check the path")
        return url, path.read_text("utf-8", "replace")
    try:
        with _open(url, "text/html") as response:
            return _same_login(response.geturl(), url), _read_body(response, url, option)
    except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors
        # 403: what a bucket behind a CDN answers for a key it lacks (PyTorch's index does, for
        # a project it does not hold); 410: gone. pip skips such a page too.
        if missing_ok and isinstance(exc, urllib.error.HTTPError) and exc.code in _NOT_THERE:
            exc.close()
            if skipped is not None and exc.code != 404:
                skipped.append(f"{url}: HTTP {exc.code} {exc.reason}")
            return None
        raise _url_error(exc, f"{option} {url}", "read", "check the URL") from None


def _keeps_login(old: str, new: str) -> bool:
    """Whether a redirect from ``old`` to ``new`` keeps the login (pip's rule): the same host and
    port, no step down to http; a page moved to a CDN is not sent the index's password."""
    before, after = urlsplit(old), urlsplit(new)
    same_host = before.netloc.rpartition("@")[2] == after.netloc.rpartition("@")[2]
    return same_host and after.scheme in (before.scheme, "https")


class _LoginStaysOnItsHost(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not _keeps_login(req.full_url, new.full_url):
            new.remove_header("Authorization")
        return new


_OPENER = urllib.request.build_opener(_LoginStaysOnItsHost)


def _open(url: str, accept: str | None = None) -> HTTPResponse:
    """``url`` opened, a login in it (``https://user:token@host/``) sent as ``Authorization``."""
    parts = urlsplit(url)
    login, _, host = parts.netloc.rpartition("@")
    request = urllib.request.Request(urlunsplit(parts._replace(netloc=host)))
    if accept:
        request.add_header("Accept", accept)
    if login:
        user, _, password = login.partition(":")
        pair = f"{unquote(user)}:{unquote(password)}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(pair).decode("ascii"))
    response: HTTPResponse = _OPENER.open(request, timeout=_TIMEOUT)
    return response


def _same_login(final: str, asked: str) -> str:
    """``final`` (where ``asked`` led, or a link of its page) with ``asked``'s login where on the
    same host and without its own: the wheels it links are downloaded with it."""
    login, _, host = urlsplit(asked).netloc.rpartition("@")
    parts = urlsplit(final)
    if not login or "@" in parts.netloc or not _keeps_login(asked, final):
        return final
    return urlunsplit(parts._replace(netloc=f"{login}@{host}"))


def _read_body(response: HTTPResponse, url: str, option: str) -> str:
    """A page's text, read within :data:`_TIMEOUT` seconds in all (the socket's timeout bounds
    each read alone: a trickled body would hold the command for ever), at most _PAGE_LIMIT."""
    deadline = time.monotonic() + _TIMEOUT
    data = bytearray()
    while chunk := response.read1(1 << 16):
        data += chunk
        if len(data) > _PAGE_LIMIT or time.monotonic() > deadline:
            what = (
                f"is over {_PAGE_LIMIT >> 20} MiB"
                if len(data) > _PAGE_LIMIT
                else f"was not read whole within {_TIMEOUT} s ({len(data)} bytes came)"
            )
            raise UsageError(
                f"{option} {url}: the page {what}",
                hint="check that the URL is a package index or a find-links page, and that "
                "the server answers",
            )
    return data.decode("utf-8", "replace")


def _url_error(exc: OSError | ValueError, subject: str, verb: str, http_hint: str) -> UsageError:
    """The refusal of ``subject``; an HTTP answer's connection is closed."""
    if not isinstance(exc, urllib.error.HTTPError):
        reason = getattr(exc, "reason", exc)
        return UsageError(
            f"{subject}: cannot be {verb} ({reason})",
            hint="check the URL and that the server is reachable",
        )
    exc.close()
    if exc.code == 401:  # the login is the fix, not the URL
        had = "@" in urlsplit(subject.rpartition(" ")[2]).netloc
        http_hint = (
            "the index refused the login in the URL: check its user name and token"
            if had
            else "the index wants a login: give it in the URL, as pip takes it "
            "(https://USER:TOKEN@host/simple/)"
        )
    if not 300 <= exc.code < 400:
        return UsageError(f"{subject}: HTTP {exc.code} {exc.reason}", hint=http_hint)
    # urllib's refusal of a redirect loop is three lines quoting its own limit
    if (led := exc.headers.get("Location")) is None:
        return UsageError(
            f"{subject}: HTTP {exc.code}, a redirect with no Location", hint=http_hint
        )
    return UsageError(
        f"{subject}: redirects in a loop, or more than "
        f"{urllib.request.HTTPRedirectHandler.max_redirections} times (the last, HTTP "
        f"{exc.code}, to {urljoin(exc.url, led)})",
        hint="give the URL the redirects should end at (curl -sIL URL shows where they go)",
    )


def _links(url: str, text: str) -> Iterator[tuple[str, dict[str, str | None]]]:
    """Every link of the page ``text`` read from ``url``, absolute, with its attributes; one to the
    page's own host gets its login, as pip reuses it per host (GitLab's, Artifactory's)."""
    page = _Links(text)
    base = urljoin(url, page.base) if page.base else url
    for attrs in page.links:
        if href := attrs.get("href"):
            yield _same_login(urljoin(base, href), url), attrs


def _sha256(fragment: str) -> str | None:
    return fragment[len("sha256=") :] if fragment.startswith("sha256=") else None


def _from_page(url: str, text: str) -> Iterable[Candidate]:
    for link, attrs in _links(url, text):
        target, fragment = urldefrag(link)
        filename = unquote(urlparse(target).path.rsplit("/", 1)[-1])
        # %2F decoded is no file name (a page's img2gray-1.0-1%2F..%2F..-py3-none-any.whl
        # would be downloaded outside the download folder)
        if not filename.endswith(".whl") or any(c in filename for c in "/\\\0"):
            continue
        yanked, requires = attrs.get("data-yanked"), attrs.get("data-requires-python")
        yield Candidate(filename, target, _sha256(fragment), url, yanked, requires)


def _from_folder(text: str, option: str = "--find-links") -> list[Candidate]:
    folder = Path(text)
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise UsageError(
            f"{option} {text}: {what}",
            hint="pass a folder holding wheels, or an http(s):// or file:// URL",
        )
    try:
        wheels = sorted(p for p in folder.iterdir() if p.suffix == ".whl")
    except OSError as exc:
        raise UsageError(
            f"{option} {text}: cannot be read ({exc.strerror or exc})",
            hint="check the folder's permissions",
        ) from None
    return [
        Candidate(p.name, _absolute(p), None, str(folder), requires_python=_requires_python(p))
        for p in wheels
    ]


def _requires_python(wheel: Path) -> str | None:
    """A local wheel's Requires-Python (pip passes over a build it excludes); None where it has
    none or cannot be read (the chosen build's integrity check names what is wrong)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            found = dist_info_entries(zf.namelist(), "METADATA")
            if len(found) != 1 or zf.getinfo(found[0]).file_size > _METADATA_LIMIT:
                return None  # not read (a zip bomb's METADATA would fill the memory)
            return parse_metadata(zf.read(found[0])).get("Requires-Python")
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return None


def _absolute(path: Path) -> str:
    """``path`` made absolute, a link not followed: a wheelhouse of links into a store names each
    wheel by its link, as pip needs."""
    return os.path.abspath(path)


def list_candidates(
    sources: PipSources, projects: Sequence[str], skipped: list[str] | None = None
) -> list[Candidate]:
    """Every wheel the sources offer for ``projects`` (canonical names), first listing first:
    the index URLs are read with ``--no-index`` too (it keeps them from pip alone)."""
    found: list[Candidate] = []
    for link in sources.find_links:
        if "://" in link:
            _check_url(link, "--find-links")
            if link.startswith("file:") and Path(unquote(urlparse(link).path)).is_dir():
                found += _from_folder(unquote(urlparse(link).path))
            else:
                base, page = _read_page(link, "--find-links", missing_ok=False) or (link, "")
                found += _from_page(base, page)
        else:
            found += _from_folder(link)
    for index in sources.indexes:
        option = "--index-url" if index == sources.index_url else "--extra-index-url"
        _check_url(index, option)
        for project in projects:
            url = f"{index.rstrip('/')}/{project}/"
            if (read := _read_page(url, option, missing_ok=True, skipped=skipped)) is not None:
                found += _from_page(*read)
    wanted = set(projects)
    return [c for c in _unique(found) if project_of(c.filename) in wanted]


def discover(location: str) -> list[Candidate]:
    """Every wheel ``location`` offers, whatever its project (``kernelwheel variants``): a wheel; a
    folder's; a page's that links wheels; else a PEP 503 root's, each project page read."""
    option, path = "SOURCE", Path(location)
    if location.endswith(".whl") and path.is_file():
        return [Candidate(path.name, _absolute(path), None, location, None, _requires_python(path))]
    if "://" not in location:
        return _from_folder(location, option)
    _check_url(location, option)
    folder = unquote(urlparse(location).path)
    if folder.endswith(".whl"):  # one wheel's URL (a link copied from an index's page)
        if location.startswith("file:"):
            return discover(folder)
        target, fragment = urldefrag(location)
        return [Candidate(folder.rsplit("/", 1)[-1], target, _sha256(fragment), location)]
    if location.startswith("file:") and Path(folder).is_dir():
        if not (Path(folder) / "index.html").is_file():
            return _from_folder(folder, option)
    url = location if location.endswith("/") or location.endswith(".html") else location + "/"
    base, page = _read_page(url, option, missing_ok=False) or (url, "")
    walk = _Walk(base, _ROOT_PAGES, time.monotonic() + _ROOT_TIMEOUT)
    return list(_from_page(base, page)) or _unique(walk.read(base, page, levels=2))


def site_root_hint(indexes: Sequence[str]) -> str | None:
    """Where an ``--index-url`` is the root of a site ``kernelwheel index`` wrote (it links the
    indexes ``all/``, ``cpu/``, ``torch2.13/cpu/``, … rather than projects), the fix naming them."""
    for index in indexes:
        try:
            read = _read_page(index.rstrip("/") + "/", "--index-url", missing_ok=True)
        except KernelwheelError:
            continue
        hrefs = [a.get("href") for a in _Links(read[1]).links] if read else []
        if "all/" in hrefs:
            root = index.rstrip("/")
            others = ", ".join(f"{root}/{h}" for h in hrefs if h and h.startswith("torch"))
            return (
                f"{root}/ is the root of a `kernelwheel index` site: it lists indexes, not "
                f"projects; pass --index-url {root}/all/ (every build: install chooses the one "
                f"that fits)" + (f", or the index of one torch ({others})" if others else "")
            )
    return None


@dataclass
class _Walk:
    """The pages of an index root (``root``), read ``left`` at most, before ``deadline``."""

    root: str
    left: int
    deadline: float

    def read(self, url: str, page: str, *, levels: int) -> list[Candidate]:
        """The wheels of the pages ``page`` links on its own host; a folder link with no wheel is
        read as a root in turn, ``levels`` deep (a kernelwheel site's root links its indexes)."""
        host = urlparse(url).netloc
        subs = [s for s, _ in _links(url, page) if urlparse(s).netloc == host]
        subs = [s for s in subs if not s.endswith(".whl")]
        self.left -= len(subs)  # refused before any is read: PyPI's would take hours
        if self.left < 0:
            self._refuse(f"links more than {_ROOT_PAGES} pages")
        found: list[Candidate] = []
        for sub in subs:
            if time.monotonic() > self.deadline:
                self._refuse(f"was not read whole within {_ROOT_TIMEOUT} s")
            sub, text = _read_page(sub, "SOURCE", missing_ok=True) or (sub, "")
            wheels = list(_from_page(sub, text))
            if not wheels and levels > 1 and sub.endswith("/"):
                wheels = self.read(sub, text, levels=levels - 1)
            found += wheels
        return found

    def _refuse(self, what: str) -> NoReturn:
        raise UsageError(
            f"SOURCE {self.root}: the index root {what} (a whole index, as PyPI's?)",
            hint="pass the page of the project whose builds you want "
            f"({self.root.rstrip('/')}/<project>/)",
        )


def _unique(found: list[Candidate]) -> list[Candidate]:
    first: dict[str, Candidate] = {}
    for candidate in found:  # one wheel file name is one build: the first listing wins
        first.setdefault(candidate.filename, candidate)
    return list(first.values())


def project_of(filename: str) -> str:
    """The project a file in a wheel listing is of, by its name's first part (``img2gray`` of
    ``img2gray-latest.whl`` too, a name no wheel has)."""
    return str(canonicalize_name(filename.split("-", 1)[0]))


def fetch(candidate: Candidate, folder: Path) -> Path:
    """The candidate's file here, a URL downloaded into ``folder``, so its integrity can be checked
    before pip is asked to install it."""
    if candidate.is_local:
        return Path(candidate.location)
    if candidate.location.startswith("file:"):
        return Path(unquote(urlparse(candidate.location).path))
    target = folder / candidate.filename
    limit = _download_timeout()
    deadline = time.monotonic() + limit
    try:
        with _open(candidate.location) as response, target.open("wb") as out:
            while chunk := response.read1(1 << 20):
                out.write(chunk)
                if time.monotonic() > deadline:
                    raise UsageError(
                        f"{candidate.location}: not downloaded within {limit:g} s "
                        f"({out.tell()} bytes came)",
                        hint="check that the server answers; on a slow link, give "
                        f"{DOWNLOAD_TIMEOUT_VARIABLE} more seconds",
                    )
    except (OSError, ValueError) as exc:
        hint = f"check the index that listed it ({candidate.source})"
        raise _url_error(exc, candidate.location, "downloaded", hint) from None
    return target


def _download_timeout() -> float:
    """:envvar:`KERNELWHEEL_DOWNLOAD_TIMEOUT` checked (seconds, more than 0, at most a day),
    else the default."""
    text = os.environ.get(DOWNLOAD_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return _DOWNLOAD_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86400:  # nan fails too
        raise UsageError(
            f"{DOWNLOAD_TIMEOUT_VARIABLE}={text!r} is not a number of seconds (more than 0, at "
            "most 86400)",
            hint=f"give {DOWNLOAD_TIMEOUT_VARIABLE} a number of seconds such as 600, or unset it",
        )
    return value
