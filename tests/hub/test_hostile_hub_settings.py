"""Issue 38 family 6: repo ids huggingface_hub refuses, non-ASCII tokens and malformed
HF_ENDPOINT values in to-wheel, upload and lock end in a clear error and an exit code, without a
traceback and before anything is sent (each through the real CLI; the endpoints that crashed
huggingface_hub's import in a fresh process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwheel.cli import main
from kernelwheel.hub.hubsource import repo_id_problem

LONG = "acme/" + "k" * 92  # 97 characters: one more than the Hub allows
BAD_IDS = [
    ("acme/x.git", "ends with '.git'"),
    (LONG, "is 97 characters long; the Hub allows 96"),
    ("acme/x-", "has a part that ends with '-' or '.'"),
    ("acme/x.", "has a part that ends with '-' or '.'"),
    ("acme/x--y", "holds '..' or '--'"),
    ("acme/k\u00e9rnel", "is not org/name of ASCII letters"),
]


@pytest.fixture(autouse=True)
def _no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listens at the endpoint: a run that got as far as asking would fail otherwise."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_token")
    for name in ("HF_HUB_OFFLINE", "HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_ETAG_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


def _layout(tmp_path: Path) -> Path:
    variant = tmp_path / "layout" / "build" / "torch214-cxx11-cpu-x86_64-linux"
    variant.mkdir(parents=True)
    (variant / "metadata.json").write_text('{"version": 1, "python-depends": []}')
    return tmp_path / "layout"


def _app(tmp_path: Path, repo: str) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(
        f'[project]\nname = "app"\nversion = "0"\n\n[tool.kernels.dependencies]\n"{repo}" = 1\n'
    )
    return app


@pytest.mark.parametrize(("repo", "problem"), BAD_IDS)
def test_repo_ids_the_hub_refuses_are_refused_by_every_command(
    repo: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert problem in (repo_id_problem(repo) or "")
    code = main(["to-wheel", repo, "1", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 9 and f"{repo!r} is neither a local folder nor a Hub repo id" in err
    assert problem in err and "Traceback" not in err
    code = main(["upload", str(_layout(tmp_path)), "--repo", repo, "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and f"--repo {repo!r} is not a Hub repo id: it {problem}" in err
    code = main(["lock", str(_app(tmp_path, repo))])
    err = capsys.readouterr().err
    assert code == 3 and f"{repo!r} is not a Hub repo id (org/name): it {problem}" in err
    assert "Traceback" not in err


def test_the_ids_the_hub_takes_are_kept() -> None:
    for repo in ("drbh/img2gray", "kernels-community/activation", "a/b.c_d-1", "acme/" + "k" * 91):
        assert repo_id_problem(repo) is None, repo


@pytest.mark.parametrize("token", ["hf_t\u00f6ken", "hf_\u0663\u0663"])
def test_a_non_ascii_token_is_refused_by_upload_before_anything_is_sent(
    token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_TOKEN", token)
    code = main(["upload", str(_layout(tmp_path)), "--repo", "org/kernel"])
    err = capsys.readouterr().err
    assert code == 2 and "HF_TOKEN: the Hub token holds a non-ASCII character" in err
    assert token not in err and "Traceback" not in err


BAD_ENDPOINTS = [
    ("not a url", "is no URL: it holds whitespace"),
    ("http://[::1", "is no URL (Invalid IPv6 URL)"),
    ("huggingface.co", "is not an http:// or https:// URL"),
    ("ftp://hub.example", "is not an http:// or https:// URL"),
    ("https://", "names no host"),
    ("https://hub.example:99999", "is no URL (Port out of range"),
    ("https://hub.example:0", "has port 0"),
    ("https://h\u00fcb.example", "is no URL: it holds whitespace, control or non-ASCII"),
]


@pytest.mark.parametrize(("endpoint", "problem"), BAD_ENDPOINTS)
def test_a_malformed_endpoint_is_a_usage_error_naming_hf_endpoint(
    endpoint: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    shown = f"HF_ENDPOINT={endpoint!r} {problem}"
    runs = {
        "to-wheel": ["to-wheel", "acme/relu", "1", "-o", str(tmp_path / "out")],
        "upload": ["upload", str(_layout(tmp_path)), "--repo", "acme/relu", "--dry-run"],
        "lock": ["lock", str(_app(tmp_path, "acme/relu"))],
    }
    for command, args in runs.items():
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2, (command, err)
        assert shown in err and "Traceback" not in err, (command, err)


@pytest.mark.parametrize("endpoint", ["http://[::1", "not a url"])
def test_a_malformed_endpoint_in_a_fresh_process_is_not_a_traceback(
    endpoint: str, tmp_path: Path
) -> None:
    """huggingface_hub parses HF_ENDPOINT when it is imported: the check comes first."""
    env = dict(os.environ, HF_ENDPOINT=endpoint, KERNELWHEEL_CACHE_DIR=str(tmp_path / "cache"))
    for args in (
        ["to-wheel", "acme/relu", "1", "-o", str(tmp_path / "out")],
        ["upload", str(_layout(tmp_path)), "--repo", "acme/relu", "--dry-run"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "kernelwheel", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert f"HF_ENDPOINT={endpoint!r}" in proc.stderr and "Traceback" not in proc.stderr


def test_a_repo_to_wheel_refuses_at_once_leaves_no_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, ``-o out`` was made with a log of the header alone (and the error named that log);
    ``REPO@1 2`` (the version twice) was told to pass org/name."""
    out = tmp_path / "out"
    for args, hint in (
        (["org/x@1", "2"], "fix: give the version once: kernelwheel to-wheel org/x@1 (or org/x 2)"),
        (["o@rg/x@1"], "fix: pass org/name (e.g. drbh/img2gray) or the path of a git clone"),
        ([str(tmp_path / "gone"), "1"], "fix: pass a git clone or a Hub id (org/name)"),
    ):
        assert main(["to-wheel", *args, "-o", str(out)]) == 9
        err = capsys.readouterr().err
        assert hint in err and "log:" not in err, err
        assert not out.exists()


def test_to_wheel_names_its_own_argument_in_repo_at_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``to-wheel org/x@``: before, "SOURCE 'org/x@'" (variants' argument; to-wheel's is REPO)."""
    assert main(["to-wheel", "org/x@", "-o", str(tmp_path / "out")]) == 9
    assert "error: REPO 'org/x@': nothing after '@'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
