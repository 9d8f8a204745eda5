"""The one variant ``kernelwheel build`` makes when nothing is selected, and its capabilities
(docs/building.md, "The default variant"). :func:`default_build` is pure: this machine's facts
come in a :class:`Machine`, which :func:`probe_machine` reads and a test writes."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from .._util import RUNNER, Runner
from ..compat import interpreter, probe_cache
from ..compat import rules as compat
from ..compat.builds import build_of, parse_variant
from ..compat.gpus import Gpus, visible_gpus
from ..errors import ToolchainError, UsageError
from ..model.capability import CudaCapability, joined
from ..model.project import Framework, KernelProject
from ..model.recipes import VariantRecipe
from ..model.variant import OS, Arch, BackendKind, Variant
from .matrix import MatrixPlan
from .options import Options
from .toolchains import BUILT_HERE, require_a_backend_built_here

# How long the probe of an interpreter found implicitly (the active virtual environment: it
# only guides the default) may take, in seconds; one torch import takes a few. A --python the
# user named gets the probe's own bound (compat.interpreter: 300 s, a cold torch on a slow disk).
IMPLICIT_PROBE_TIMEOUT = 30.0


@dataclass(frozen=True)
class TorchAt:
    """An interpreter's torch (None: ``error`` says why) and, for messages, its ``origin``
    (``--python python3``, ``the active virtual environment X``)."""

    origin: str
    torch: compat.Torch | None
    machine: str = ""  # its platform.machine(); "" : this machine's
    error: str | None = None
    # why the interpreter could not be run at all (it hung, it does not start): then ``error``
    # is no torch's import error, and the message says this instead
    unusable: str | None = None


@dataclass(frozen=True)
class Machine:
    """What the default variant depends on: the ``--python`` interpreter's torch (the build runs
    in it), the active virtual environment's (it only guides the choice), the GPUs."""

    arch: Arch
    gpus: Gpus = Gpus((), "not asked")
    python: TorchAt | None = None
    venv: TorchAt | None = None
    # The newest CUDA the driver supports (compat.rules.cuda_driver); None: unknown
    driver: tuple[int, int] | None = None


