"""Which variants kernelwheel compiles (CPU, CUDA), and where the others must be built: their
build stops before any environment is made with a ToolchainError naming the runner they need.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ToolchainError
from ..model.variant import Arch, BackendKind, Variant

# The backends kernelwheel compiles, on the GitHub-hosted runner of the variant's arch.
BUILT_HERE = frozenset({BackendKind.CPU, BackendKind.CUDA})
_BUILT_HERE_NAMES = " and ".join(sorted(kind.display_name for kind in BUILT_HERE))
HOSTED_RUNNERS = {Arch.X86_64: "ubuntu-24.04", Arch.AARCH64: "ubuntu-24.04-arm"}
# The runner, in prose, where "a <backend> runner" would not do.
_RUNNER_WORDS = {BackendKind.METAL: "a macOS (Metal) runner", BackendKind.XPU: "an XPU runner"}
# A --skip glob that matches every binary variant of the backend, whatever its version.
_SKIP = {BackendKind.ROCM: "*-rocm*", BackendKind.XPU: "*-xpu*", BackendKind.CANN: "*-cann*"}


def runner_for(variant: Variant) -> str:
    """The GitHub Actions runner label the variant is built on: a hosted Ubuntu runner of its
    arch, or for a backend not built here the placeholder ``self-hosted-<backend>``."""
    kind = _compiled_kind(variant)
    if kind is not None and kind not in BUILT_HERE:
        return _runner_label(kind)
    return HOSTED_RUNNERS.get(variant.arch or Arch.X86_64, HOSTED_RUNNERS[Arch.X86_64])


def backend_problem(kind: BackendKind, what: str = "this variant") -> str | None:
    """Why kernelwheel cannot compile ``kind`` here, or None when it can."""
    if kind in BUILT_HERE:
        return None
    words = _RUNNER_WORDS.get(kind, f"a {kind.display_name} runner")
    return (
        f"no {kind.display_name} toolchain: build {what} on {words} "
        f"(runner label {_runner_label(kind)})"
    )


def missing_toolchain(variant: Variant) -> str | None:
    """Why kernelwheel cannot build ``variant`` here (one line), or None when it can."""
    kind = _compiled_kind(variant)
    return None if kind is None else backend_problem(kind)


def require_toolchains(variants: Iterable[Variant]) -> None:
    """One :class:`ToolchainError` for every variant kernelwheel cannot compile, by backend,
    with the runner each needs and the ``--skip`` that leaves them out."""
    by_kind: dict[BackendKind, list[Variant]] = {}
    for variant in variants:
        kind = _compiled_kind(variant)
        if kind is not None and kind not in BUILT_HERE:
            by_kind.setdefault(kind, []).append(variant)
    if not by_kind:
        return
    skips = " ".join(f"--skip '{_SKIP.get(kind, f'*-{kind.value}-*')}'" for kind in by_kind)
    hint = (
        f"kernelwheel compiles {_BUILT_HERE_NAMES} variants only; leave these out with {skips} "
        "(`kernelwheel matrix` lists every variant with the runner it needs)"
    )
    count = sum(len(group) for group in by_kind.values())
    if count == 1:
        ((_, (variant,)),) = by_kind.items()
        raise ToolchainError(f"{variant.name}: {missing_toolchain(variant)}", hint=hint)
    lines = [
        f"  {backend_problem(kind, ', '.join(v.name for v in group))}"
        for kind, group in by_kind.items()
    ]
    raise ToolchainError(
        f"{count} selected variant(s) need a toolchain kernelwheel does not have:\n"
        + "\n".join(lines),
        hint=hint,
    )


def require_a_backend_built_here(project: str, backends: Iterable[BackendKind]) -> None:
    """Refuse a project none of whose ``backends`` kernelwheel compiles (no default to build)."""
    kinds = list(backends)
    if any(kind in BUILT_HERE for kind in kinds):
        return
    reasons = [f"{kind.value}: {backend_problem(kind, 'its variants')}" for kind in kinds]
    raise ToolchainError(
        f"{project}: none of its backends ({', '.join(k.value for k in kinds)}) can be built "
        "here:\n  " + "\n  ".join(reasons),
        hint=f"kernelwheel compiles {_BUILT_HERE_NAMES} variants only; `kernelwheel matrix` lists "
        "this kernel's variants with the runner each needs",
    )


def _runner_label(kind: BackendKind) -> str:
    """The runner the others need: a self-hosted runner label, to be registered (a placeholder)."""
    return f"self-hosted-{kind.value}"


def _compiled_kind(variant: Variant) -> BackendKind | None:
    return None if variant.torch is None or variant.backend is None else variant.backend.kind
