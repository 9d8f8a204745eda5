"""What this machine lacks to build a planned variant (a ``system`` CUDA toolkit, a torch index it
cannot reach), found before any environment is made (recipes/README.md): refused for every
selected variant at once, or the default variant settled on one this machine can build."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, partial
from pathlib import Path

from packaging.version import Version

from .._util import RUNNER, Runner
from ..errors import ToolchainError
from ..model.project import Framework
from ..model.recipes import CudaToolchain, VariantRecipe
from ..model.variant import OS, Arch
from ..plan.defaults import Machine, prefer_available, venv_variant, within_reach
from ..plan.options import Options
from ..plan.planning import Planned, Selection, select
from ..plan.toolchains import BUILT_HERE
from ..toolchain.envs import (
    EnvSpec,
    env_ready,
    env_spec_for,
    installed_toolkits,
    nvcc_version,
    unreachable,
)
from .request import BuildRequest


def system_toolkit(
    cuda: CudaToolchain, explicit: Path | None = None, runner: Runner = RUNNER
) -> tuple[Path | None, str]:
    """This machine's toolkit of exactly CUDA ``cuda.version`` (no PyPI wheel ships CUDA
    11.8/12.x's nvcc; a cu126 build compiled by nvcc 12.8 would need a 12.8 driver), or None and
    what was found."""
    seen: list[str] = []
    if explicit is not None:
        candidates = [("--cuda-home", explicit)]
    else:
        candidates = installed_toolkits(cuda.version, [Path(p) for p in cuda.system_paths])
    for source, home in candidates:
        if not (home / "bin" / "nvcc").is_file():
            if source == "--cuda-home":
                seen.append(f"{home} (--cuda-home) has no bin/nvcc")
            continue
        try:
            version = nvcc_version(home, runner)
        except ToolchainError as exc:
            seen.append(f"{home} ({source}): {exc.message}")
            continue
        if version == cuda.version:
            return home, ""
        seen.append(f"{home} ({source}) is CUDA {version}")
    return None, "; ".join(dict.fromkeys(seen)) or "no nvcc found"


def toolkit_problem(
    recipe: VariantRecipe, explicit: Path | None = None, runner: Runner = RUNNER
) -> str | None:
    """Why the variant's "system" CUDA toolchain is not here; None when it is, or not needed."""
    cuda = recipe.cuda
    if cuda is None or cuda.source != "system":
        return None
    home, found = system_toolkit(cuda, explicit, runner)
    if home is not None:
        return None
    where = f"build it in {cuda.image} (its image), or " if cuda.image else ""
    return (
        f"needs a CUDA {cuda.version} toolkit, which no PyPI wheel ships ({found}): {where}"
        f"install CUDA {cuda.version} and pass --cuda-home DIR"
    )


def _local_wheel(requirement: str, folders: Iterable[str], arch: Arch | None) -> bool:
    """A ``torch-<version>+<label>-*_<arch>.whl`` for ``torch==<version>+<label>`` (or ``===``,
    PyPI's torch) in a local folder."""
    version = requirement.partition("==")[2].lstrip("=")
    pattern = f"torch-{version}-*{arch.value if arch else ''}.whl"
    paths = (Path(folder.removeprefix("file://")).expanduser() for folder in folders)
    return any(path.is_dir() and any(path.glob(pattern)) for path in paths)


# Each index is asked once per run, whatever the number of variants that need it.
_unreachable = cache(unreachable)


def torch_source_problem(
    recipe: VariantRecipe, spec: EnvSpec | None, environ: Mapping[str, str] | None = None
) -> str | None:
    """Why the variant's torch cannot come from PyTorch's index (an extra index of ``spec``):
    no local find-links folder (the build's, or PIP_FIND_LINKS) holds it and the index is mute."""
    if spec is None or recipe.index_url not in spec.sources.extra_index_urls:
        return None
    env = os.environ if environ is None else environ
    links = [*spec.sources.find_links, *env.get("PIP_FIND_LINKS", "").split()]
    if any(link.startswith(("http://", "https://")) for link in links):
        return None  # a remote find-links page may serve it: pip will say
    requirement = spec.torch_requirement
    if _local_wheel(requirement, links, recipe.variant.arch):
        return None
    why = _unreachable(recipe.index_url.rstrip("/") + "/torch/")
    if why is None:
        return None
    return (
        f"{requirement} comes from PyTorch's index {recipe.index_url}, which this machine cannot "
        f"reach ({why}), and no --find-links folder holds it: build it where that index is "
        "reachable, or pass --find-links DIR with the wheel"
    )


