"""Build one tvm-ffi variant: a ``[tvm-ffi]`` kernel compiled against apache-tvm-ffi, no torch
(docs/noarch-and-tvm-ffi.md); ``tvm_ffi.load_module`` dlopens the shared object. A CUDA build
links the shared CUDA runtime by rpath: static linking pulls in glibc 2.34 symbols."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from .._util import NO_CWD_ON_PATH, RUNNER, CommandTimeout, Runner, atomic_write, locked
from ..abi.symver import ForcedHeader
from ..compile.compile_spec import CommandSpec
from ..errors import ToolchainError
from ..log import Reporter, step
from ..model.project import KernelProject
from ..model.recipes import TVM_FFI_PACKAGE, VariantRecipe, tvm_ffi_requirement
from ..model.sources import PipSources
from ..model.variant import Arch, BackendKind, TvmFfiVersion
from ..toolchain.envs import (
    READY_MARKER,
    CudaToolkit,
    PipStep,
    locate_cuda_toolkit,
    made_here,
    make_env,
    toolchain_step,
)
from ..wheels import WheelSpec
from . import codegen, steps
from .compile_plan import CompilePlan, TvmFfiLibrary, plan_tvm_ffi_compile
from .request import BuildRequest, BuiltWheel
from .wheelmeta import requirements

# Besides the pinned apache-tvm-ffi (installed --no-deps): its one dependency.
TOOLS = ("typing-extensions>=4.5,<5",)
REQUIRES_PYTHON = ">=3.9"  # apache-tvm-ffi 0.1's oldest Python
# The current folder off sys.path first: a tvm_ffi/ there would be probed instead. The package
# imports torch (seconds, paid by every dev run); its libinfo and _version files need only the
# stdlib, so they are run alone, and the package imported only where they are not found.
_PROBE = (
    NO_CWD_ON_PATH
    + """
