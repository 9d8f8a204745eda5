"""Which requirements.txt / pylock.toml kernelwheel may replace: the ones it wrote, only."""

from __future__ import annotations

import os
from pathlib import Path

from kernelwheel.locking.pylock import HouseWheel, requirements_txt, written_by_kernelwheel


def test_only_files_that_begin_as_kernelwheels_own_are_kernelwheels(tmp_path: Path) -> None:
    wheel = HouseWheel(tmp_path / "relu-1.0-py3-none-any.whl", "ab" * 32, "acme/relu", "c", "v")
    own = tmp_path / "requirements.txt"
    own.write_text(requirements_txt([wheel]))
    assert written_by_kernelwheel(own)
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\ncreated-by = "kernelwheel"\n')
    assert written_by_kernelwheel(lock)

    # A user's files: their own text, kernelwheel's words further down, a link to kernelwheel's
    # own file, a FIFO (never opened: it would block), a folder.
    own.write_text("numpy==2.1\n" + requirements_txt([wheel]))
    lock.write_text('lock-version = "1.0"\ncreated-by = "uv"\n# created-by = "kernelwheel"\n')
    assert not written_by_kernelwheel(own) and not written_by_kernelwheel(lock)
    (tmp_path / "real.txt").write_text(requirements_txt([wheel]))
    for name, make in (
        ("link", lambda p: p.symlink_to(tmp_path / "real.txt")),
        ("fifo", os.mkfifo),
        ("folder", Path.mkdir),
    ):
        path = tmp_path / name / "requirements.txt"
        path.parent.mkdir()
        make(path)
        assert not written_by_kernelwheel(path), name