def torch_problem(
    recipe: VariantRecipe, spec: EnvSpec | None, cache_dir: Path | None
) -> str | None:
    """Why this machine cannot get the variant's torch: None when nothing is installed
    (``spec`` None: ``--python``), its environment is cached in ``cache_dir``, or its torch's
    source is within reach (:func:`torch_source_problem`)."""
    if spec is None or (cache_dir is not None and env_ready(spec, cache_dir)):
        return None
    return torch_source_problem(recipe, spec)


def target_problem(req: BuildRequest, cache_dir: Path) -> str | None:
    """Why this machine cannot get a cross build's target torch: None for a native build, a
    target sysroot already unpacked in ``cache_dir``, or a torch within reach."""
    cross = req.compile.cross
    if cross is None or cross.variant.arch is None or cross.target_cached(cache_dir):
        return None
    why = torch_source_problem(req.recipe, cross.target_env)
    return None if why is None else f"its {cross.variant.arch.value} target's {why}"


def require_buildable(
    requests: Sequence[BuildRequest], planned: Planned, runner: Runner = RUNNER
) -> None:
    """One :class:`ToolchainError` naming every variant of the compiled ``requests`` this
    machine cannot build, with why; where a torch is out of reach, with the variants of
    ``planned`` it can build."""
    options = planned.options
    problems = [
        (req.recipe.name, why, kind)
        for req in requests
        for kind, why in (
            ("toolkit", toolkit_problem(req.recipe, options.cuda_home, runner)),
            ("torch", torch_problem(req.recipe, req.env.spec, options.cache_dir)),
            ("torch", target_problem(req, options.cache_dir)),
        )
        if why is not None
    ]
    if not problems:
        return
    instead = ""
    if any(kind == "torch" for _, _, kind in problems):
        instead = _buildable_instead(planned, {name for name, _, _ in problems}, runner)
    if len(problems) == 1:
        ((name, why, _),) = problems
        raise ToolchainError(
            f"{name}: cannot be built on this machine: {why}",
            hint=instead + "`kernelwheel matrix --json` gives its build image",
        )
    hint = instead + (
        "`kernelwheel matrix --json` gives each variant's build image; leave these out of the "
        "selection (--skip NAME with --build, globs allowed; or a narrower --variant)"
    )
    lines = "\n".join(f"  {name}: {why}" for name, why, _ in problems)
    count = len({name for name, _, _ in problems})
    raise ToolchainError(
        f"{count} selected variant(s) cannot be built on this machine:\n{lines}", hint=hint
    )


def _buildable_instead(planned: Planned, refused: set[str], runner: Runner) -> str:
    """The hint's sentence naming variants of ``planned`` this machine can build instead of the
    ``refused``: the active virtual environment's torch's, those whose environment is cached,
    those whose torch is within reach; empty when there is none."""
    options = planned.options
    named: list[str] = []
    venv = venv_variant(planned.full, options, runner=runner)
    if venv is not None and venv[0].name not in refused:
        recipe, python, how = venv
        named.append(
            f"--variant {recipe.name} --python {python} ({how}; it needs setuptools and ninja)"
        )
        refused = refused | {recipe.name}

    if options.python is None:  # with --python no torch is fetched: none is refused for it
        others = _others_within_reach(planned, partial(_problem, options, runner), refused)
        named += [f"--variant {name} ({how})" for name, how in others]
    return (
        f"a variant this machine can build instead: {'; '.join(named)}; otherwise " if named else ""
    )


