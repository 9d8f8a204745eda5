"""File-name, LFS-pointer and hash checks on what a repo hands over."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from kernelwheel.errors import HubError
from kernelwheel.hub.safety import Announced, LfsPointer, check_repo_path, git_blob_id, verify


@pytest.mark.parametrize(
    "path",
    [
        "build/v/img2gray/__init__.py",
        "build/torch27-cxx11-cu128-x86_64-linux/_img2gray_0abc.abi3.so",
        "build/v/pkg/data file (1).txt",
    ],
)
def test_ordinary_names_pass(path: str) -> None:
    check_repo_path(path, where="r")  # no HubError


@pytest.mark.parametrize(
    "path",
    [
        "build/v/../../../etc/passwd",
        "/etc/passwd",
        "build/v/./x.py",
        "build//x.py",
        "build/v/..",
        "build\\v\\..\\x.py",
        "build/v/C:x.py",
        "build/v/x\x00.py",
        "build/v/x\n.py",
        "",
    ],
)
def test_escaping_names_are_refused(path: str) -> None:
    with pytest.raises(HubError) as info:
        check_repo_path(path, where="Hub repo a/b")
    assert "Hub repo a/b: refusing file name" in str(info.value)
    assert "fix:" in str(info.value)


def test_git_blob_id_matches_git(tmp_path: Path) -> None:
    data = b"hello kernel\n\x00\xff"
    (tmp_path / "f").write_bytes(data)
    out = subprocess.run(
        ["git", "hash-object", str(tmp_path / "f")], capture_output=True, text=True, check=True
    )
    assert git_blob_id(data) == out.stdout.strip()


def test_lfs_pointer_round_trip_and_non_pointers() -> None:
    data = b"\x7fELF" + bytes(100)
    pointer = LfsPointer(hashlib.sha256(data).hexdigest(), len(data))
    assert LfsPointer.parse(pointer.encode()) == pointer
    assert LfsPointer.parse(data) is None
    assert LfsPointer.parse(b"version https://git-lfs.github.com/spec/v1\noid md5:x\n") is None


def test_verify_lfs_sha256_and_size() -> None:
    data = b"binary" * 100
    sha = hashlib.sha256(data).hexdigest()
    verify("f.so", data, Announced(size=len(data), lfs_sha256=sha), where="r")
    tampered = b"BINARY" + data[6:]
    with pytest.raises(HubError) as info:
        verify("build/v/f.so", tampered, Announced(size=len(data), lfs_sha256=sha), where="r")
    message = str(info.value)
    assert "build/v/f.so" in message and sha in message
    assert hashlib.sha256(tampered).hexdigest() in message
    assert "nothing was written" in message


def test_verify_by_blob_id_for_plain_and_lfs_files() -> None:
    plain = b"print('hi')\n"
    verify("a.py", plain, Announced(blob_id=git_blob_id(plain)), where="r")
    binary = b"\x7fELF" + bytes(5000)
    pointer = LfsPointer(hashlib.sha256(binary).hexdigest(), len(binary)).encode()
    # The offline listing gives only the pointer's blob id: the content still verifies.
    verify("b.so", binary, Announced(blob_id=git_blob_id(pointer)), where="r")
    with pytest.raises(HubError, match="matching neither"):
        verify("b.so", binary[:-1] + b"\x01", Announced(blob_id=git_blob_id(pointer)), where="r")


def test_verify_refuses_unannounced_files() -> None:
    with pytest.raises(HubError, match="announced no hash"):
        verify("a.py", b"x", Announced(), where="r")
