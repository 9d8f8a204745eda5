"""Names a kernel's wheel may not take (they would replace or shadow a core package) and names
it is warned about (a well-known PyPI distribution), from the shipped ``data/names.toml``.

Every place a name enters (build.toml's ``general.name``, ``init NAME``, ``to-wheel --name``,
a Hub repo's metadata.json or package folder) asks :func:`shadowing`; no network lookup is
made while building, so the PyPI list is a shipped one."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from .._toml import Located, read_toml
from ..errors import ProjectError

__all__ = ["NameLists", "load_name_lists", "pypi_namesake", "shadowing"]

_DATA = Path(__file__).resolve().parent.parent / "data" / "names.toml"


@dataclass(frozen=True)
class NameLists:
    distributions: frozenset[str]  # canonical (PEP 503) names
    prefixes: tuple[str, ...]
    modules: frozenset[str]  # reserved top-level modules of core packages
    stdlib: frozenset[str]  # the standard library's, of every supported Python
    well_known: frozenset[str]  # canonical names of well-known PyPI distributions


@functools.cache
def load_name_lists(path: Path | None = None) -> NameLists:
    source = path or _DATA
    doc = Located(read_toml(source, error=ProjectError), file=source, error=ProjectError)
    doc.check_keys(("reserved", "pypi"))
    reserved = doc.table("reserved")
    pypi = doc.table("pypi")
    if reserved is None or pypi is None:
        raise ProjectError(f"{source}: needs [reserved] and [pypi] tables")
    reserved.check_keys(("distributions", "distribution-prefixes", "modules", "stdlib-removed"))
    pypi.check_keys(("well-known",))
    stdlib = {m for m in sys.stdlib_module_names if not m.startswith("_")}
    return NameLists(
        distributions=frozenset(
            canonicalize_name(n) for n in reserved.string_list("distributions") or ()
        ),
        prefixes=tuple(reserved.string_list("distribution-prefixes") or ()),
        modules=frozenset(reserved.string_list("modules") or ()),
        stdlib=frozenset(stdlib | set(reserved.string_list("stdlib-removed") or ())),
        well_known=frozenset(canonicalize_name(n) for n in pypi.string_list("well-known") or ()),
    )


def shadowing(distribution: str | None, package: str | None = None) -> str | None:
    """What a wheel named ``distribution`` with the top-level package ``package`` would replace
    or shadow, in words (``"the distribution 'torch'"``); None when neither is reserved."""
    lists = load_name_lists()
    if distribution is not None:
        canonical = canonicalize_name(distribution)
        if canonical in lists.distributions or canonical.startswith(lists.prefixes):
            return f"the distribution {canonical!r}, which `pip install` would replace"
    if package is not None:
        # Case-folded: on case-insensitive file systems `Torch/` shadows `torch`.
        for module in (package, package.lower()):
            if module in lists.stdlib:
                return (
                    f"the standard-library module {module!r}, which `import {module}` would "
                    "no longer find"
                )
            if module in lists.modules:
                return f"the module {module!r}, which `import {module}` would no longer find"
    return None


def pypi_namesake(distribution: str) -> bool:
    """Whether ``distribution`` is a well-known PyPI distribution's name (data/names.toml)."""
    return canonicalize_name(distribution) in load_name_lists().well_known
