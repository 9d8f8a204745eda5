"""Shared file and process helpers: hashing, atomic publishing, subprocesses into a log.

One home for what every stage needs, so there is one behaviour to reason about: outputs appear
whole or not at all (written beside their final place, then renamed), and a tool's output goes
to the per-variant log that errors name.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from .errors import ToolchainError

__all__ = [
    "atomic_copy",
    "atomic_write",
    "replace_dir",
    "run_checked",
    "run_logged",
    "sha256_file",
    "staged_file",
]

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in chunks (wheels and fatbins can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def staged_file(final: Path, *, mode: int = 0o644) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; on success it is renamed onto ``final``, on any
    error (or interrupt) it is removed. Readers never see a half-written file."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=final.suffix, dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, mode)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(final: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``final`` atomically."""
    with staged_file(final) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
    return final


def atomic_copy(src: Path, final: Path) -> Path:
    """Copy ``src`` to ``final`` atomically (a no-op when they are the same file)."""
    if final.exists() and final.samefile(src):
        return final
    with staged_file(final) as tmp:
        shutil.copyfile(src, tmp)
    return final


def replace_dir(staging: Path, final: Path) -> Path:
    """Move the finished folder ``staging`` to ``final``, replacing an older one: the old folder
    is renamed aside first, so ``final`` is always either the old or the new tree."""
    if final.exists():
        old = final.with_name(f".old-{final.name}")
        if old.exists():
            shutil.rmtree(old)  # left by an interrupted run
        os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old)
    else:
        os.replace(staging, final)
    return final


def run_logged(
    cmd: Sequence[str],
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Run ``cmd`` with its output appended to ``log`` (after a ``$ cmd`` line); the exit code."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(str(c) for c in cmd)}\n")
        fh.flush()
        return subprocess.run(
            [str(c) for c in cmd],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            cwd=cwd,
            check=False,
        ).returncode


def run_checked(cmd: Sequence[str], log: Path | None, what: str, hint: str | None = None) -> None:
    """Run a toolchain command (pip, venv); a non-zero exit is a ToolchainError that names the
    log, or quotes the output's last lines when there is no log."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    tail = ""
    if log is not None:
        code = run_logged(cmd, log, env=env)
    else:
        proc = subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, env=env, check=False
        )
        code = proc.returncode
        tail = "\n" + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
    if code != 0:
        where = f" (log: {log})" if log else ""
        raise ToolchainError(f"failed to {what}: exit {code}{where}{tail}", hint=hint)
