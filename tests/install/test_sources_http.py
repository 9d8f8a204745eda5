"""Index pages as real servers serve them: a redirect (relative links resolve against the page
it led to, as pip resolves them) and a body that trickles in (bounded in all, not per read).
An in-process HTTP server on loopback; no interpreter is probed."""

from __future__ import annotations

import base64
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag

from kernelwheel.errors import UsageError
from kernelwheel.install import sources
from kernelwheel.install.probe import Target
from kernelwheel.install.select import select
from kernelwheel.install.service import NoMatch
from kernelwheel.install.sources import discover, list_candidates
from kernelwheel.model.sources import PipSources
from kernelwheel.wheels import WheelSpec, write_wheel

WHEEL = "img2gray-0.1.0+torch2.13.cpu.cxx11-cp310-abi3-linux_x86_64.whl"
PAGE = f'<html><body><a href="{WHEEL}#sha256=00">{WHEEL}</a></body></html>'.encode()

Handler = Callable[[BaseHTTPRequestHandler], None]
TARGET = Target(Path("/py"), (3, 11), "cpython", "x86_64", None, None, ("py3-none-any",), True)


@contextmanager
def serve(handle: Handler) -> Iterator[str]:
    class _H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            handle(self)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _redirecting(h: BaseHTTPRequestHandler) -> None:
    """``/simple/img2gray/`` moved to ``/files/img2gray.html`` (a CDN, a renamed folder); only
    the new place holds the wheel."""
    if h.path == "/simple/img2gray/":
        h.send_response(301)
        h.send_header("Location", "/files/img2gray.html")
        h.end_headers()
    elif h.path == "/files/img2gray.html":
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.end_headers()
        h.wfile.write(PAGE)
    else:
        h.send_response(404)
        h.end_headers()


def test_links_of_a_redirected_index_page_resolve_against_where_it_led() -> None:
    with serve(_redirecting) as url:
        found = list_candidates(PipSources(index_url=f"{url}/simple/"), ["img2gray"])
        (listed,) = discover(f"{url}/simple/img2gray/")
        (linked,) = list_candidates(
            PipSources(find_links=(f"{url}/simple/img2gray/",)), ["img2gray"]
        )
    assert [c.location for c in found] == [f"{url}/files/{WHEEL}"]  # before: /simple/img2gray/…
    assert listed.location == linked.location == f"{url}/files/{WHEEL}"


def _trickling(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/html")
    h.end_headers()
    try:
        for _ in range(60):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.1)
    except OSError:
        pass  # the client gave up


def test_a_page_that_trickles_in_is_given_up_on_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sources, "_TIMEOUT", 1)  # each byte comes within it: no read times out
    with serve(_trickling) as url:
        start = time.monotonic()
        with pytest.raises(UsageError) as err:
            list_candidates(PipSources(find_links=(f"{url}/slow/",)), ["img2gray"])
        took = time.monotonic() - start
    assert took < 3  # before: the whole 6 s body was waited for (for ever, with no end)
    assert f"--find-links {url}/slow/: the page was not read whole within 1 s" in err.value.message
    assert err.value.hint and "server answers" in err.value.hint


