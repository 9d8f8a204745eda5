"""Project-level kernel locking: ``kernelwheel lock`` and ``kernelwheel download``
(docs/lockfile.md); each module's part: docs/architecture.md."""

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
