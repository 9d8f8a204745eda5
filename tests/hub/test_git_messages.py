"""git's refusals said as they are (issue 13 item 9): a clone owned by another user (git's
safe.directory check) is not "not a git clone"; a commit missing from the clone gets a fetch
hint, not "is this a git clone?"."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.gitrepo import HubRepo

from kernelwheel.errors import HubError
from kernelwheel.hub.gitsource import GitSource


@pytest.fixture
def repo(tmp_path: Path) -> HubRepo:
    repo = HubRepo(tmp_path / "img2gray")
    repo.write_file("build/torch-universal/img2gray/__init__.py", b"")
    repo.commit("build")
    return repo


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the clone to another user")
def test_a_clone_owned_by_another_user(
    repo: HubRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("SUDO_UID", raising=False)
    subprocess.run(["chown", "-R", "65534:65534", str(repo.root)], check=True)
    with pytest.raises(HubError) as info:
        GitSource(repo.root)
    message = str(info.value)
    assert "not a git clone" not in message
    assert "owned by another user" in message
    assert f"git config --global --add safe.directory {repo.root}" in message


def test_a_commit_missing_from_the_clone(repo: HubRepo) -> None:
    missing = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(HubError) as info:
        GitSource(repo.root).list_build(missing)
    message = str(info.value)
    assert missing in message and "not in this clone" in message
    fix = message.split("fix:", 1)[1]
    assert "git clone" not in fix and f"git -C {repo.root} fetch" in fix
