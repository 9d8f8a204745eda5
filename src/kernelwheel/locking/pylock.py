"""A hashed ``requirements.txt`` and a PEP 751 ``pylock.toml`` of a wheelhouse (docs/lockfile.md):
``==1.1.2`` matches every local version, so pip still picks the build for the installed torch;
pylock.toml holds one version per package, so it is written only for one build per package."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .. import _toml as toml
from ..errors import UsageError
from ..wheels.reader import parse_metadata, read_metadata

REQUIREMENTS = "requirements.txt"
PYLOCK = "pylock.toml"
CREATED_BY = "kernelwheel"
# How kernelwheel's own files begin: the mark that lets a later download replace them.
_REQUIREMENTS_MARK = "# Written by 'kernelwheel download'"
_PYLOCK_MARK = f'created-by = "{CREATED_BY}"'


@dataclass(frozen=True)
class HouseWheel:
    """A verified wheel of the wheelhouse and where it came from."""

    path: Path
    sha256: str
    repo: str
    commit: str
    variant: str

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def project(self) -> str:
        return canonicalize_name(parse_wheel_filename(self.filename)[0])

    @property
    def version(self) -> Version:
        return parse_wheel_filename(self.filename)[1]

    def requires_python(self) -> str | None:
        value = parse_metadata(read_metadata(self.path)).get("Requires-Python")
        return str(value) if value else None


def _by_project(wheels: Sequence[HouseWheel]) -> dict[str, list[HouseWheel]]:
    out: dict[str, list[HouseWheel]] = {}
    for wheel in sorted(wheels, key=lambda w: w.filename):
        out.setdefault(wheel.project, []).append(wheel)
    return dict(sorted(out.items()))


def requirements_txt(wheels: Sequence[HouseWheel]) -> str:
    """One ``name==version`` line per distribution with every wheel's hash. Raises UsageError
    when the selected wheels of one distribution do not share a public version."""
    lines = [
        f"{_REQUIREMENTS_MARK} from kernelwheel.lock: the kernel wheels of this",
        "# folder (DIR), by sha256. Install them offline, trusting nothing but these hashes:",
        "#   pip install --require-hashes --no-index --find-links DIR -r DIR/requirements.txt",
    ]
    for project, group in _by_project(wheels).items():
        publics = sorted({w.version.public for w in group}, key=Version)
        if len(publics) > 1:
            builds = ", ".join(f"{w.variant} -> {w.version}" for w in group)
            raise UsageError(
                f"the selected wheels of {project} have different versions ({builds}); one "
                "requirement cannot pin them all",
                hint="select the builds of one version with --variant",
            )
        hashes = [f"    --hash=sha256:{h}" for h in sorted({w.sha256 for w in group})]
        lines.append(" \\\n".join([f"{project}=={publics[0]}", *hashes]))
    return "\n".join(lines) + "\n"


def pylock_toml(wheels: Sequence[HouseWheel]) -> tuple[str | None, str]:
    """The PEP 751 lock of the wheelhouse, or None and the reason it cannot be written."""
    groups = _by_project(wheels)
    if ambiguous := {p: g for p, g in groups.items() if len({w.version for w in g}) > 1}:
        project, group = next(iter(ambiguous.items()))
        versions = sorted({str(w.version) for w in group})
        return None, (
            f"{project} has {len(versions)} builds here ({', '.join(versions)}); a pylock.toml "
            "holds one version per package and its markers cannot tell torch builds apart. "
            "Select one build per kernel with --variant (e.g. 'torch214-cxx11-cu130-*') for a "
            "pylock.toml; requirements.txt covers them all"
        )
    lines = [f"lock-version = {toml.value('1.0')}", _PYLOCK_MARK]
    for project, group in groups.items():
        first = group[0]
        lines += ["", "[[packages]]", *toml.assignments(name=project, version=str(first.version))]
        if requires := first.requires_python():
            lines += toml.assignments(requires_python=requires)
        for wheel in group:
            lines += ["", "[[packages.wheels]]"]
            lines += toml.assignments(
                name=wheel.filename,
                path=wheel.filename,
                size=wheel.path.stat().st_size,
                hashes={"sha256": wheel.sha256},
            )
        lines += ["", "[packages.tool.kernelwheel]"]
        lines += toml.assignments(repo=first.repo, commit=first.commit)
        lines.append(f"variants = {toml.array([w.variant for w in group])}")
    return "\n".join(lines) + "\n", "one build per package"


def written_by_kernelwheel(path: Path) -> bool:
    """Whether ``path`` is a plain file that begins as kernelwheel's own do; only its head is read
    (a user's file may be a link, a FIFO, gigabytes)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return False
    if path.name == PYLOCK:
        return _PYLOCK_MARK in head[:2]
    return bool(head) and head[0].startswith(_REQUIREMENTS_MARK)