def test_a_wheel_that_trickles_in_is_given_up_on_at_the_download_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server sending a byte every 0.1 s (every read well within the socket's timeout): the
    download had no end; KERNELWHEEL_DOWNLOAD_TIMEOUT bounds it in all."""
    monkeypatch.setenv("KERNELWHEEL_DOWNLOAD_TIMEOUT", "1")
    with serve(_trickling) as url:
        start = time.monotonic()
        with pytest.raises(UsageError) as err:
            sources.fetch(sources.Candidate(WHEEL, f"{url}/{WHEEL}", None, url), tmp_path)
        took = time.monotonic() - start
    assert took < 3  # before: the whole 6 s body was waited for (for ever, with no end)
    assert err.value.message.startswith(f"{url}/{WHEEL}: not downloaded within 1 s (")
    assert err.value.hint and "KERNELWHEEL_DOWNLOAD_TIMEOUT" in err.value.hint


@pytest.mark.parametrize("value", ["0", "soon", "1e9"])
def test_an_unusable_download_deadline_is_refused_naming_the_variable(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWHEEL_DOWNLOAD_TIMEOUT", value)
    with serve(_trickling) as url, pytest.raises(UsageError) as err:
        sources.fetch(sources.Candidate(WHEEL, f"{url}/{WHEEL}", None, url), tmp_path)
    assert err.value.message == (
        f"KERNELWHEEL_DOWNLOAD_TIMEOUT={value!r} is not a number of seconds (more than 0, at "
        "most 86400)"
    )


LOGIN = "Basic " + base64.b64encode(b"ci:t0k3n/x").decode()


def test_a_private_index_with_a_login_in_its_url_is_read_and_its_wheel_downloaded(
    tmp_path: Path,
) -> None:
    """``https://user:token@host/simple/`` is how pip reads a private index. Before, the
    login went into the host name ("Name or service not known"). The login reaches the index's
    host (its page, a same-host redirect, the wheel) and not another host a redirect names."""
    seen: list[tuple[str, str | None]] = []
    wheel = b"PK\x05\x06" + bytes(18)  # an empty zip stands for the wheel's bytes

    def cdn(h: BaseHTTPRequestHandler) -> None:
        seen.append((f"cdn{h.path}", h.headers.get("Authorization")))
        h.send_response(200)
        h.end_headers()
        h.wfile.write(b'<a href="other-1.0-py3-none-any.whl">other</a>')

    with serve(cdn) as cdn_url:

        def private(h: BaseHTTPRequestHandler) -> None:
            seen.append((h.path, h.headers.get("Authorization")))
            if h.headers.get("Authorization") != LOGIN:
                h.send_response(401)
                h.end_headers()
            elif h.path == "/simple/img2gray/":
                h.send_response(302)  # moved on the same host: the login follows
                h.send_header("Location", "/pages/img2gray/")
                h.end_headers()
            elif h.path == "/simple/other/":
                h.send_response(302)  # moved to another host: it does not
                h.send_header("Location", f"{cdn_url}/other/")
                h.end_headers()
            elif h.path == "/pages/img2gray/":
                h.send_response(200)
                h.end_headers()
                h.wfile.write(PAGE)
            elif unquote(h.path) == f"/pages/img2gray/{WHEEL}":
                h.send_response(200)
                h.end_headers()
                h.wfile.write(wheel)
            else:
                h.send_response(404)
                h.end_headers()

        with serve(private) as url:
            index = url.replace("http://", "http://ci:t0k3n%2Fx@") + "/simple/"
            found = list_candidates(PipSources(index_url=index), ["img2gray", "other"])
            got = [sources.fetch(c, tmp_path) for c in found]
    login_url = index.removesuffix("/simple/")
    assert [c.location for c in found] == [
        f"{login_url}/pages/img2gray/{WHEEL}",  # pip gets the wheel's URL with the login
        f"{cdn_url}/other/other-1.0-py3-none-any.whl",
    ]
    assert got[0].read_bytes() == wheel
    assert ("/pages/img2gray/", LOGIN) in seen
    assert ("cdn/other/", None) in seen  # before: no request got this far
    assert all(auth is None for path, auth in seen if path.startswith("cdn"))


def test_variants_of_one_wheels_url_judges_that_wheel(tmp_path: Path) -> None:
    """A wheel's link copied from an index page: before, ``…whl/`` was read as a page (HTTP 404),
    and a ``file://`` wheel was parsed as HTML ("no wheels found")."""
    url = f"http://127.0.0.1:9/files/{WHEEL.replace('+', '%2B')}#sha256=ab12"
    (found,) = discover(url)  # nothing is read: the wheel is judged by its name
    assert (found.filename, found.location, found.sha256) == (WHEEL, url.split("#")[0], "ab12")
    (tmp_path / WHEEL).write_bytes(b"")
    (local,) = discover((tmp_path / WHEEL).as_uri())
    assert (local.filename, local.location) == (WHEEL, str(tmp_path / WHEEL))
    with pytest.raises(UsageError, match="does not exist"):
        discover((tmp_path / "gone-1.0-py3-none-any.whl").as_uri())


def test_requires_python_is_read_from_a_page_and_from_a_local_wheel(tmp_path: Path) -> None:
    page = f'<a href="{WHEEL}" data-requires-python="&gt;=3.12">w</a>'
    (tmp_path / "page.html").write_text(page)
    (linked,) = list_candidates(
        PipSources(find_links=((tmp_path / "page.html").as_uri(),)), ["img2gray"]
    )
    assert linked.requires_python == ">=3.12"
    house = tmp_path / "house"
    spec = WheelSpec("img2gray", "0.1.0", Tag("py3", "none", "any"), {"img2gray/__init__.py": b""},
                     requires_python=">=3.99")  # fmt: skip
    wheel = write_wheel(spec, house)
    (local,) = list_candidates(PipSources(find_links=(str(house),)), ["img2gray"])
    assert local.requires_python == ">=3.99"
    wheel.write_bytes(wheel.read_bytes()[:100])  # unreadable: left to the integrity check
    assert (
        list_candidates(PipSources(find_links=(str(house),)), ["img2gray"])[0].requires_python
        is None
    )


def _forbidden(h: BaseHTTPRequestHandler) -> None:
    h.send_response(403)  # a bucket behind a CDN, for a key it does not hold
    h.end_headers()


def test_an_index_answering_403_for_a_project_it_lacks_is_skipped_and_named(
    tmp_path: Path,
) -> None:
    """``--extra-index-url`` of PyTorch's index beside a wheelhouse: the index answers 403 for
    ``img2gray/``, and install stopped with "HTTP 403 Forbidden" although the wheelhouse held
    the wheel (pip skips such a page)."""
    house = tmp_path / "house"
    spec = WheelSpec("img2gray", "0.1.0", Tag("py3", "none", "any"), {"img2gray/__init__.py": b""})
    write_wheel(spec, house)
    with serve(_forbidden) as url:
        sources_ = PipSources(find_links=(str(house),), extra_index_urls=(f"{url}/whl/",))
        assert len(list_candidates(sources_, ["img2gray"])) == 1  # before: UsageError, HTTP 403
        skipped: list[str] = []
        (found,) = list_candidates(sources_, ["img2gray"], skipped)
        assert skipped == [f"{url}/whl/img2gray/: HTTP 403 Forbidden"]
        assert found.filename == "img2gray-0.1.0-py3-none-any.whl"
        with pytest.raises(UsageError, match="HTTP 403"):  # a page asked for by name is read
            list_candidates(PipSources(find_links=(f"{url}/page.html",)), ["img2gray"])
    message = NoMatch(TARGET, select([Requirement("other")], [], TARGET), sources_, None,
                      tuple(s.replace("img2gray", "other") for s in skipped)).message  # fmt: skip
    assert f"  {url}/whl/other/: HTTP 403 Forbidden (taken as not holding it" in message


def test_a_redirect_from_https_to_http_drops_the_login() -> None:
    """An index on https that redirects to the same host on plain http: before, the login went
    along (the Authorization header in clear over the network, and into the wheels' URLs pip is
    given); pip drops it there, and keeps it on a step up to https or another page of the host."""
    handler = sources._LoginStaysOnItsHost()
    asked = urllib.request.Request("https://pkgs.example/simple/img2gray/")
    asked.add_header("Authorization", LOGIN)

    def led(url: str) -> str | None:
        new = handler.redirect_request(asked, None, 302, "Found", {}, url)
        assert new is not None
        return new.get_header("Authorization")

    assert led("http://pkgs.example/pages/img2gray/") is None  # before: LOGIN
    assert led("https://pkgs.example:8443/pages/img2gray/") is None  # another port
    assert led("https://pkgs.example/pages/img2gray/") == LOGIN
    login = "https://ci:t0k3n@pkgs.example/simple/img2gray/"
    assert sources._same_login("http://pkgs.example/p/", login) == "http://pkgs.example/p/"
    assert (
        sources._same_login("https://pkgs.example/p/", login) == "https://ci:t0k3n@pkgs.example/p/"
    )
    upgraded = sources._same_login("https://pkgs.example/p/", login.replace("https", "http"))
    assert upgraded == "https://ci:t0k3n@pkgs.example/p/"


def _looping(h: BaseHTTPRequestHandler) -> None:
    h.send_response(302)
    if h.path != "/nowhere/img2gray/":  # a redirect with no Location to follow
        h.send_header("Location", "/a/" if h.path.startswith("/b/") else "/b/")
    h.end_headers()


def test_a_redirect_loop_is_named_as_one_with_where_it_went() -> None:
    """Before: "HTTP 302 The HTTP server returned a redirect error that would lead to an infinite
    loop.\\nThe last 30x error message was:\\nFound" (urllib's three lines), fix "check the URL"."""
    with serve(_looping) as url:
        with pytest.raises(UsageError) as loop:
            list_candidates(PipSources(index_url=f"{url}/simple/"), ["img2gray"])
        with pytest.raises(UsageError) as nowhere:
            list_candidates(PipSources(index_url=f"{url}/nowhere/"), ["img2gray"])
    assert loop.value.message.startswith(f"--index-url {url}/simple/img2gray/: redirects in a loop")
    assert loop.value.message.endswith(f"(the last, HTTP 302, to {url}/b/)")
    assert "\n" not in loop.value.message and "curl -sIL" in (loop.value.hint or "")
    assert nowhere.value.message.endswith(": HTTP 302, a redirect with no Location")


def test_a_wheelhouse_link_to_nowhere_is_passed_over_with_its_fix(tmp_path: Path) -> None:
    """A wheelhouse of links into a store whose blob is gone (or a link to itself): before, it
    was the build chosen (the newest), ``variants`` said install picks it, and install failed on
    it ("cannot be read (Too many levels of symbolic links)") though an older build was there."""
    house = tmp_path / "house"
    spec = WheelSpec("img2gray", "0.1.0", Tag("py3", "none", "any"), {"img2gray/__init__.py": b""})
    write_wheel(spec, house)
    (house / "img2gray-0.2.0-py3-none-any.whl").symlink_to("../blobs/ab12")
    (house / "img2gray-0.3.0-py3-none-any.whl").symlink_to("img2gray-0.3.0-py3-none-any.whl")
    found = list_candidates(PipSources(find_links=(str(house),)), ["img2gray"])
    (selection,) = select([Requirement("img2gray")], found, TARGET)
    reasons = {v.candidate.filename.split("-")[1]: v.reason for v in selection.verdicts}
    assert reasons["0.2.0"] == (
        "a link to nowhere (-> ../blobs/ab12): restore its target or remove it"
    )
    assert reasons["0.3.0"] is not None and reasons["0.3.0"].startswith("a link to nowhere")
    assert reasons["0.1.0"] is not None and "requires torch" in reasons["0.1.0"]  # judged on


def test_a_wheel_given_as_a_link_to_nowhere_is_named_so(tmp_path: Path) -> None:
    """``index`` (and install's check) of a wheelhouse link whose store file is gone: before,
    "no such wheel, check the path" of a path that is there; a link to itself was "not a readable
    zip archive (Too many levels of symbolic links)", fix "rebuild or download it again"."""
    from kernelwheel.errors import WheelError
    from kernelwheel.wheels.reader import verify_wheel

    gone, loop = tmp_path / "a-1.0-py3-none-any.whl", tmp_path / "b-1.0-py3-none-any.whl"
    gone.symlink_to("../blobs/ab12")
    loop.symlink_to(loop.name)
    for link, pointed in ((gone, "../blobs/ab12"), (loop, loop.name)):
        with pytest.raises(WheelError) as refused:
            verify_wheel(link)
        assert refused.value.message == f"{link}: a link to nowhere (-> {pointed})"
        assert refused.value.hint == "restore its target, or remove the link"
    with pytest.raises(WheelError, match="no such wheel"):
        verify_wheel(tmp_path / "c-1.0-py3-none-any.whl")


def test_where_only_the_version_asked_for_fits_nothing_the_fix_names_the_versions_held(
    tmp_path: Path,
) -> None:
    """``install 'img2gray<0.1'`` beside a wheelhouse of 0.1.0 and 0.2.0: before, the fix was to
    build or download the variant for this torch (or install torch), which would not help."""
    house = tmp_path / "house"
    for version in ("0.2.0", "0.1.0"):
        files = {"img2gray/__init__.py": b""}
        write_wheel(WheelSpec("img2gray", version, Tag("py3", "none", "any"), files), house)
    found = list_candidates(PipSources(find_links=(str(house),)), ["img2gray"])

    def hint(requirement: str) -> str | None:
        selections = select([Requirement(requirement)], found, TARGET)
        return NoMatch(TARGET, selections, PipSources(find_links=(str(house),))).hint

    assert hint("img2gray<0.1") == (
        "ask for a version the sources hold (img2gray<0.1: the sources hold 0.1.0, 0.2.0), or "
        "point --find-links/--index-url at a source that has the one asked for"
    )
    # The interpreter installed into is named: without --python or a venv, python3 on PATH.
    assert (hint("img2gray>=0.2") or "").startswith("install torch into the environment of /py ")
    assert "or pass --python PY of one that holds torch" in (hint("img2gray>=0.2") or "")


def test_a_private_index_page_linking_its_files_by_absolute_url_lends_them_its_login(
    tmp_path: Path,
) -> None:
    """GitLab's and Artifactory's pages link each file by its absolute URL on the same host:
    before, the wheel's download went without the index's login (HTTP 401), where pip reuses a
    host's login for its files."""
    wheel = b"PK\x05\x06" + bytes(18)

    def private(h: BaseHTTPRequestHandler) -> None:
        if h.headers.get("Authorization") != LOGIN:
            h.send_response(401)
            h.end_headers()
        elif h.path == "/simple/img2gray/":
            h.send_response(200)
            h.end_headers()
            host = h.headers["Host"]
            other = "http://someone:else@elsewhere.example/x/other-1.0-py3-none-any.whl"
            h.wfile.write(
                f'<a href="http://{host}/files/{WHEEL}">w</a><a href="{other}">o</a>'.encode()
            )
        else:
            h.send_response(200)
            h.end_headers()
            h.wfile.write(wheel)

    with serve(private) as url:
        index = url.replace("http://", "http://ci:t0k3n%2Fx@") + "/simple/"
        found = list_candidates(PipSources(index_url=index), ["img2gray", "other"])
        assert sources.fetch(found[0], tmp_path).read_bytes() == wheel  # before: HTTP 401
    assert found[0].location == f"{index.removesuffix('/simple/')}/files/{WHEEL}"
    assert found[1].location == "http://someone:else@elsewhere.example/x/other-1.0-py3-none-any.whl"


def test_variants_of_a_private_index_root_follows_its_absolute_project_links() -> None:
    """A root page (``/simple/``) linking each project by its absolute URL: before, the login
    made the index's host look like another (``ci:…@host`` against ``host``), so no project page
    was read."""

    def private(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200 if h.headers.get("Authorization") == LOGIN else 401)
        h.end_headers()
        if h.path == "/simple/":
            h.wfile.write(f'<a href="http://{h.headers["Host"]}/simple/img2gray/">i</a>'.encode())
        elif h.path == "/simple/img2gray/":
            h.wfile.write(PAGE)

    with serve(private) as url:
        index = url.replace("http://", "http://ci:t0k3n%2Fx@") + "/simple/"
        (found,) = discover(index)
    assert found.location == f"{index}img2gray/{WHEEL}"


def test_an_index_refusing_the_login_says_the_login_is_the_fix() -> None:
    """HTTP 401 from a private index: before, the fix was "check the URL" whether a login was
    given or not."""

    def private(h: BaseHTTPRequestHandler) -> None:
        h.send_response(401)
        h.send_header("WWW-Authenticate", 'Basic realm="pkgs"')
        h.end_headers()

    with serve(private) as url:
        given: dict[str, str | None] = {}
        for login in ("", "ci:wrong@"):
            index = url.replace("http://", f"http://{login}") + "/simple/"
            with pytest.raises(UsageError) as refused:
                list_candidates(PipSources(index_url=index), ["img2gray"])
            assert refused.value.message.endswith("HTTP 401 Unauthorized")
            given[login] = refused.value.hint
    assert given[""] == (
        "the index wants a login: give it in the URL, as pip takes it "
        "(https://USER:TOKEN@host/simple/)"
    )
    assert (
        given["ci:wrong@"]
        == "the index refused the login in the URL: check its user name and token"
    )


def test_a_pages_base_href_is_what_its_links_resolve_against(tmp_path: Path) -> None:
    """A page with ``<base href="../../files/">`` (a generated index whose files lie apart): pip
    resolves its links against it; before, they were resolved against the page's own URL."""
    (tmp_path / "simple" / "img2gray").mkdir(parents=True)
    page = tmp_path / "simple" / "img2gray" / "index.html"
    page.write_text(f'<html><head><base href="../../files/"></head><a href="{WHEEL}">w</a>')
    (found,) = list_candidates(PipSources(find_links=(page.as_uri(),)), ["img2gray"])
    assert found.location == f"file://{tmp_path}/files/{WHEEL}"


def test_a_link_whose_decoded_name_holds_a_slash_is_no_wheel(tmp_path: Path) -> None:
    """``img2gray-1.0-1%2F..%2F..%2Fx-py3-none-any.whl`` parses as a wheel name (build tag
    ``1/../../x``): before, it was a candidate, downloaded to ``<folder>/img2gray-1.0-1/../../x…``,
    outside the download folder."""
    name = "img2gray-1.0-1%2F..%2F..%2Fx-py3-none-any.whl"
    page = tmp_path / "page.html"
    page.write_text(f'<a href="{name}">x</a><a href="{WHEEL}">w</a>')
    found = list_candidates(PipSources(find_links=(page.as_uri(),)), ["img2gray"])
    assert [c.filename for c in found] == [WHEEL]


def test_variants_of_a_whole_index_root_is_refused_before_its_pages_are_read() -> None:
    """A root linking 600 projects (PyPI's links 600,000): every project page was read, one by
    one, with no end in sight; it is refused at once, with the project page as the fix."""
    asked: list[str] = []

    def root(h: BaseHTTPRequestHandler) -> None:
        asked.append(h.path)
        h.send_response(200)
        h.end_headers()
        if h.path == "/simple/":
            h.wfile.write("".join(f'<a href="p{i}/">p{i}</a>' for i in range(600)).encode())

    with serve(root) as url, pytest.raises(UsageError) as err:
        discover(f"{url}/simple/")
    assert asked == ["/simple/"]
    assert err.value.message == (
        f"SOURCE {url}/simple/: the index root links more than 500 pages (a whole index, as "
        "PyPI's?)"
    )
    assert err.value.hint and f"{url}/simple/<project>/" in err.value.hint


def test_variants_of_an_index_root_is_read_within_a_deadline_in_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each project page answered within the per-page limit, slowly: the walk had no end."""
    monkeypatch.setattr(sources, "_ROOT_TIMEOUT", 1, raising=False)
    asked: list[str] = []

    def slow(h: BaseHTTPRequestHandler) -> None:
        asked.append(h.path)
        if h.path != "/simple/":
            time.sleep(0.3)
        h.send_response(200)
        h.end_headers()
        if h.path == "/simple/":
            h.wfile.write("".join(f'<a href="p{i}/">p{i}</a>' for i in range(40)).encode())

    with serve(slow) as url, pytest.raises(UsageError) as err:
        start = time.monotonic()
        discover(f"{url}/simple/")
    assert time.monotonic() - start < 3  # before: 40 pages, 12 s
    assert "the index root was not read whole within 1 s" in err.value.message
    assert len(asked) < 10