@dataclass(frozen=True)
class DefaultBuild:
    """The default variant, why, the capabilities of this machine's GPUs a CUDA build compiles
    for (empty: the full list), and notes for the user."""

    recipe: VariantRecipe
    reason: str
    gpu_capabilities: tuple[CudaCapability, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # Rule 3's other candidates, newest first: what :func:`within_reach` falls back to when
    # this machine cannot get the recipe's torch (rules 1 and 2 name a torch: none).
    fallbacks: tuple[VariantRecipe, ...] = ()
    # False where no candidate runs here (a CUDA-only kernel, no GPU): any of them only compiles
    # and loads here, so :func:`prefer_available` may take an older one already on this machine
    runs_here: bool = True


def default_build(
    project: KernelProject, plan: MatrixPlan, options: Options, machine: Machine
) -> DefaultBuild:
    """The default variant of ``project`` from ``plan`` (the matrix before any selector) for
    ``machine``; nothing fitting is a UsageError quoting the plan's rejections."""
    require_a_backend_built_here(project.name, [BackendKind(b) for b in project.backends])
    notes: list[str] = []
    chosen: tuple[VariantRecipe, str] | None = None
    if machine.python is not None:
        if machine.python.torch is None:
            raise ToolchainError(
                f"{machine.python.origin} has no usable torch ({machine.python.error})",
                hint="install torch into it, or omit --python so kernelwheel makes the build "
                "environment",
            )
        chosen = _for_torch(plan, machine.python, machine.arch)
        if chosen is None:
            raise UsageError(
                f"no variant for {_why_not(plan, machine.python, machine.arch)}",
                hint="build another variant in an environment kernelwheel makes: --variant NAME "
                "without --python (`kernelwheel matrix` lists the plan), or pass a --python whose "
                "torch the plan has",
            )
    elif machine.venv is not None:
        chosen = _for_torch(plan, machine.venv, machine.arch)
        if chosen is None:
            notes.append(f"not the torch of {_why_not(plan, machine.venv, machine.arch)}")
    fallbacks: tuple[VariantRecipe, ...] = ()
    if chosen is None:
        recipe, reason, fallbacks = _newest(project, plan, machine, notes)
    else:
        recipe, reason = chosen
    gpu_capabilities = _gpu_capabilities(recipe, machine.gpus, options, notes)
    backend = recipe.variant.backend
    runs_here = not (
        chosen is None
        and backend is not None
        and backend.kind is BackendKind.CUDA
        and not machine.gpus.present
    )
    return DefaultBuild(recipe, reason, gpu_capabilities, tuple(notes), fallbacks, runs_here)


# -- the interpreter's torch ------------------------------------------------------------------


def _arch_of(seen: TorchAt, host: Arch) -> Arch:
    try:
        return Arch(seen.machine) if seen.machine else host
    except ValueError:
        return host


def _fits(variant: Variant, torch: compat.Torch, arch: Arch) -> bool:
    """Whether a build of ``variant`` loads into ``torch`` and, for a GPU variant, was made with
    that torch's very toolkit (what a build with --python needs)."""
    if variant.arch is not arch or variant.os is not OS.LINUX or variant.backend is None:
        return False
    if compat.problems(build_of(variant), torch):
        return False
    return variant.backend.kind is BackendKind.CPU or variant.backend.token == torch.token


def _for_torch(plan: MatrixPlan, seen: TorchAt, host: Arch) -> tuple[VariantRecipe, str] | None:
    """The plan's best fit for ``seen``'s torch (compat.rules.preference; the newest of equals),
    None when none fits."""
    torch = seen.torch
    if torch is None:
        return None
    arch = _arch_of(seen, host)
    fitting = [
        (compat.preference(build_of(r.variant), torch), -index, r)
        for index, r in enumerate(plan.selected)
        if _fits(r.variant, torch, arch)
    ]
    if not fitting:
        return None
    recipe = min(fitting, key=lambda item: item[:2])[2]
    return recipe, f"the torch of {seen.origin}: {torch.describe()}"


def _why_not(plan: MatrixPlan, seen: TorchAt, host: Arch) -> str:
    """``<origin> (torch …): <why the plan has no variant for it>``."""
    if seen.unusable is not None:
        return f"{seen.origin}: {seen.unusable}"
    if seen.torch is None:
        return f"{seen.origin}: it has no torch ({seen.error})"
    arch = _arch_of(seen, host)
    reasons = [  # the plan's rejections of the variants made for this torch
        f"{r.variant_name}: {r.reason}"
        for r in plan.rejected
        if (variant := parse_variant(r.variant_name)) is not None
        and _fits(variant, seen.torch, arch)
    ]
    if reasons:
        why = "the plan leaves its variants out: " + "; ".join(reasons[:3])
        if len(reasons) > 3:
            why += f"; and {len(reasons) - 3} more"
    else:
        why = (
            f"the recipes have no variant for torch {compat.dotted(seen.torch.release)} "
            f"{seen.torch.token} on {arch.value}"
        )
    return f"{seen.origin}, {seen.torch.describe()}: {why}"


# -- the newest for this machine ----------------------------------------------------------------


def _newest(
    project: KernelProject, plan: MatrixPlan, machine: Machine, notes: list[str]
) -> tuple[VariantRecipe, str, tuple[VariantRecipe, ...]]:
    """The newest variant this machine builds and, preferably, runs, and the others of its kind
    it would run, newest first."""

    def here(kind: BackendKind) -> list[tuple[int, VariantRecipe]]:
        return [
            (index, r)
            for index, r in enumerate(plan.selected)
            if r.variant.arch is machine.arch
            and r.variant.os is OS.LINUX
            and r.variant.backend is not None
            and r.variant.backend.kind is kind
        ]

    cuda, cpu = here(BackendKind.CUDA), here(BackendKind.CPU)
    where = machine.arch.value
    if BackendKind.CUDA.value in project.backends:  # else the GPUs were not asked about
        where += f", {machine.gpus.describe()}"
    candidates, what = cuda, "variant"
    if cuda and (machine.gpus.present or not cpu):
        if not machine.gpus.present:
            notes.append(
                f"this machine has {machine.gpus.describe()}: the wheel's CUDA ops cannot run "
                f"here, and {project.name} has no cpu backend to build instead"
            )
        elif machine.driver is not None:
            where += f", a driver for CUDA {compat.dotted(machine.driver)}"
            candidates = _for_driver(cuda, machine.driver, notes)
    elif cpu:
        candidates, what = cpu, "CPU variant"
        if machine.gpus.present and BackendKind.CUDA.value in project.backends:
            notes.append("the plan has no CUDA variant for this machine (`kernelwheel matrix`)")
    if candidates:
        newest, *older = _newest_first(candidates)
        return newest, f"the newest {what} the plan allows for this machine ({where})", (*older,)
    left_out = [
        f"{r.variant_name}: {r.reason}"
        for r in plan.rejected
        if (variant := parse_variant(r.variant_name)) is not None
        and variant.arch is machine.arch
        and variant.backend is not None
        and variant.backend.kind in BUILT_HERE
        and variant.backend.kind.value in project.backends
    ][::-1]  # the newest first
    shown = "\n  ".join(left_out[:4])
    if len(left_out) > 4:
        shown += f"\n  … and {len(left_out) - 4} more"
    raise UsageError(
        f"the plan of {project.name} has no CPU or CUDA variant for this machine "
        f"({machine.arch.value})" + (f"; left out:\n  {shown}" if left_out else ""),
        hint="`kernelwheel matrix` lists the plan and why the rest is left out; pass "
        "--variant NAME to build one of it",
    )


def _cuda_of(recipe: VariantRecipe) -> tuple[int, int]:
    backend = recipe.variant.backend
    assert backend is not None and backend.kind is BackendKind.CUDA and backend.version
    major, minor = backend.version  # (major, minor): Backend checks it
    return major, minor


def _for_driver(
    cuda: list[tuple[int, VariantRecipe]], driver: tuple[int, int], notes: list[str]
) -> list[tuple[int, VariantRecipe]]:
    """The CUDA variants a driver for CUDA ``driver`` loads (compat.rules, as the installer and
    the wheel's guard apply it); all of them, with a note, where it loads none."""
    runs = [item for item in cuda if compat.driver_loads(_cuda_of(item[1]), driver)]
    newest = _newest_first(cuda)[0]
    has = compat.dotted(driver)
    if not runs:
        oldest = compat.dotted(min(_cuda_of(r) for _, r in cuda))
        notes.append(
            f"this machine's driver supports CUDA {has}, older than every CUDA variant of the "
            f"plan: the wheel's CUDA ops cannot run here until the driver is updated (to one for "
            f"CUDA {oldest} or newer)"
        )
        return cuda
    if not compat.driver_loads(_cuda_of(newest), driver):
        notes.append(
            f"not {newest.name}: it needs a driver for CUDA "
            f"{compat.dotted(_cuda_of(newest))}, this machine's supports {has} "
            f"(--variant {newest.name} builds it anyway)"
        )
    return runs


def _newest_first(items: Sequence[tuple[int, VariantRecipe]]) -> list[VariantRecipe]:
    """The newest torch (the one a stable-ABI variant is built with) first, then the newest
    CUDA, then the later in the plan."""

    def key(item: tuple[int, VariantRecipe]) -> tuple[Version, Version, int]:
        index, recipe = item
        backend = recipe.variant.backend
        cuda = backend.cuda_version if backend and backend.kind is BackendKind.CUDA else "0"
        return Version(recipe.torch_version or "0"), Version(cuda), index

    return [recipe for _, recipe in sorted(items, key=key, reverse=True)]


# -- a torch this machine can get ------------------------------------------------------------------


def prefer_available(
    default: DefaultBuild, available: Callable[[VariantRecipe], bool]
) -> DefaultBuild:
    """Where no candidate runs here (``default.runs_here`` false), the newest of them whose
    torch is already on this machine (``available``: its environment cached, its wheel in a
    local folder), not a newer one pip may not find after minutes; ``default`` otherwise."""
    candidates = (default.recipe, *default.fallbacks)
    if default.runs_here or available(default.recipe):
        return default
    chosen = next((r for r in default.fallbacks if available(r)), None)
    if chosen is None:
        return default
    newer = candidates[: candidates.index(chosen)]
    return replace(
        default,
        recipe=chosen,
        reason=f"{default.reason}, the newest whose torch is already here (no GPU: any CUDA "
        "variant only compiles and loads here)",
        notes=(
            *default.notes,
            f"not {default.recipe.name}"
            + (f" nor the {len(newer) - 1} other(s) newer than {chosen.name}" * (len(newer) > 1))
            + ": no cached environment or --find-links folder holds its torch (--variant "
            f"{default.recipe.name} fetches it and builds that)",
        ),
        fallbacks=tuple(r for r in candidates if r is not chosen),
    )


def within_reach(
    default: DefaultBuild, cannot_get: Mapping[str, str], others: Sequence[tuple[str, str]] = ()
) -> DefaultBuild:
    """``default``, or, when this machine cannot get its torch, the newest fallback it can get,
    noting each passed over. ``cannot_get``: variant -> why; ``others``: (name, how) of the plan's
    other variants it can get, newest first, for the error when none of the candidates can."""
    candidates = (default.recipe, *default.fallbacks)
    chosen = next((r for r in candidates if r.name not in cannot_get), None)
    if chosen is None:
        raise _out_of_reach(default, cannot_get, others)
    if chosen is default.recipe:
        return default
    passed = candidates[: candidates.index(chosen)]
    notes = [*default.notes, *(f"not {r.name}: {cannot_get[r.name]}" for r in passed)]
    capabilities = default.gpu_capabilities
    if chosen.cuda is not None and capabilities:
        if not {c.target for c in capabilities} <= chosen.cuda.targets:
            notes.append(f"{chosen.name} does not target every GPU here: compiling its full list")
            capabilities = ()
    return replace(
        default,
        recipe=chosen,
        reason=f"{default.reason}, the newest whose torch this machine can get",
        gpu_capabilities=capabilities,
        notes=tuple(notes),
        fallbacks=candidates[candidates.index(chosen) + 1 :],
    )


def _out_of_reach(
    default: DefaultBuild, cannot_get: Mapping[str, str], others: Sequence[tuple[str, str]]
) -> ToolchainError:
    recipe, *older = (default.recipe, *default.fallbacks)
    shown = f"  {recipe.name}: {cannot_get[recipe.name]}"
    # the older ones by name alone where the reason is the same but for the torch pin
    same = [
        r.name
        for r in older
        if cannot_get[r.name].replace(str(r.torch_requirement), str(recipe.torch_requirement))
        == cannot_get[recipe.name]
    ]
    shown += "".join(f"\n  {r.name}: {cannot_get[r.name]}" for r in older if r.name not in same)
    if same:
        shown += "\n  and the older ones the same way: " + ", ".join(same)
    fixes = [
        "build in an interpreter that holds torch (with setuptools and ninja), such as a "
        "virtual environment's: --python PY (e.g. --python .venv/bin/python); the build runs "
        "in it and fetches no torch"
    ]
    if others:
        fixes.append(
            "build a variant this machine can get: "
            + ", ".join(f"--variant {name} ({how})" for name, how in others[:3])
        )
    fetch = f"pip download '{recipe.torch_requirement}' --no-deps -d DIR"
    if recipe.index_url:
        fetch += f" --index-url {recipe.index_url}"
    fixes.append(
        f"fetch the torch wheel where it can be fetched ({fetch}) and pass --find-links DIR"
    )
    numbered = "".join(f"\n    {i}. {fix}" for i, fix in enumerate(fixes, 1))
    return ToolchainError(
        f"this machine can get the torch of none of the default's candidates "
        f"({default.reason}):\n{shown}",
        hint=f"one of these, in order:{numbered}",
    )


# -- the capabilities ------------------------------------------------------------------------------


def _gpu_capabilities(
    recipe: VariantRecipe, gpus: Gpus, options: Options, notes: list[str]
) -> tuple[CudaCapability, ...]:
    """The GPUs' capabilities a CUDA default compiles for; empty: the full list."""
    backend = recipe.variant.backend
    if backend is None or backend.kind is not BackendKind.CUDA or recipe.cuda is None:
        return ()
    if options.cuda_capabilities is not None:  # the user's list, or "all"
        return ()
    everything = "every capability of build.toml's cuda-capabilities or the recipe's list"
    if not gpus.present:
        notes.append(f"{gpus.describe()}: compiling for {everything}")
        return ()
    unknown = [c for c in gpus.capabilities if c.target not in recipe.cuda.targets]
    if unknown:
        notes.append(
            f"GPU capability {joined(unknown)} is not among CUDA {backend.cuda_version}'s "
            f"targets: compiling for {everything}"
        )
        return ()
    notes.append(
        f"compiling for the GPUs of this machine only: {joined(gpus.capabilities)} "
        f"({gpus.source}); --cuda-capabilities all builds {everything}, as selections, "
        "`kernelwheel matrix` and releases do"
    )
    return gpus.capabilities


def capabilities_here(
    recipe: VariantRecipe,
    options: Options,
    environ: Mapping[str, str] | None = None,
    runner: Runner = RUNNER,
) -> tuple[tuple[CudaCapability, ...], tuple[str, ...]]:
    """(capabilities, notes) by the default build's rule, whatever selected the variant
    (``kernelwheel dev``'s builds only ever load here)."""
    backend = recipe.variant.backend
    if backend is None or backend.kind is not BackendKind.CUDA:
        return (), ()
    gpus = visible_gpus(options.python, environ, runner)
    notes: list[str] = []
    capabilities = _gpu_capabilities(recipe, gpus, options, notes)
    if not gpus.present and options.cuda_capabilities is None:  # nothing here runs them
        notes.append(
            "a dev build without a GPU only proves the code compiles: --cuda-capabilities 9.0 "
            "(KERNELWHEEL_CUDA_CAPABILITIES) compiles for that one capability, much faster"
        )
    return capabilities, tuple(notes)


# -- reading the machine ---------------------------------------------------------------------------


def probe_machine(
    project: KernelProject,
    options: Options,
    environ: Mapping[str, str] | None = None,
    runner: Runner = RUNNER,
) -> Machine:
    """This machine's facts for :func:`default_build` (GPUs only for a project with a CUDA
    backend); ``environ`` defaults to ``os.environ``."""
    # A project kernelwheel builds nothing of is refused before any interpreter is run.
    require_a_backend_built_here(project.name, [BackendKind(b) for b in project.backends])
    env = os.environ if environ is None else environ
    python = venv = None
    if project.framework is Framework.TVM_FFI:  # no torch: the interpreters' picks nothing
        pass
    elif options.python is not None:
        python = _probe(options.python, f"--python {options.python}", options.cache_dir, runner)
    elif (candidate := active_venv_python(env)) is not None:
        venv = _probe_venv(candidate, options.cache_dir, runner)
    gpus = Gpus((), "not asked: the project has no cuda backend")
    driver = None
    if BackendKind.CUDA.value in project.backends:
        interpreter.checked_driver_setting()  # a value that is no version: refused, named
        # A torch known to be no CUDA build lists no GPU: not asked (a torch import, 2 s of
        # every dev run on a machine without nvidia-smi)
        torch = python.torch if python is not None else None
        other = torch if torch is not None and torch.kind != "cuda" else None
        asked = options.python if other is None and python is not None else None
        gpus = visible_gpus(asked, env, runner)
        if other is not None and not gpus.present:
            gpus = Gpus((), f"{gpus.source}; {options.python}: a {other.kind} torch, no GPU")
        driver = compat.cuda_driver() if gpus.present else None
    return Machine(Arch.host(), gpus, python, venv, driver)


def active_venv_python(environ: Mapping[str, str] | None = None) -> Path | None:
    """The interpreter of the active virtual environment (``VIRTUAL_ENV``), where there is one."""
    active = (os.environ if environ is None else environ).get("VIRTUAL_ENV", "").strip()
    python = Path(active) / "bin" / "python" if active else None
    return python if python is not None and python.exists() else None


def venv_variant(
    plan: MatrixPlan,
    options: Options,
    environ: Mapping[str, str] | None = None,
    runner: Runner = RUNNER,
) -> tuple[VariantRecipe, Path, str] | None:
    """The plan's variant for the active virtual environment's torch (none with ``--python``),
    its interpreter and what it holds; None where there is no such venv or nothing fits."""
    python = None if options.python is not None else active_venv_python(environ)
    if python is None:
        return None
    chosen = _for_torch(plan, _probe_venv(python, options.cache_dir, runner), Arch.host())
    return None if chosen is None else (chosen[0], python, chosen[1])


def _probe_venv(python: Path, cache_dir: Path, runner: Runner) -> TorchAt:
    """The active virtual environment's torch; a broken venv only guides the choice: rule 3
    decides, and a note says why."""
    origin = f"the active virtual environment {python.parents[1]}"
    try:
        return _probe(python, origin, cache_dir, runner, IMPLICIT_PROBE_TIMEOUT)
    except interpreter.ProbeFailed as exc:
        return TorchAt(origin, None, unusable=f"its python {python} {_failure(exc)}")


def _failure(exc: interpreter.ProbeFailed) -> str:
    """``gave no answer within 30 s`` / ``cannot be run (…)``, for the notes."""
    text = str(exc)
    if text.startswith("no answer"):
        return f"gave {text} (the probe imports torch); it was stopped"
    return f"cannot be run ({text.splitlines()[-1] if text else 'no output'})"


def _probe(
    python: Path, origin: str, cache_dir: Path, runner: Runner, timeout: float | None = None
) -> TorchAt:
    """``python``'s torch; a ProbeFailed of a --python is a ToolchainError naming it."""
    try:
        found, _ = probe_cache.run_cached(python, cache_dir, runner, timeout=timeout)
    except interpreter.ProbeFailed as exc:
        if timeout is not None:  # an implicit interpreter: its failure is the caller's note
            raise
        raise ToolchainError(
            f"cannot run {origin}: {exc}", hint="pass a working Python 3 interpreter"
        ) from None
    return TorchAt(origin, found.torch, found.machine, found.torch_error)
