"""Issue 30: every Hub call is bounded. An endpoint that accepts connections and never answers
makes to-wheel stop with a HubError naming the timeout, the tries and the fix, not wait forever;
HF_HUB_DOWNLOAD_TIMEOUT sets the bound."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelwheel.cli import main
from kernelwheel.hub.hubsource import HubSettings


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A TCP server that accepts every connection, reads, and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # kept open, never answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize(
    "revision", [["1"], ["1", "--revision", "0123456789abcdef0123456789abcdef01234567"]]
)
def test_an_endpoint_that_never_answers_stops_to_wheel_with_a_message(
    revision: list[str],
    silent_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", silent_endpoint)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    started = time.monotonic()
    code = main(["to-wheel", "org/kernel", *revision, "-o", str(tmp_path / "out")])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 9, err
    assert "no answer within 1 s, 3 tries" in err and "HF_HUB_DOWNLOAD_TIMEOUT" in err
    assert "Traceback" not in err
    assert took < 30  # 3 tries of 1 s, 1 s and 2 s apart: not forever


def test_an_endpoint_that_never_answers_stops_upload_with_a_message(
    silent_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """upload bounds its calls too (at least 120 s each, HF_HUB_DOWNLOAD_TIMEOUT above that;
    lowered here so the test is quick)."""
    import kernelwheel.hub.upload as upload_module

    monkeypatch.setattr(upload_module, "_UPLOAD_TIMEOUT", 0.0)
    monkeypatch.setenv("HF_ENDPOINT", silent_endpoint)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_token")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    layout = tmp_path / "layout" / "build" / "torch214-cxx11-cpu-x86_64-linux"
    layout.mkdir(parents=True)
    (layout / "metadata.json").write_text(
        '{"name": "kernel", "version": 1, "python-depends": [], "backend": {"type": "cpu"}}'
    )
    started = time.monotonic()
    code = main(["upload", str(tmp_path / "layout"), "--repo", "org/kernel", "--dry-run"])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 9, err
    assert "no answer within 1 s, 3 tries" in err and "looking the repo up" in err
    assert "HF_HUB_OFFLINE" not in err  # upload needs the Hub: no advice to go offline
    assert "Traceback" not in err
    assert took < 30


@pytest.mark.parametrize(
    ("value", "seconds"), [(None, 10.0), ("2.5", 2.5), ("junk", 10.0), ("-1", 10.0)]
)
def test_the_timeout_comes_from_huggingface_hubs_variable(
    value: str | None, seconds: float
) -> None:
    env = {"HF_HUB_DOWNLOAD_TIMEOUT": value} if value is not None else {}
    assert HubSettings.from_env(env).timeout == seconds
