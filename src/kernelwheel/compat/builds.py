"""From a :class:`~kernelwheel.model.variant.Variant` to the facts the rules compare: :mod:`.rules`
is embedded into generated guards, so it is standard-library only and the bridge lives here."""

from __future__ import annotations

from ..errors import VariantError
from ..model.variant import BackendKind, CxxAbi, Variant, variant_of_wheel
from . import rules
from .rules import Build

__all__ = ["build_of", "parse_variant", "torch_mismatch", "variant_of_wheel"]


def build_of(variant: Variant | None) -> Build:
    """The rules' view of ``variant``; None (a wheel with no local version) is universal. A
    tvm-ffi variant keeps its series: it is no noarch build, though it names no torch."""
    if variant is None or variant.backend is None:
        return Build(torch=None, kind="")
    torch = None if variant.torch is None else (variant.torch.major, variant.torch.minor)
    backend = variant.backend
    version = None
    if backend.version is not None and backend.kind is not BackendKind.CPU:
        version = (backend.version[0], backend.version[1])
    cxx11 = None if variant.cxxabi is None else variant.cxxabi is CxxAbi.CXX11
    tvm_ffi = None if variant.tvm_ffi is None else (variant.tvm_ffi.major, variant.tvm_ffi.minor)
    return Build(torch, backend.kind.value, version, cxx11, variant.stable_abi, tvm_ffi)


def torch_mismatch(variant: Variant, torch: str) -> str | None:
    """What a build of ``variant`` is for where torch ``torch`` ("": none) does not load it by the
    rules' version rule alone (backend and ABI unknown); None where it loads."""
    build = build_of(variant)
    by_version = Build(build.torch, "", stable_abi=build.stable_abi)
    if not rules.problems(by_version, rules.Torch(torch, rules.CPU, None, cxx11=True)):
        return None
    return rules.describe_build(by_version)


def parse_variant(name: str) -> Variant | None:
    """The variant ``name`` spells (a locked or planned variant's); None when it spells none."""
    try:
        return Variant.parse(name)
    except VariantError:
        return None
