"""The kernels a project declares in its ``pyproject.toml``.

Two tables mean the same thing; a project may use either or both:

- ``[tool.kernels.dependencies]``, the table Hugging Face's ``kernels`` tool reads:
  ``"drbh/img2gray" = ">=1.1.2,<2"`` (the highest ``vX.Y.Z`` tag in the range), ``"1.1.2"``
  (tag ``v1.1.2``) or an integer ``1`` (branch ``v1``), as ``kernelwheel to-wheel`` reads VERSION;
- ``[tool.kernelwheel.dependencies]``: the same values, or a table naming a local git clone of
  the repo, ``"drbh/img2gray" = { version = ">=1.1,<2", path = "../img2gray" }`` (the path is
  relative to the project folder; the repo id still names the kernel and its wheels).

A repo declared in both tables must say the same thing in both.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _toml as toml
from ..errors import ProjectError, UsageError
from ..hub import RequestKind, VersionRequest, is_repo_id

__all__ = ["PYPROJECT", "Declarations", "Dependency", "read_dependencies"]

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
    """One declared kernel repo."""

    repo: str  # Hub repo id, org/name
    requested: str  # the version request as text: ">=1.1,<2", "1.1.2", "1"
    request: VersionRequest
    path: str | None  # a local git clone (as written, relative to the project folder)
    declared_in: str  # 'tool.kernels.dependencies."drbh/img2gray"', for messages
    origin: str = PYPROJECT  # the file that declares it (download reads kernelwheel.lock)

    def describe(self) -> str:
        via = f" from the git clone {self.path}" if self.path else ""
        return f"{self.repo} {self.requested!r}{via}"


@dataclass(frozen=True)
class Declarations:
    pyproject: Path
    dependencies: tuple[Dependency, ...]  # sorted by repo id

    @property
    def project_dir(self) -> Path:
        return self.pyproject.parent


def _field(table: str, repo: str) -> str:
    return f"{table}.{toml.key(repo)}"


def read_dependencies(project_dir: Path) -> Declarations:
    """Read and check the declared kernels. Raises :class:`ProjectError` naming the file, the
    field, the value and the fix."""
    pyproject = project_dir / PYPROJECT
    if not project_dir.is_dir():
        raise ProjectError(
            "no such project folder",
            file=project_dir,
            hint="pass the folder holding pyproject.toml",
        )
    data = toml.read_toml(
        pyproject,
        missing_hint=f"declare kernels in {project_dir}/pyproject.toml under [{KERNELS_TABLE}], "
        'e.g. "drbh/img2gray" = ">=1.1.2,<2"',
    )

    tool = data.get("tool", {})
    found: dict[str, Dependency] = {}
    for tool_name, table_name in (("kernels", KERNELS_TABLE), ("kernelwheel", KERNELWHEEL_TABLE)):
        section = tool.get(tool_name, {}) if isinstance(tool, dict) else {}
        table = section.get("dependencies") if isinstance(section, dict) else None
        if table is None:
            continue
        if not isinstance(table, dict):
            raise ProjectError(
                f"expected a table, got {table!r}",
                file=pyproject,
                key=table_name,
                hint=f'write [{table_name}] with lines such as "drbh/img2gray" = ">=1.1.2,<2"',
            )
        for repo, raw in table.items():
            dep = _dependency(pyproject, table_name, repo, raw)
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


def _dependency(pyproject: Path, table: str, repo: str, raw: Any) -> Dependency:
    where = _field(table, repo)
    if not is_repo_id(repo):
        local = " For a local git clone, keep the repo id as the key and add path = '...'" + (
            f" under [{KERNELWHEEL_TABLE}]."
        )
        raise ProjectError(
            f"{repo!r} is not a Hub repo id (org/name)",
            file=pyproject,
            key=where,
            hint="keys are Hub repo ids such as drbh/img2gray." + local,
        )
    path: str | None = None
    version: Any = raw
    if isinstance(raw, Mapping):
        if table == KERNELS_TABLE:
            raise ProjectError(
                f"a table value ({raw!r}) is kernelwheel's form",
                file=pyproject,
                key=where,
                hint=f"move this line to [{KERNELWHEEL_TABLE}] (the kernels tool reads only "
                f"version strings and integers in [{KERNELS_TABLE}])",
            )
        for name in raw:
            if name not in _TABLE_KEYS:
                close = difflib.get_close_matches(str(name), _TABLE_KEYS, n=1)
                raise ProjectError(
                    f"unknown key {name!r}",
                    file=pyproject,
                    key=f"{where}.{toml.key(str(name))}",
                    hint=(f"did you mean {close[0]!r}? " if close else "")
                    + f"keys: {', '.join(_TABLE_KEYS)}",
                )
        if "version" not in raw:
            raise ProjectError(
                "the table has no 'version'",
                file=pyproject,
                key=where,
                hint=f'e.g. {{ version = ">=1.1,<2", path = "../{repo.split("/")[1]}" }}',
            )
        version = raw["version"]
        path = raw.get("path")
        if path is not None and (not isinstance(path, str) or not path.strip()):
            raise ProjectError(
                f"path must be a non-empty string, got {path!r}",
                file=pyproject,
                key=f"{where}.path",
                hint="the folder of a git clone of the repo, relative to the project folder",
            )
        where_version = f"{where}.version"
    else:
        where_version = where
    text = _version_text(pyproject, where_version, version)
    try:
        request = VersionRequest.parse(text)
    except UsageError as exc:
        raise ProjectError(
            f"{text!r} is not a version request ({exc.message})",
            file=pyproject,
            key=where_version,
            hint=_VALUE_HINT,
        ) from None
    assert request.kind in (RequestKind.EXACT, RequestKind.MAJOR, RequestKind.RANGE)
    return Dependency(repo, text, request, path, where)


def _version_text(pyproject: Path, where: str, version: Any) -> str:
    if isinstance(version, bool) or not isinstance(version, (str, int)):
        raise ProjectError(
            f"expected a version string or an integer, got {version!r}",
            file=pyproject,
            key=where,
            hint=_VALUE_HINT + " (a float such as 1.5 is neither: quote it)",
        )
    if isinstance(version, int):
        if version < 0:
            raise ProjectError(
                f"major version {version} is negative", file=pyproject, key=where, hint=_VALUE_HINT
            )
        return str(version)
    text = str(version).strip()
    if not text:
        raise ProjectError("the version is empty", file=pyproject, key=where, hint=_VALUE_HINT)
    return text
