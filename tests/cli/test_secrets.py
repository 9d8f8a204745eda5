"""Issue 38, 4: a Hub token never reaches the terminal, the --json document, a --traceback or
a log, whatever message quotes it (a library error quoting an HTTP header, as httpx's did)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelwheel.cli import main
from kernelwheel.errors import HubError
from kernelwheel.hub import towheel
from kernelwheel.hub.hubsource import HubSettings
from kernelwheel.hub.towheel import ToWheelRequest

TOKEN = "hf_NotToBeSeen42"


def test_a_token_quoted_in_an_error_is_redacted_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def quoting(req: ToWheelRequest, *args: object, **kwargs: object) -> None:
        token = HubSettings.from_env().token  # read as the real source reads it
        raise HubError(
            f"listing refs: cannot reach the Hub (LocalProtocolError: Illegal header value "
            f"{f'Bearer {token}'.encode()!r}); sent {token}",
            hint=f"retry with {token!r}",
        )

    monkeypatch.setenv("HF_TOKEN", TOKEN + "\n")
    monkeypatch.setattr(towheel, "to_wheels", quoting)
    out = tmp_path / "out"
    argv = ["to-wheel", "acme/relu", "1", "-o", str(out), "--json", "--traceback", "--verbose"]
    assert main(argv) == 9
    captured = capsys.readouterr()
    (log,) = out.glob("logs/*.log")
    for where, text in (
        ("stdout", captured.out),
        ("stderr", captured.err),
        ("log", log.read_text()),
    ):
        assert TOKEN not in text and "NotToBeSeen" not in text, where
        assert "Bearer <redacted>" in text, where
    assert json.loads(captured.out)["error"]["hint"] == "retry with '<redacted>'"


def test_a_password_in_a_storage_or_index_url_is_never_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernelwheel._util import redact
    from kernelwheel.plan.options import resolve_options

    remote = "redis://:pw1Secret@cache:6379 http://u:pw2Secret@h/c|bearer-token=pw3Secret"
    cli = {"ccache_remote": remote, "index_url": "https://user:pw4Secret@pkgs.example/simple"}
    shown = "\n".join(resolve_options(cli=cli, env={}).preamble())  # the terminal and each log
    assert "redis://<redacted>@cache:6379" in shown and "https://user:<redacted>@pkgs" in shown
    assert redact("redis://pw5Secret@cache") == "redis://<redacted>@cache"  # ccache's PASSWORD@
    monkeypatch.setenv("KERNELWHEEL_CCACHE_REMOTE", "redis://:pw6Secret@host:0")
    assert main(["matrix", str(Path(__file__).parents[2] / "kernels/img2gray")]) == 2
    assert "redis://<redacted>@host:0" in capsys.readouterr().err
    assert "Secret" not in shown + redact("git+https://github.com/a/b@v1 x://y:pw@z")


def test_a_logged_command_shows_no_index_password(tmp_path: Path) -> None:
    from kernelwheel._util import run_logged

    url = "https://user:pw7Secret@pkgs.example/simple"
    assert run_logged(["echo", "--index-url", url], tmp_path / "v.log") == 0
    assert "Secret" not in (tmp_path / "v.log").read_text().splitlines()[0]


def test_a_token_given_as_an_index_urls_user_name_is_never_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``https://TOKEN@host/simple/`` (a private index's token as the user name): before, only a
    ``user:password@`` login was hidden, so the token was printed in every line naming the URL."""
    from kernelwheel._util import redact

    url = "http://tok9Secret@127.0.0.1:9/simple/"  # nothing listens on port 9
    assert redact(f"--index-url {url}") == "--index-url http://<redacted>@127.0.0.1:9/simple/"
    assert redact("git+https://github.com/a/b@v1") == "git+https://github.com/a/b@v1"  # no login
    code = main(["install", "img2gray", "--index-url", url, "--python", sys.executable])
    err = capsys.readouterr().err
    assert code == 2 and "http://<redacted>@127.0.0.1:9/simple/img2gray/" in err
    assert "Secret" not in err


def test_a_login_holding_a_raw_at_sign_is_hidden_whole() -> None:
    """pip and urllib split a URL's login at the authority's last ``@``, so ``ci:p@ss`` is read
    as a password and ``tok@en`` as a token; before, what followed the first ``@`` was shown
    (``https://ci:<redacted>@ss@host/``), and an e-mail as the user name showed the password."""
    from kernelwheel._util import redact

    text = "https://ci:pw@Secret@host/simple/ --index-url https://tok@Secret@host/x"
    assert (
        redact(text) == "https://ci:<redacted>@host/simple/ --index-url https://<redacted>@host/x"
    )
    assert redact("https://me@corp.example:pwSecret@host/") == (
        "https://me@corp.example:<redacted>@host/"
    )
    assert redact("http://host/a@b?q=c@d") == "http://host/a@b?q=c@d"  # no login: left as it is
    assert redact('{"url":"https://host","mail":"a@b"}') == '{"url":"https://host","mail":"a@b"}'
