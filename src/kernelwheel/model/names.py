"""Names a kernel's wheel may not take (they would shadow a core package) and names it is warned
about (well-known PyPI distributions), from the shipped ``data/names.toml``: no network lookup."""

from __future__ import annotations

import functools
import keyword
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .._toml import Located, read_toml
from ..errors import ProjectError


def package_name(name: str) -> str:
    """The import name of a kernel named ``name``, as kernel-builder derives it."""
    return re.sub(r"[-.]", "_", name)


def is_package_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


_DATA = Path(__file__).resolve().parent.parent / "data" / "names.toml"


@dataclass(frozen=True)
class NameLists:
    distributions: frozenset[str]  # canonical (PEP 503) names
    prefixes: tuple[str, ...]
    modules: frozenset[str]  # reserved top-level modules of core packages
    stdlib: frozenset[str]  # the standard library's, of every supported Python
    well_known: frozenset[str]  # canonical names of well-known PyPI distributions
    well_known_modules: frozenset[str]  # their import names that differ from the name
    test_packages: frozenset[str] = frozenset()  # test, tests
    windows_devices: frozenset[str] = frozenset()  # con, aux, nul, com1... (lowercase)


@functools.cache
def load_name_lists() -> NameLists:
    doc = Located(read_toml(_DATA, error=ProjectError), file=_DATA, error=ProjectError)
    doc.check_keys(("reserved", "pypi"))
    reserved, pypi = doc.table("reserved"), doc.table("pypi")
    if reserved is None or pypi is None:
        raise ProjectError(f"{_DATA}: needs [reserved] and [pypi] tables")
    reserved.check_keys(
        (
            "distributions",
            "distribution-prefixes",
            "modules",
            "stdlib-removed",
            "test-packages",
            "windows-devices",
        )
    )
    pypi.check_keys(("well-known", "modules"))

    def names(table: Located, key: str, spell: Callable[[str], str] = str) -> frozenset[str]:
        return frozenset(spell(name) for name in table.string_list(key) or ())

    stdlib = frozenset(m for m in sys.stdlib_module_names if not m.startswith("_"))
    return NameLists(
        distributions=names(reserved, "distributions", canonicalize_name),
        prefixes=tuple(reserved.string_list("distribution-prefixes") or ()),
        modules=names(reserved, "modules"),
        stdlib=stdlib | names(reserved, "stdlib-removed"),
        well_known=names(pypi, "well-known", canonicalize_name),
        well_known_modules=names(pypi, "modules"),
        test_packages=names(reserved, "test-packages"),
        windows_devices=names(reserved, "windows-devices", str.lower),
    )


def shadowing(distribution: str | None, package: str) -> str | None:
    """What a wheel ``distribution`` with the package ``package`` would shadow, in words."""
    lists = load_name_lists()
    if distribution is not None:
        canonical = canonicalize_name(distribution)
        if canonical in lists.distributions or canonical.startswith(lists.prefixes):
            return f"the distribution {canonical!r}, which `pip install` would replace"
    # Case-folded: on case-insensitive file systems `Torch/` shadows `torch`.
    for module in (package, package.lower()):
        if module in lists.stdlib or module in lists.modules:
            kind = "standard-library module" if module in lists.stdlib else "module"
            return f"the {kind} {module!r}, which `import {module}` would no longer find"
        if module in lists.test_packages:
            return (
                f"the test package {module!r} (the standard library's `test`, the `tests` "
                "folder of other distributions and of the user's project), which pytest and "
                f"`import {module}` would find instead"
            )
    if package.lower().split(".")[0] in lists.windows_devices:
        return (
            f"the Windows device name {package.lower()!r}: a folder named so cannot be "
            "made on Windows, so the package could be neither checked out nor installed there"
        )
    return None


def name_warning(distribution: str, package: str) -> str | None:
    """Why a kernel's wheel deserves a warning: named like a well-known PyPI distribution."""
    lists = load_name_lists()
    canonical = canonicalize_name(distribution)
    if canonical in lists.well_known:
        return (
            f"{distribution!r} is also a well-known PyPI distribution, which installing this "
            "wheel replaces (its local version does not stop pip: the name is the same)"
        )
    if package in lists.well_known_modules or canonicalize_name(package) in lists.well_known:
        return (
            f"the package folder {package}/ is also the import name of a well-known PyPI "
            "distribution, whose files installing this wheel writes over"
        )
    return None


def self_requirement(distribution: str, requirements: Iterable[str]) -> str | None:
    """The first of ``requirements`` that names ``distribution`` itself."""
    canonical = canonicalize_name(distribution)
    for line in requirements:
        try:
            if canonicalize_name(Requirement(line).name) == canonical:
                return line
        except InvalidRequirement:
            continue
    return None
