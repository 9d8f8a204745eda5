"""Project-level kernel locking: ``kernelwheel lock`` and ``kernelwheel download``.

A project declares the Hub kernels it uses in ``pyproject.toml`` (:mod:`.declared`);
``lock`` resolves each to a tag or branch and commit and records the sha256 of every file each
variant packages and of the wheel made from it in ``kernelwheel.lock`` (:mod:`.resolve`,
:mod:`.lockfile`); ``download`` makes those wheels again at the locked commits, verifies every
hash and fills a wheelhouse with them, a hashed ``requirements.txt`` and a PEP 751
``pylock.toml`` (:mod:`.download`, :mod:`.pylock`). Both run the to-wheel machinery
(:mod:`kernelwheel.hub`) through a source pinned to the locked commit (:mod:`.pinned`).
"""

from .declared import Declarations, Dependency, read_dependencies
from .download import DownloadRequest, DownloadResult, download
from .lockfile import LOCK_NAME, LockedKernel, LockedVariant, LockFile
from .pylock import HouseWheel, pylock_toml, requirements_txt
from .resolve import KernelOutcome, LockRequest, LockResult, lock_project, open_dependency

__all__ = [
    "LOCK_NAME",
    "Declarations",
    "Dependency",
    "DownloadRequest",
    "DownloadResult",
    "HouseWheel",
    "KernelOutcome",
    "LockFile",
    "LockRequest",
    "LockResult",
    "LockedKernel",
    "LockedVariant",
    "download",
    "lock_project",
    "open_dependency",
    "pylock_toml",
    "read_dependencies",
    "requirements_txt",
]
