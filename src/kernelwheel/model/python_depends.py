"""kernel-builder's ``python-depends`` names, per backend, → PyPI requirements
(recipes/python-depends.toml); any other entry is read as a PEP 508 requirement."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from packaging.requirements import InvalidRequirement, Requirement

from .._toml import Located, parse_toml
from .recipes import RECIPES_PACKAGE, RecipeError, entry_table

PYTHON_DEPENDS_TOML = "python-depends.toml"


@dataclass(frozen=True)
class PythonDepends:
    """The name table: ``general`` names apply to every backend, ``backends[b]`` to ``b``."""

    general: Mapping[str, tuple[str, ...]]
    backends: Mapping[str, Mapping[str, tuple[str, ...]]]

    def names_for(self, backend: str | None) -> tuple[str, ...]:
        return tuple(self.general if backend is None else self.backends.get(backend, {}))

    def owner(self, entry: str) -> str | None:
        """Where ``entry`` is a name: None for the general table, else the backend's name."""
        return next((b for b, table in self.backends.items() if entry in table), None)

    def requirements(self, entry: str, backend: str | None) -> tuple[str, ...] | None:
        """The requirements ``entry`` stands for (a name's, or itself); None when neither."""
        table = self.general if backend is None else self.backends.get(backend, {})
        if entry in table:
            return table[entry]
        try:
            return (str(Requirement(entry)),)
        except InvalidRequirement:
            return None


@cache
def load_python_depends() -> PythonDepends:
    resource = resources.files(RECIPES_PACKAGE) / PYTHON_DEPENDS_TOML
    file = f"recipes/{PYTHON_DEPENDS_TOML}"
    data = parse_toml(resource.read_text("utf-8"), file=file, error=RecipeError)
    doc = Located(data, file=file, error=RecipeError)
    doc.check_keys(("schema", "general", "backends"))
    general = doc.table("general")
    backends = doc.table("backends") or Located({}, file=file)
    return PythonDepends(
        general=_names(general) if general else {},
        backends={b: _names(t) for b in backends.keys() if (t := backends.table(b)) is not None},
    )


def _names(table: Located) -> dict[str, tuple[str, ...]]:
    names: dict[str, tuple[str, ...]] = {}
    for name in table.keys():
        entry = entry_table(table, name, ("requires", "import"))
        requires = entry.string_list("requires")
        if not requires:
            raise entry.error("missing required key", "requires", 'add requires = ["<pypi name>"]')
        for requirement in requires:
            try:
                Requirement(requirement)
            except InvalidRequirement:
                raise entry.error(
                    f"{requirement!r} is not a PEP 508 requirement", "requires", "fix the entry"
                ) from None
        names[name] = requires
    return names