def select_buildable(
    planned: Planned,
    variants: Sequence[str] = (),
    *,
    machine: Machine | None = None,
    runner: Runner = RUNNER,
) -> Selection:
    """:func:`~kernelwheel.plan.planning.select`, with the default variant (nothing selected)
    settled on the newest of its candidates this machine can build: its toolkit here, its
    environment cached or its torch within reach (``plan.defaults.within_reach`` decides, and
    refuses with the fixes that work when none is). The first candidate that passes ends the
    search, so a default within reach costs what the build's own preflight does."""
    selection = select(planned, variants, machine, runner)
    default = selection.default
    if default is None or planned.project.framework is Framework.TVM_FFI:
        return selection  # a selection, or a tvm-ffi default (its environment holds no torch)
    problem = partial(_problem, planned.options, runner)
    default = prefer_available(default, partial(_already_here, planned.options, runner))
    cannot_get: dict[str, str] = {}
    others: list[tuple[str, str]] = []
    for recipe in (default.recipe, *default.fallbacks):
        why = problem(recipe)
        if why is None:
            break
        cannot_get[recipe.name] = why
    else:  # none of them: which other variants of the plan this machine can get, by name
        others = _others_within_reach(planned, problem, set(cannot_get))
    settled = within_reach(default, cannot_get, others)
    return Selection((settled.recipe,), settled)


def _problem(options: Options, runner: Runner, recipe: VariantRecipe) -> str | None:
    """Why this machine cannot build ``recipe``'s variant (its toolkit, its torch); None: it can."""
    spec = None
    if options.python is None and recipe.torch_requirement is not None:
        spec = env_spec_for(recipe, options.pip_sources)
    return toolkit_problem(recipe, options.cuda_home, runner) or torch_problem(
        recipe, spec, options.cache_dir
    )


def _already_here(options: Options, runner: Runner, recipe: VariantRecipe) -> bool:
    """Whether ``recipe``'s torch is on this machine (its environment cached, or its wheel in a
    local --find-links folder) and its toolkit too: nothing to fetch."""
    if recipe.torch_requirement is None:
        return False
    spec = env_spec_for(recipe, options.pip_sources)
    links = [*spec.sources.find_links, *os.environ.get("PIP_FIND_LINKS", "").split()]
    here = env_ready(spec, options.cache_dir) or _local_wheel(
        spec.torch_requirement, links, recipe.variant.arch
    )
    return here and toolkit_problem(recipe, options.cuda_home, runner) is None


def _others_within_reach(
    planned: Planned,
    problem: Callable[[VariantRecipe], str | None],
    refused: set[str],
    wanted: int = 3,
) -> list[tuple[str, str]]:
    """Up to ``wanted`` of the plan's other variants this machine can build (newest torch
    first), each with how: its environment cached, or its torch within reach."""
    host = Arch.host()
    here = [
        r
        for r in planned.full.selected
        if r.name not in refused
        and r.variant.arch is host
        and r.variant.os is OS.LINUX
        and r.variant.backend is not None
        and r.variant.backend.kind in BUILT_HERE
    ]
    here.sort(key=lambda r: Version(r.torch_version or "0"), reverse=True)
    options = planned.options
    cached: list[tuple[str, str]] = []
    reachable: list[tuple[str, str]] = []
    for recipe in here:
        if len(cached) == wanted or recipe.torch_requirement is None:
            break
        if problem(recipe) is not None:
            continue
        spec = env_spec_for(recipe, options.pip_sources)
        kind = "" if recipe.cuda is None else ", a CUDA build"
        if env_ready(spec, options.cache_dir):
            cached.append((recipe.name, f"its environment is cached{kind}"))
        elif not (spec.sources.indexes or spec.sources.no_index):
            # PyPI is not asked here: pip will say if it cannot be reached
            reachable.append((recipe.name, f"its torch from PyPI{kind}"))
        else:
            reachable.append((recipe.name, f"its torch within reach{kind}"))
    return [*cached, *reachable][:wanted]