import importlib.util, json, os, sys, sysconfig
def _alone(name):
    folder = importlib.util.find_spec("tvm_ffi").submodule_search_locations[0]
    spec = importlib.util.spec_from_file_location(
        "_kw_tvm_ffi_" + name, os.path.join(folder, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
try:
    libinfo, version = _alone("libinfo"), _alone("_version").__version__
except Exception:
    import tvm_ffi
    from tvm_ffi import libinfo
    version = tvm_ffi.__version__
print(json.dumps({
    "python": sys.executable,
    "purelib": sysconfig.get_paths()["purelib"],
    "version": version,
    "include_dirs": libinfo.include_paths(),
    "lib_dir": os.path.dirname(libinfo.find_libtvm_ffi()),
}))
"""
)


@dataclass(frozen=True)
class TvmFfiEnv:
    """A probed interpreter holding apache-tvm-ffi: what compiling against it needs."""

    python: Path
    purelib: Path
    version: str
    include_dirs: tuple[Path, ...]
    lib_dir: Path
    reused: bool = False
    notes: tuple[str, ...] = ()  # a dead run's work found and cleared

    @classmethod
    def from_json(cls, text: str, *, reused: bool = False) -> TvmFfiEnv:
        data = json.loads(text)
        return cls(
            python=Path(data["python"]),
            purelib=Path(data["purelib"]),
            version=str(data["version"]),
            include_dirs=tuple(Path(p) for p in data["include_dirs"]),
            lib_dir=Path(data["lib_dir"]),
            reused=reused,
        )

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if k not in ("reused", "notes")}
        return json.dumps(data, default=str, indent=2, sort_keys=True) + "\n"


def probe_tvm_ffi(python: Path, runner: Runner = RUNNER) -> TvmFfiEnv:
    """Ask ``python`` where its apache-tvm-ffi keeps headers and ``libtvm_ffi.so``."""
    try:
        proc = runner.captured([python, "-c", _PROBE], timeout=120)
    except CommandTimeout:
        raise ToolchainError(
            f"{python} gave no answer within 120 s", hint="pass a working python"
        ) from None
    except OSError as exc:
        raise ToolchainError(
            f"cannot run {python}: {exc}", hint="pass an existing python"
        ) from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolchainError(
            f"{python} cannot import tvm_ffi: {last}",
            hint=f"install {TVM_FFI_PACKAGE} into that interpreter, or omit --python so "
            "kernelwheel creates the build environment",
        )
    return TvmFfiEnv.from_json(proc.stdout.strip().splitlines()[-1])


def provision_tvm_ffi(
    recipe: VariantRecipe, sources: PipSources, cache_dir: Path, log: Path, runner: Runner
) -> TvmFfiEnv:
    """The venv of ``recipe`` (made or reused): apache-tvm-ffi by hash, a CUDA toolchain."""
    assert recipe.tvm_ffi is not None
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    key = {"python": python, "recipe": recipe.environment_spec(), "tools": TOOLS}
    blob = json.dumps({**key, "sources": asdict(sources)}, sort_keys=True)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    root = cache_dir / "envs" / f"tvmffi-py{python}-{digest}"
    with locked(root.parent / f"{root.name}.lock") as dead:
        notes = (f"build environment {root}: {dead.describe()}",) if dead is not None else ()
        marker = root / READY_MARKER
        if marker.exists() and (ready := _ready(marker, runner)) is not None:
            return ready
        pip_steps = [
            PipStep(TOOLS, "install the build tools"),
            PipStep(
                what=f"install {TVM_FFI_PACKAGE} {recipe.tvm_ffi.version}",
                hint="the recipe's hashes do not match what the index serves: check "
                "recipes/tvm-ffi.toml (offline builds: --find-links DIR holding the wheel)",
                requirements=(recipe.tvm_ffi.requirement_line,),
                file="tvm-ffi-requirements.txt",
            ),
        ]
        if recipe.cuda is not None and recipe.cuda.source == "pypi":
            pip_steps.append(toolchain_step(recipe.cuda.requirements()))
        py = make_env(root, Path(sys.executable), sources, pip_steps, log, runner)
        env = probe_tvm_ffi(py, runner)
        atomic_write(marker, env.to_json())  # written last: the environment is complete
        return dataclasses.replace(env, notes=notes)


def wheel_requirements(
    project: KernelProject, recipe: VariantRecipe, built_with: str
) -> tuple[str, ...]:
    """Requires-Dist (no torch): apache-tvm-ffi's series from ``built_with``, then the rest."""
    assert recipe.tvm_ffi is not None and recipe.variant.backend is not None
    own = canonicalize_name(TVM_FFI_PACKAGE)
    requires = [tvm_ffi_requirement(built_with)]
    requires += recipe.tvm_ffi.requires_for(recipe.variant.backend)
    for dep in requirements(project, recipe.variant):
        req = Requirement(dep)
        if canonicalize_name(req.name) == own and not req.specifier and req.marker is None:
            continue
        requires.append(dep)
    return tuple(dict.fromkeys(requires))


def build_tvm_ffi_variant(
    req: BuildRequest, reporter: Reporter, runner: Runner = RUNNER
) -> BuiltWheel:
    project, variant, recipe = req.project, req.variant, req.recipe
    assert variant.tvm_ffi is not None and variant.backend is not None
    scope, log = variant.name, req.log
    if variant.arch is not Arch.host():
        raise ToolchainError(
            f"{variant.name} is for another arch; tvm-ffi variants build on their own arch only",
            hint="build it on a machine of that arch",
        )
    steps.open_build(req, runner)
    env, toolkit, header = prepare_tvm_ffi(req, reporter, runner)

    with step(reporter, scope, "codegen") as detail:
        bid = codegen.build_id(project, variant, settings=(steps.remedies_setting(header),))
        namespace = codegen.ops_namespace(project.package, bid)
        detail.append(namespace)

    with step(reporter, scope, "compile", log=log) as detail:
        # The inputs of an unchanged variant are the units' depfiles' list (builder.reuse).
        facts = (env.python, env.version, *env.include_dirs, env.lib_dir)
        plan = partial(library_plan, req, namespace, env, toolkit)
        compiled = steps.compile_step(req, env.python, facts, toolkit, header, plan, runner)
        detail.append(f"{compiled.shared_object.name}; {compiled.cache}")
    steps.load_checked(req, env.python, compiled.shared_object, namespace, reporter, runner)
    for note in steps.package_notes(project):
        reporter.info(scope, note)

    with step(reporter, scope, "wheel") as detail:
        files = steps.package_files(project)
        files[f"{project.package}/_ops.py"] = codegen.tvm_ffi_ops_py(namespace).encode()
        so_name = f"{project.package}/{namespace}.so"
        files[so_name] = compiled.shared_object
        raw = steps.raw_wheel(
            req,
            WheelSpec(
                name=project.name,
                version=steps.full_version(req.version, variant, req.outputs.local_version_style),
                tag=Tag("py3", "none", variant.platform_tag(manylinux=None)),
                files=files,
                requires_dist=wheel_requirements(project, recipe, env.version),
                requires_python=REQUIRES_PYTHON,
                summary=f"{project.name} tvm-ffi kernel ({variant.name}), built by kernelwheel",
                executables=frozenset({so_name}),
            ),
        )
        detail.append(raw.name)
    return steps.finish_wheel(req, raw, reporter, namespace, compiled, runner)


def prepare_tvm_ffi(
    req: BuildRequest, reporter: Reporter, runner: Runner
) -> tuple[TvmFfiEnv, CudaToolkit | None, ForcedHeader | None]:
    """The environment step of a tvm-ffi variant (``build`` and ``dev`` alike): the interpreter
    holding apache-tvm-ffi, a CUDA variant's toolkit, the remedies' header."""
    variant, scope, log = req.variant, req.variant.name, req.log
    assert variant.tvm_ffi is not None and variant.backend is not None
    with step(reporter, scope, "environment", log=log) as detail:
        if req.env.python is not None:
            env = probe_tvm_ffi(req.env.python, runner)
        else:
            env = provision_tvm_ffi(req.recipe, req.env.sources, req.outputs.cache_dir, log, runner)
            for note in env.notes:
                reporter.info(scope, note)
        toolkit = None
        if variant.backend.kind is BackendKind.CUDA:
            cuda = variant.backend.cuda_version
            toolkit = locate_cuda_toolkit(
                cuda,
                env.purelib,
                req.cuda.home,
                req.cuda.system_paths,
                needed_by=variant.name,
                hint=f"install CUDA {cuda} (or pass --cuda-home DIR)",
                store=req.outputs.cache_dir / "toolkits",  # the torch builds' toolkit store
                runner=runner,
            )
        detail.append(f"{TVM_FFI_PACKAGE} {env.version}" + (" (cached)" if env.reused else ""))
        _check_series(env, variant.tvm_ffi)
        if toolkit:
            detail.append(f"CUDA {toolkit.version} at {toolkit.home}")
        header = steps.remedy_header(req, runner)
    return env, toolkit, header


def library_plan(
    req: BuildRequest,
    namespace: str,
    env: TvmFfiEnv,
    toolkit: CudaToolkit | None,
    given: steps.PlanInputs,
) -> CompilePlan[CommandSpec]:
    rpaths = _runtime_rpaths(env, toolkit, req.outputs.cache_dir / "toolkits")
    library = TvmFfiLibrary(env.include_dirs, env.lib_dir, rpaths)
    # the project named through its link in the work folder, as a torch build names it
    linked = steps.link_folder(given.stage, req.project.root, steps.PROJECT_LINK)
    return plan_tvm_ffi_compile(req, namespace, library, *given, root=linked)


def _ready(marker: Path, runner: Runner) -> TvmFfiEnv | None:
    """The ready environment's probe; probed again where the cache was moved; else None."""
    root = marker.parent
    try:
        env = TvmFfiEnv.from_json(marker.read_text(), reused=True)
    except (OSError, ValueError, KeyError):
        return None
    if made_here(env.python, root):
        return env
    if not (root / "bin" / "python").exists():
        return None
    env = dataclasses.replace(probe_tvm_ffi(root / "bin" / "python", runner), reused=True)
    atomic_write(marker, env.to_json())
    return env


def _check_series(env: TvmFfiEnv, series: TvmFfiVersion) -> None:
    release = Version(env.version).release
    if tuple(release[:2]) != (series.major, series.minor):
        raise ToolchainError(
            f"{env.python} has {TVM_FFI_PACKAGE} {env.version}, but the variant is built "
            f"against the {series} series",
            hint=f"use an interpreter with {TVM_FFI_PACKAGE} {series}.x, or omit --python",
        )


def _runtime_rpaths(env: TvmFfiEnv, toolkit: CudaToolkit | None, store: Path) -> tuple[str, ...]:
    """The CUDA runtime package's folder (``nvidia/cu13/lib``) relative to the installed
    package, for a toolkit from the environment's packages or the store; none for a system one."""
    if toolkit is None:
        return ()
    purelib = env.purelib.resolve()
    home = toolkit.home.resolve()
    if not (home.is_relative_to(purelib) or home.is_relative_to(store.resolve())):
        return ()
    runtime = purelib / "nvidia" / f"cu{toolkit.major}" / "lib"
    return (os.path.relpath(runtime, purelib / "pkg"),) if runtime.is_dir() else ()
