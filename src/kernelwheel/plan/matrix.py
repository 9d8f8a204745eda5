"""Plan the variants a kernel builds from the recipes, with a reason for each one left out, by the
rules of docs/building.md, "The matrix" (backends, torch and CUDA bounds, arches, stable-ABI,
noarch and tvm-ffi variants); facts that remove no variant come back as ``notes``."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from packaging.version import Version

from ..model.project import Framework, KernelProject, KernelSection
from ..model.recipes import Recipes, VariantRecipe
from ..model.variant import OS, Arch, Backend, BackendKind, TorchVersion, Variant
from .selector import Selector
from .toolchains import missing_toolchain, runner_for


@dataclass(frozen=True)
class Rejection:
    """A variant that was considered and left out, and why."""

    variant_name: str
    reason: str


@dataclass(frozen=True)
class MatrixPlan:
    """The planned variants (in recipe order, stable-ABI ones last), the left-out ones with
    reasons, each selected variant's kernel ids (none for noarch) and notes that reject nothing."""

    selected: tuple[VariantRecipe, ...]
    rejected: tuple[Rejection, ...]
    kernels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.selected)

    def get(self, name: str) -> VariantRecipe | None:
        return next((r for r in self.selected if r.name == name), None)

    def kernels_for(self, name: str) -> tuple[str, ...]:
        """The ids of the ``[kernel.*]`` sections the variant ``name`` compiles."""
        return dict(self.kernels)[name]

    def select(self, selector: Selector) -> MatrixPlan:
        """Apply ``build``/``skip``/``only``: the deselected variants move to ``rejected``."""
        left_out = {r.variant_name: r.reason for r in self.rejected}
        keep = set(selector.select(self.names, left_out=left_out))
        dropped = [
            Rejection(r.name, selector.why_not(r.name) or "not selected")
            for r in self.selected
            if r.name not in keep
        ]
        return replace(
            self,
            selected=tuple(r for r in self.selected if r.name in keep),
            rejected=self.rejected + tuple(dropped),
            kernels=tuple(pair for pair in self.kernels if pair[0] in keep),
        )


def plan_matrix(
    project: KernelProject,
    recipes: Recipes,
    *,
    arches: Iterable[Arch] | None = None,
    with_cpu_kernels: bool = False,
) -> MatrixPlan:
    """The variants ``project`` builds from ``recipes``, each with the kernels it compiles: its
    backend's, and the cpu ones ``with_cpu_kernels`` (not for tvm-ffi)."""
    if project.noarch:
        return _plan_noarch(project, recipes)
    tvm = project.framework is Framework.TVM_FFI
    arch_filter = None if arches is None else tuple(arches)
    wanted = tuple(project.backends)
    selected: list[VariantRecipe] = []
    rejected: list[Rejection] = []
    kernels: list[tuple[str, tuple[str, ...]]] = []
    stable: _Groups = {}

    for variant in recipes.tvm_ffi_variants() if tvm else recipes.variants():
        assert variant.backend is not None and variant.arch is not None
        kind = variant.backend.kind.value
        if kind not in wanted:
            why = f"backend {kind} not in the project's backends ({', '.join(wanted)})"
            rejected.append(Rejection(variant.name, why))
            continue
        recipe = recipes.recipe_for(variant)
        own, reasons = _own_kernels(project, variant, arch_filter)
        if project.torch is not None and recipe.torch_version is not None:
            torch = Version(recipe.torch_version)
            bounds, where = (project.torch.minver, project.torch.maxver), project.build_toml.name
            reasons = _bound_reasons("torch", torch, *bounds, "torch.", where) + reasons
        compiled = list(own)
        if with_cpu_kernels and not tvm and kind != BackendKind.CPU.value:  # docs/compile.md
            compiled += [k for k in project.kernels if k.backend == BackendKind.CPU.value]
        if project.stable_abi_for(kind) is not None:
            assert variant.os is not None
            group = stable.setdefault((variant.backend, variant.arch, variant.os), [])
            group.append((variant, reasons, tuple(k.id for k in compiled)))
        elif reasons:
            rejected.append(Rejection(variant.name, "; ".join(reasons)))
        else:
            selected.append(recipe)
            kernels.append((variant.name, tuple(k.id for k in compiled)))

    chosen, left_out = _stable_abi_variants(project, recipes, stable)
    for recipe, ids in chosen:
        selected.append(recipe)
        kernels.append((recipe.name, ids))
    rejected += left_out
    notes = _tvm_ffi_notes(wanted, recipes) if tvm else _backend_notes(wanted, recipes, selected)
    return MatrixPlan(tuple(selected), tuple(rejected), tuple(kernels), tuple(notes))


