"""metadata.json's ``kernels-minver`` for an exported variant: the lowest ``kernels`` release
that loads what kernelwheel wrote, by the rule in ``data/kernels_minver.toml``
(docs/versions.md, "kernels-minver")."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from .._toml import Located, parse_toml
from ..errors import HubError, LocatedError
from ..model.variant import Variant
from .metadata import KernelMetadata, KernelsVersion

RULE_FILE = "kernels_minver.toml"
_SECTIONS = ("layout", "variant", "metadata", "python-depends")


class MinverDataError(LocatedError, HubError):
    """``data/kernels_minver.toml`` is invalid (the message names the key)."""


@dataclass(frozen=True)
class MinverRule:
    floor: KernelsVersion
    features: dict[tuple[str, str], KernelsVersion]  # (section, feature) -> first release

    def needs(self, section: str, feature: str) -> KernelsVersion:
        found = self.features.get((section, feature))
        if found is None:
            raise HubError(
                f"data/{RULE_FILE}: no [{section}] entry for {feature!r}: kernelwheel cannot "
                "say which kernels release loads it",
                hint=f"add '{feature} = \"<first kernels release with it>\"' under [{section}]",
            )
        return found


@cache
def load_rule() -> MinverRule:
    """The rule shipped in ``kernelwheel/data/``."""
    where = f"kernelwheel/data/{RULE_FILE}"
    text = (resources.files("kernelwheel") / "data" / RULE_FILE).read_text("utf-8")
    data = parse_toml(text, file=where, error=MinverDataError)
    top = Located(data, file=where, error=MinverDataError)
    top.check_keys(("schema", "floor", *_SECTIONS))
    hint = 'a dotted kernels release, e.g. "0.17.0"'

    def version(table: Located, key: str) -> KernelsVersion:
        value = table.required_string(key, hint)
        try:
            return KernelsVersion.parse(value)
        except ValueError as exc:
            raise table.error(str(exc), key, hint) from None

    features: dict[tuple[str, str], KernelsVersion] = {}
    for section in _SECTIONS:
        table = top.required_table(section, f"add a [{section}] table")
        for key in table.keys():
            features[section, key] = version(table, key)
    return MinverRule(version(top, "floor"), features)


def kernels_minver(
    variant: Variant, metadata: KernelMetadata, rule: MinverRule | None = None
) -> tuple[KernelsVersion, tuple[str, ...]]:
    """The ``kernels-minver`` of ``metadata`` (for ``variant``, flat layout) and the features that
    need exactly that release, above the floor (else the floor's reason, the kernel-type repo)."""
    rule = rule or load_rule()
    if variant.tvm_ffi is not None:
        form = "tvm-ffi"
    elif variant.stable_abi:
        form = "stable-abi"
    elif variant.noarch:
        form = "noarch"
    else:
        form = "per-torch"
    used = [("layout", "flat"), ("variant", form)]
    if metadata.kernel_depends:
        used.append(("metadata", "kernel-depends"))
    used += [("python-depends", name) for name in metadata.python_depends]
    needs = {f"{section} {feature}": rule.needs(section, feature) for section, feature in used}
    minver = max([rule.floor, *needs.values()])
    above = tuple(name for name, v in needs.items() if v == minver and v > rule.floor)
    return minver, above or ("kernel-type repo",)
