"""One CUDA toolkit folder per set of toolchain packages, hard-linked once into
``<store>/<name>-<key>``: the toolkit's path reaches the preprocessed text, so one path per
environment would keep the compiler cache from sharing torch-free objects between torch variants."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from .._util import staging_dir


def shared_toolkit(home: Path, purelib: Path, store: Path) -> Path:
    """The shared folder holding the toolkit at ``home``, made on first use; ``home`` itself when
    no distribution owns it or it cannot be hard-linked (a copy would cost gigabytes)."""
    key = _key(home, purelib)
    if key is None:
        return home
    final = store / f"{home.name}-{key}"
    if (final / "bin" / "nvcc").exists():
        return final
    with staging_dir(store, "toolkit") as tmp:
        try:
            shutil.copytree(home, tmp / "toolkit", symlinks=True, copy_function=os.link)
        except (OSError, shutil.Error):
            return home
        try:
            os.rename(tmp / "toolkit", final)
        except OSError:
            if not (final / "bin" / "nvcc").exists():  # not a concurrent build that won
                raise
    return final


def _key(home: Path, purelib: Path) -> str | None:
    """The distributions (name-version) whose RECORD lists files of ``home``: the same ones
    install the same files."""
    try:
        prefix = home.relative_to(purelib).as_posix() + "/"
    except ValueError:
        return None
    owners = sorted(
        record.parent.name
        for record in purelib.glob("*.dist-info/RECORD")
        if prefix in record.read_text(errors="replace")
    )
    if not owners:
        return None
    return hashlib.sha256("\n".join(owners).encode()).hexdigest()[:16]