def _tvm_ffi_notes(wanted: tuple[str, ...], recipes: Recipes) -> list[str]:
    if recipes.tvm_ffi is None:
        return [
            f"tvm-ffi project: the recipes have no tvm-ffi.toml, so nothing is planned (add one "
            f"to {recipes.origin})"
        ]
    covered = {v.backend.kind.value for v in recipes.tvm_ffi_variants() if v.backend}
    return [
        f"backend {backend}: the tvm-ffi recipe has no {backend} flavour, so none is "
        f"planned (add one to {recipes.origin}/tvm-ffi.toml)"
        for backend in wanted
        if backend not in covered
    ]


# Backends PyTorch publishes no torch build of: kernel-builder builds them only as noarch variants.
_VENDOR_TORCH = (BackendKind.NEURON, BackendKind.TPU, BackendKind.CANN)


def _backend_notes(
    wanted: tuple[str, ...], recipes: Recipes, selected: list[VariantRecipe]
) -> list[str]:
    """A note per backend of the project with no variant in the recipes, and per backend whose
    planned variants kernelwheel does not compile (the runner they need)."""
    notes: list[str] = []
    covered = {v.backend.kind.value for v in recipes.variants() if v.backend is not None}
    for backend in wanted:
        if backend in covered:
            continue
        kind = BackendKind(backend)
        if kind in _VENDOR_TORCH:
            notes.append(
                f"backend {backend}: its torch comes from the vendor's package, not PyTorch; "
                f"kernel-builder builds it only as the noarch variant "
                f"{Variant(None, Backend(kind), None, None, None).name}, so no compiled "
                f"{backend} variant is planned"
            )
        else:
            notes.append(
                f"backend {backend}: the recipes have no {backend} builds, so none is planned "
                f"(add a {backend} flavour to {recipes.origin}/torch.toml)"
            )
    elsewhere: dict[BackendKind, list[Variant]] = {}
    for recipe in selected:
        variant = recipe.variant
        if missing_toolchain(variant) is not None and variant.backend is not None:
            elsewhere.setdefault(variant.backend.kind, []).append(variant)
    for kind, variants in elsewhere.items():
        notes.append(
            f"{len(variants)} {kind.value} variant(s) planned but not built by kernelwheel "
            f"(no {kind.display_name} toolchain): build them on a runner labelled "
            f"{runner_for(variants[0])}; matrix --json lists them under 'elsewhere'"
        )
    system_cuda: dict[str, list[str]] = {}
    for recipe in selected:
        if recipe.cuda is not None and recipe.cuda.source == "system":
            system_cuda.setdefault(recipe.cuda.version, []).append(recipe.name)
    for version, names in system_cuda.items():
        notes.append(
            f"CUDA {version} toolchain is 'system': not installable from PyPI; "
            f"{len(names)} variant(s) need a CUDA {version} toolkit in the build image"
        )
    return notes


# The per-torch variants of the backends in ``torch.stable-abi``, by flavour and arch, in recipe
# order: each variant with the reasons against it and its kernel ids. Each group becomes one
# stable-ABI variant, built with the newest torch that may.
_Groups = dict[tuple[Backend, Arch, OS], list[tuple[Variant, list[str], tuple[str, ...]]]]


