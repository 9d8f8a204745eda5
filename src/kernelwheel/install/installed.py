"""What the target holds of a distribution, and whether it is a given wheel's build: pip decides by
version alone, so install compares the build's own files, the installed RECORD checked against the
disk (docs/install.md, "A rebuild of the installed version")."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from packaging.version import InvalidVersion, Version

from .._util import NO_CWD_ON_PATH, RUNNER, Runner
from ..errors import InstallError, WheelError
from ..wheels.reader import SITE_SCHEMES
from ..wheels.record import Row, parse_record

Files = Mapping[str, str]  # a build's own files: path -> RECORD hash ("sha256=…")

# What the install step of a chosen build is: "install" (none there), "replace" (another
# version there: pip replaces it), "reinstall" (the same version: pip must be forced), "keep".
Action = Literal["install", "replace", "reinstall", "keep"]

# What installers write into the dist-info folder (PEP 376, PEP 610; uv's cache key): not the
# build's. Another installer's own file would only make a same build count as replaced.
_INSTALLER_FILES = frozenset(
    {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json", "uv_cache.json"}
)


def _own_path(path: str) -> str | None:
    """The site-packages path of a RECORD entry that belongs to the build, else None."""
    parts = PurePosixPath(path).parts
    if not parts or parts[0] in ("..", "/") or "__pycache__" in parts or path.endswith(".pyc"):
        return None
    if parts[0].endswith(".data"):  # in a wheel: moved by the installer
        if len(parts) > 2 and parts[1] in SITE_SCHEMES:
            return str(PurePosixPath(*parts[2:]))
        return None
    if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in _INSTALLER_FILES:
        return None
    return path


def own_files(rows: Iterable[Row]) -> dict[str, str]:
    """A RECORD's (a wheel's or an installed distribution's) entries of the build's own files."""
    return {own: digest for path, digest, _ in rows if (own := _own_path(path)) and digest}


def files_digest(files: Files) -> str:
    """The sha256 of a build's files as RECORD lists them: one ``path,sha256=…`` line per file,
    sorted. Equal for a wheel and its installed copy; what the output shows of both."""
    text = "".join(f"{path},{digest}\n" for path, digest in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def differences(before: Files, after: Files) -> tuple[str, ...]:
    """The paths whose bytes differ or that only one side has, sorted."""
    return tuple(sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p)))


def listing(paths: Sequence[str], most: int = 5) -> str:
    """``a, b, c and 2 more``: paths in a message."""
    more = f" and {len(paths) - most} more" if len(paths) > most else ""
    return ", ".join(paths[:most]) + more


@dataclass(frozen=True)
class Installed:
    version: str
    location: str  # the folder its RECORD's paths are relative to
    files: Files
    altered: tuple[str, ...] = ()  # own files whose bytes on disk are not what RECORD says

    @property
    def digest(self) -> str:
        return files_digest(self.files)

    def has_version(self, version: Version) -> bool:
        try:
            return Version(self.version) == version
        except InvalidVersion:
            return False

    def is_build(self, version: Version, files: Files) -> bool:
        """Whether this is the build of ``version`` made of ``files``, intact on disk."""
        return self.has_version(version) and dict(self.files) == dict(files) and not self.altered


def decide(before: Installed | None, version: Version, files: Files, *, reinstall: bool) -> Action:
    """How to install the build of ``version`` made of ``files`` where ``before`` is found."""
    if before is None:
        return "install"
    if not before.has_version(version):
        return "replace"
    if before.is_build(version, files) and not reinstall:
        return "keep"
    return "reinstall"


@dataclass(frozen=True)
class Environment:
    torch: str | None  # torch's installed version, as pip sees it
    builds: Mapping[str, Installed | None]  # per project asked about


_MARK = "KERNELWHEEL-INSTALLED "
# Runs in the target interpreter (Python 3.9+, standard library only): each project's version,
# RECORD and the own-looking entries whose file on disk does not match its RECORD hash.
_SCRIPT = (
    NO_CWD_ON_PATH
    + r"""
import base64, csv, hashlib, io, json, sys
import importlib.metadata as md

def altered(dist, record):
    out = []
    for row in csv.reader(io.StringIO(record)):
        if len(row) != 3 or not row[1].startswith("sha256=") or row[0].endswith(".pyc"):
            continue
        try:
            data = dist.locate_file(row[0]).read_bytes()
        except OSError:
            out.append(row[0])
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        if "sha256=" + digest.decode() != row[1]:
            out.append(row[0])
    return out

names = json.loads(sys.argv[1])
out = {"torch": None, "builds": {}}
try:
    out["torch"] = md.version("torch")
except md.PackageNotFoundError:
    pass
for name in names:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        out["builds"][name] = None
        continue
    record = dist.read_text("RECORD") or ""
    out["builds"][name] = {"version": dist.version, "location": str(dist.locate_file("")),
                           "record": record, "altered": altered(dist, record)}
print(__MARK__ + json.dumps(out))
""".replace("__MARK__", repr(_MARK))
)


def read_environment(python: Path, projects: Sequence[str], runner: Runner = RUNNER) -> Environment:
    """One run of ``python``: torch's version and what it holds of each of ``projects``."""
    proc = runner.captured([python, "-c", _SCRIPT, json.dumps(list(projects))])
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallError(
            f"cannot read the installed distributions of {python}: {last}",
            hint="check that the interpreter runs (python -c 'import importlib.metadata')",
        )
    data = json.loads(lines[-1][len(_MARK) :])
    builds = {name: _installed(found) for name, found in data["builds"].items()}
    return Environment(data["torch"], builds)


def _installed(found: dict[str, object] | None) -> Installed | None:
    if found is None:
        return None
    location = str(found["location"])
    try:
        rows = parse_record(str(found["record"]).encode(), where=f"{location} (installed)")
    except WheelError as exc:  # a broken RECORD: its files cannot be trusted to be any build's
        rows = []
        altered: tuple[str, ...] = (f"RECORD ({exc.message})",)
    else:
        paths = found["altered"]
        assert isinstance(paths, list)
        altered = tuple(p for p in map(str, paths) if _own_path(p) is not None)
    return Installed(str(found["version"]), location, own_files(rows), altered)
