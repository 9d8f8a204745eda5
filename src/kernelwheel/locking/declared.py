"""The kernels a ``pyproject.toml`` declares in ``[tool.kernels.dependencies]`` (Hugging Face's
``kernels`` reads it) and ``[tool.kernelwheel.dependencies]`` (or a local clone); a repo in both
must say the same (docs/lockfile.md, "Declaring kernels")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import _toml as toml
from ..errors import ProjectError, UsageError
from ..hub.hubsource import repo_id_problem
from ..hub.revision import RequestKind, VersionRequest

PYPROJECT = "pyproject.toml"
KERNELS_TABLE = "tool.kernels.dependencies"
KERNELWHEEL_TABLE = "tool.kernelwheel.dependencies"
_TABLE_KEYS = ("version", "path")
_VALUE_HINT = (
    "write a range such as '>=1.1.2,<2' (highest matching vX.Y.Z tag), '1.1.2' (tag v1.1.2) "
    "or an integer major version such as 1 (branch v1)"
)


@dataclass(frozen=True)
class Dependency:
    repo: str  # Hub repo id, org/name
    requested: str  # the version request as text: ">=1.1,<2", "1.1.2", "1"
    request: VersionRequest
    path: str | None  # a local git clone (as written, relative to the project folder)
    declared_in: str  # 'tool.kernels.dependencies."drbh/img2gray"', for messages
    origin: str = PYPROJECT  # the file that declares it, as given (or the kernelwheel.lock read)


@dataclass(frozen=True)
class Declarations:
    pyproject: Path
    dependencies: tuple[Dependency, ...]  # sorted by repo id


def read_dependencies(project_dir: Path) -> Declarations:
    """The declared kernels, checked: a ProjectError names the file, field, value and fix."""
    pyproject = project_dir / PYPROJECT
    if not project_dir.is_dir():
        hint = "pass the folder holding pyproject.toml"
        raise ProjectError("no such project folder", file=project_dir, hint=hint)
    data = toml.read_toml(
        pyproject,
        missing_hint=f"declare kernels in {project_dir}/pyproject.toml under [{KERNELS_TABLE}], "
        'e.g. "drbh/img2gray" = ">=1.1.2,<2"',
    )

    found: dict[str, Dependency] = {}
    for table in _tables(toml.Located(data, file=pyproject)):
        for repo in table.keys():
            dep = _dependency(table, repo)
            other = found.get(repo)
            if other is not None and (other.requested, other.path) != (dep.requested, dep.path):
                raise ProjectError(
                    f"{repo} is declared twice and differently: {other.declared_in} = "
                    f"{other.requested!r}, {dep.declared_in} = {dep.requested!r}"
                    + (f" (path {dep.path!r})" if dep.path else ""),
                    file=pyproject,
                    hint="keep one declaration (or make both say the same)",
                )
            found.setdefault(repo, dep)
    if not found:
        raise ProjectError(
            "declares no kernels",
            file=pyproject,
            hint=f'add [{KERNELS_TABLE}] with lines such as "drbh/img2gray" = ">=1.1.2,<2" '
            f"(or [{KERNELWHEEL_TABLE}])",
        )
    return Declarations(pyproject, tuple(found[r] for r in sorted(found)))


def _dependency(table: toml.Located, repo: str) -> Dependency:
    """The line ``repo = ...`` of ``table`` (one of the two dependencies tables)."""
    where = table.dotted(repo)
    if (problem := repo_id_problem(repo)) is not None:
        raise table.error(
            f"{repo!r} is not a Hub repo id (org/name): it {problem}",
            repo,
            "keys are Hub repo ids such as drbh/img2gray. For a local git clone, keep the repo id "
            f"as the key and add path = '...' under [{KERNELWHEEL_TABLE}].",
        )
    if not isinstance(table.data[repo], Mapping):
        text, request = _request(table, repo)
        return Dependency(repo, text, request, None, where, str(table.file))
    if table.prefix == KERNELS_TABLE:
        raise table.error(
            f"a table value ({table.data[repo]!r}) is kernelwheel's form",
            repo,
            f"move this line to [{KERNELWHEEL_TABLE}] (the kernels tool reads only "
            f"version strings and integers in [{KERNELS_TABLE}])",
        )
    entry = table.table(repo)
    assert entry is not None
    entry.check_keys(_TABLE_KEYS)
    if "version" not in entry:
        raise entry.error(
            "the table has no 'version'",
            None,
            f'e.g. {{ version = ">=1.1,<2", path = "../{repo.split("/")[1]}" }}',
        )
    hint = "the folder of a git clone of the repo, relative to the project folder"
    path = entry.string("path", nonempty=True, hint=hint)
    text, request = _request(entry, "version")
    return Dependency(repo, text, request, path, where, str(table.file))


def _tables(doc: toml.Located) -> list[toml.Located]:
    """[tool.kernels.dependencies] and [tool.kernelwheel.dependencies], those present."""
    tool = doc.table("tool")
    sections = (tool.table(name) for name in ("kernels", "kernelwheel")) if tool is not None else ()
    tables: list[toml.Located] = []
    for section in filter(None, sections):
        dotted = section.dotted("dependencies")
        hint = f'write [{dotted}] with lines such as "drbh/img2gray" = ">=1.1.2,<2"'
        if (table := section.table("dependencies", hint=hint)) is not None:
            tables.append(table)
    return tables


def _request(table: toml.Located, key: str) -> tuple[str, VersionRequest]:
    """The version request at ``key``: a version string or an integer major version."""
    version = table.data[key]
    if isinstance(version, bool) or not isinstance(version, (str, int)):
        raise table.error(
            f"expected a version string or an integer, got {version!r}",
            key,
            _VALUE_HINT + " (a float such as 1.5 is neither: quote it)",
        )
    if isinstance(version, int):
        if version < 0:
            raise table.error(f"major version {version} is negative", key, _VALUE_HINT)
        text = str(version)
    else:
        if not (text := version.strip()):
            raise table.error("the version is empty", key, _VALUE_HINT)
    try:
        request = VersionRequest.parse(text)
    except UsageError as exc:
        raise table.error(
            f"{text!r} is not a version request ({exc.message})", key, _VALUE_HINT
        ) from None
    assert request.kind in (RequestKind.EXACT, RequestKind.MAJOR, RequestKind.RANGE)
    return text, request