def _stable_abi_variants(
    project: KernelProject, recipes: Recipes, groups: _Groups
) -> tuple[list[tuple[VariantRecipe, tuple[str, ...]]], list[Rejection]]:
    """Each group's stable-ABI variant with its kernel ids, and the rejections."""
    chosen: list[tuple[VariantRecipe, tuple[str, ...]]] = []
    out: list[Rejection] = []
    for (backend, arch, os), members in groups.items():
        version = project.stable_abi_for(backend.kind.value)
        assert version is not None
        abi = TorchVersion(version.major, version.minor)
        stable = Variant(abi, backend, None, arch, os, stable_abi=True)
        fit = [(v, ids) for v, reasons, ids in members if not reasons and _at_least(v, abi)]
        picked = fit[-1] if fit else None
        if picked is not None:
            chosen.append((recipes.recipe_for(stable, build=picked[0].torch), picked[1]))
        head = (
            f"backend {backend.kind.value} builds the stable ABI of torch {abi} "
            f"({project.build_toml.name} torch.stable-abi) once, as {stable.name}"
        )
        for variant, _, _ in members:
            if picked is not None and variant == picked[0]:
                why = "that build uses this torch"
            elif not _at_least(variant, abi):
                why = f"torch {variant.torch} is older than that ABI"
            elif picked is not None:
                why = f"that build uses torch {picked[0].torch}"
            else:
                why = "no torch of the recipes can build it"
            out.append(Rejection(variant.name, f"{head}; {why}"))
        if picked is None:
            newer = [(v, r) for v, r, _ in members if _at_least(v, abi)]
            why = (
                "; ".join(newer[-1][1])
                if newer
                else f"the recipes have no torch >= {abi} with {backend.token} for {arch.value}"
            )
            out.append(Rejection(stable.name, f"no torch >= {abi} can build it: {why}"))
    return chosen, out


def _at_least(variant: Variant, abi: TorchVersion) -> bool:
    return variant.torch is not None and variant.torch >= abi


def _plan_noarch(project: KernelProject, recipes: Recipes) -> MatrixPlan:
    backends: list[Backend | None] = [Backend(BackendKind(b)) for b in project.backends]
    variants = [Variant(None, b, None, None, None) for b in backends or [None]]
    selected = tuple(recipes.recipe_for(v) for v in variants)
    note = (
        "noarch project (pure Python): its variants are built into one py3-none-any wheel, "
        "with an extra per backend for that backend's python-depends"
    )
    return MatrixPlan(selected, (), tuple((r.name, ()) for r in selected), (note,))


def _own_kernels(
    project: KernelProject, variant: Variant, arch_filter: tuple[Arch, ...] | None
) -> tuple[list[KernelSection], list[str]]:
    """The kernels of ``variant``'s backend that its toolkit can build, and the reasons against
    the variant."""
    assert variant.backend is not None and variant.arch is not None
    kind = variant.backend.kind.value
    reasons: list[str] = []
    if arch_filter is not None and variant.arch not in arch_filter:
        shown = ", ".join(a.value for a in arch_filter) or "none"
        reasons.append(f"arch {variant.arch.value} not among the selected arches ({shown})")
    own = [k for k in project.kernels if k.backend == kind]
    if not own:
        # a kernel of a backend the project does not build: likely this backend's, misnamed
        stray = "".join(
            f'; [kernel.{k.id}] has backend = "{k.backend}", which general.backends does not list'
            for k in project.kernels
            if k.backend not in project.backends
        )
        reasons.append(f'no [kernel.*] section has backend = "{kind}"{stray}')
    elif variant.backend.kind is BackendKind.CUDA:
        cuda = Version(variant.backend.cuda_version)
        bounds = (project.cuda_minver, project.cuda_maxver)
        reasons += _bound_reasons("CUDA", cuda, *bounds, "general cuda ", project.build_toml.name)
        against = {
            k.id: _bound_reasons(
                "CUDA", cuda, k.cuda_minver, None, f"kernel.{k.id}.cuda-", "build.toml"
            )
            for k in own
        }
        accepted = [k for k in own if not against[k.id]]
        if not accepted:
            reasons += [reason for k in own for reason in against[k.id]]
        own = accepted
    return own, reasons


def _bound_reasons(
    what: str, version: Version, low: Version | None, high: Version | None, key: str, where: str
) -> list[str]:
    """Inclusive bounds compared at the bound's precision; reasons for a miss."""
    reasons = []
    for bound, sign, miss in ((low, "<", operator.lt), (high, ">", operator.gt)):
        if bound is None:
            continue
        mine = (version.release + (0,) * len(bound.release))[: len(bound.release)]
        if miss(mine, bound.release):
            end = "minver" if sign == "<" else "maxver"
            shown = ".".join(map(str, mine))
            reasons.append(f"{what} {shown} {sign} {key}{end} {bound} ({where})")
    return reasons
