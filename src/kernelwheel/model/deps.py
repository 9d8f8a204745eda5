"""What a kernel's ``depends = [...]`` names provide, as data (``recipes/deps.toml``).

kernel-builder accepts a fixed set of names in ``[kernel.<id>] depends``: ``torch``, one per
CUTLASS release it builds with (``cutlass_3_8`` is CUTLASS 3.8.0), ``sycl_tla`` and
``metal-cpp``. deps.toml says, per name, who provides it (:class:`Provider`): the build
environment (``torch``), a header-only library with its exact release and, where one exists, the
pinned PyPI wheel carrying its headers (:class:`HeaderWheel`), or nobody (``unsupported``, with
the reason). It is validated on load like torch.toml and cuda.toml; each problem raises
:class:`~kernelwheel.model.recipes.RecipeError` naming the file, the key and the fix.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from .._toml import read_toml
from .recipes import _SHA256_RE, RECIPES_PACKAGE, RecipeError, _Parser

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - exercised on 3.10 only
    from importlib.abc import Traversable

__all__ = [
    "DEPS_TOML",
    "LIBRARIES",
    "Dependency",
    "DependencyTable",
    "HeaderWheel",
    "Provider",
    "load_deps",
    "parse_deps",
]

DEPS_TOML = "deps.toml"
# Header-only libraries a local checkout may provide (the cutlass-path option), with the header
# that names the release a checkout holds.
LIBRARIES = ("cutlass",)
VERSION_HEADER = {"cutlass": "include/cutlass/version.h"}

_TOP_KEYS = ("schema", "deps")
_DEP_KEYS = ("provider", "library", "version", "pypi", "reason")
_WHEEL_KEYS = ("name", "version", "sha256", "include")
_NAME_RE = re.compile(r"[a-z][a-z0-9_-]*[a-z0-9]")
_RELEASE_RE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_WHEEL_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


class Provider(str, Enum):
    """Who provides a dependency."""

    ENVIRONMENT = "environment"  # the build environment already has it (torch)
    HEADERS = "headers"  # a header-only library: a pinned PyPI wheel or a local checkout
    UNSUPPORTED = "unsupported"  # nobody: a kernel needing it cannot be built here


@dataclass(frozen=True)
class HeaderWheel:
    """A PyPI wheel pinned by version and sha256, and the folders in it that hold headers."""

    name: str
    version: str
    sha256: str
    include: tuple[str, ...]  # POSIX paths inside the wheel, first one first on the path

    @property
    def requirement_line(self) -> str:
        """A requirements-file line for ``pip download --require-hashes``."""
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"

    def describe(self) -> str:
        return f"{self.name} {self.version} from PyPI"


@dataclass(frozen=True)
class Dependency:
    """One ``[deps.<name>]`` table. ``library``, ``version`` and ``wheel`` belong to header
    dependencies (``wheel`` None: no PyPI wheel carries that release); ``reason`` to
    unsupported ones."""

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
    """The validated deps.toml; ``origin`` is the file it was read from."""

    deps: tuple[Dependency, ...]
    origin: str = "<memory>"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.deps)

    def get(self, name: str) -> Dependency | None:
        for dep in self.deps:
            if dep.name == name:
                return dep
        return None

    def suggest(self, name: str) -> str:
        """A fix hint for an unknown name: the closest known one and the full list."""
        close = difflib.get_close_matches(name.replace("-", "_"), self.names, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return hint + f"known dependencies: {', '.join(self.names)}"


def load_deps(folder: Path | str | None = None) -> DependencyTable:
    """Load and validate ``deps.toml`` from the recipes folder ``folder``; a folder without one
    (or None) uses the bundled file, so a custom recipes folder need not copy it."""
    entry: Traversable | None = None
    if folder is not None:
        candidate = Path(folder).expanduser() / DEPS_TOML
        entry = candidate if candidate.is_file() else None
    if entry is None:
        try:
            entry = resources.files(RECIPES_PACKAGE) / DEPS_TOML
        except ModuleNotFoundError:  # a source tree run with PYTHONPATH=src
            entry = Path(__file__).resolve().parents[3] / "recipes" / DEPS_TOML
    path = entry if isinstance(entry, Path) else Path(str(entry))
    if not path.is_file():
        raise RecipeError(
            "not found", file=path, hint="reinstall kernelwheel (the file ships in the package)"
        )
    return parse_deps(read_toml(path, error=RecipeError), origin=str(path))


def parse_deps(data: Mapping[str, Any], *, origin: str = "<memory>") -> DependencyTable:
    """Validate a parsed deps.toml mapping into a :class:`DependencyTable`."""
    return DependencyTable(_DepsParser(origin).parse(data), origin)


class _DepsParser(_Parser):
    def parse(self, data: Mapping[str, Any]) -> tuple[Dependency, ...]:
        self.check_keys(data, _TOP_KEYS, "")
        self.schema(data)
        table = self.table(data, "deps", "deps")
        return tuple(self.dependency(name, value) for name, value in table.items())

    def dependency(self, name: str, value: Any) -> Dependency:
        prefix = f"deps.{name}"
        if not _NAME_RE.fullmatch(name):
            raise self.error(
                f"invalid dependency name {name!r}",
                prefix,
                "use the name build.toml's depends lists, e.g. cutlass_3_8",
            )
        if not isinstance(value, dict):
            raise self.error("expected a table", prefix, f"write it as a [{prefix}] table")
        self.check_keys(value, _DEP_KEYS, prefix)
        raw = self.string(value, "provider", f"{prefix}.provider", 'provider = "headers"')
        try:
            provider = Provider(raw)
        except ValueError:
            choices = ", ".join(p.value for p in Provider)
            raise self.error(
                f"unknown provider {raw!r}", f"{prefix}.provider", f"use one of: {choices}"
            ) from None
        allowed = {
            Provider.ENVIRONMENT: (),
            Provider.HEADERS: ("library", "version", "pypi"),
            Provider.UNSUPPORTED: ("reason",),
        }[provider]
        for key in value:
            if key != "provider" and key not in allowed:
                raise self.error(
                    f"a dependency provided by {provider.value!r} takes no {key}",
                    f"{prefix}.{key}",
                    f"remove {key}" + (f" (it takes {', '.join(allowed)})" if allowed else ""),
                )
        if provider is Provider.ENVIRONMENT:
            return Dependency(name, provider)
        if provider is Provider.UNSUPPORTED:
            reason = self.string(value, "reason", f"{prefix}.reason", 'reason = "needs ..."')
            return Dependency(name, provider, reason=reason)
        return self.headers(name, prefix, value)

    def headers(self, name: str, prefix: str, value: Mapping[str, Any]) -> Dependency:
        library = self.string(value, "library", f"{prefix}.library", 'library = "cutlass"')
        if library not in LIBRARIES:
            raise self.error(
                f"unknown library {library!r}",
                f"{prefix}.library",
                f"kernelwheel provides headers of: {', '.join(LIBRARIES)}",
            )
        version = self.string(value, "version", f"{prefix}.version", 'version = "3.8.0"')
        if not _RELEASE_RE.fullmatch(version):
            raise self.error(
                f"{version!r} is not a MAJOR.MINOR.PATCH release",
                f"{prefix}.version",
                'give the upstream tag without its v, e.g. version = "3.8.0"',
            )
        wheel = None
        if "pypi" in value:
            wheel = self.wheel(f"{prefix}.pypi", value["pypi"], version)
        return Dependency(name, Provider.HEADERS, library=library, version=version, wheel=wheel)

    def wheel(self, prefix: str, value: Any, release: str) -> HeaderWheel:
        if not isinstance(value, dict):
            raise self.error("expected a table", prefix, f"write it as a [{prefix}] table")
        self.check_keys(value, _WHEEL_KEYS, prefix)
        name = self.string(value, "name", f"{prefix}.name", 'name = "nvidia-cutlass"')
        if not _WHEEL_NAME_RE.fullmatch(name):
            raise self.error(f"invalid package name {name!r}", f"{prefix}.name", "a PyPI name")
        version = self.string(value, "version", f"{prefix}.version", 'version = "3.8.0.0"')
        try:
            parsed = Version(version)
        except InvalidVersion:
            parsed = None
        wanted = tuple(int(x) for x in release.split("."))
        if parsed is None or parsed.release[:3] != wanted or str(parsed) != version:
            raise self.error(
                f"{version!r} is not a PyPI release of {release}",
                f"{prefix}.version",
                f'pin the wheel that carries {release}, e.g. version = "{release}.0"',
            )
        sha256 = self.string(value, "sha256", f"{prefix}.sha256", 'sha256 = "<64 hex digits>"')
        if not _SHA256_RE.fullmatch(sha256):
            raise self.error(
                "not a sha256 (64 lowercase hex digits)",
                f"{prefix}.sha256",
                "compute it with sha256sum on the wheel pip download fetched",
            )
        include = self.strings(
            value,
            "include",
            f"{prefix}.include",
            '["cutlass_library/source/include"]',
            required=True,
        )
        for folder in include:
            parts = folder.split("/")
            if folder.startswith("/") or "\\" in folder or any(p in ("", ".", "..") for p in parts):
                raise self.error(
                    f"{folder!r} is not a relative POSIX path inside the wheel",
                    f"{prefix}.include",
                    'write folders as the wheel lists them, e.g. "cutlass_library/source/include"',
                )
        return HeaderWheel(name, version, sha256, include)
