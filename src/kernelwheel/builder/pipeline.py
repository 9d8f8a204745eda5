"""Build one variant of a kernel project: environment, codegen, compile, wheel.

Each stage is a step reported with its duration; the compile output goes to a per-variant log
under the output folder, named in any error.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from packaging.tags import Tag

from .._util import Runner, output_dir
from ..abi.symver import ForcedHeader
from ..compat.guard import BuildStamp
from ..errors import ProjectError, ToolchainError
from ..log import Reporter, step
from ..model.variant import Arch, BackendKind, CxxAbi, Variant
from ..wheels import WheelSpec, write_wheel
from . import codegen, cross, unit_costs
from .compile_plan import plan_compile
from .compile_spec import CompileSpec, output_identity
from .deps import provide_headers
from .envs import (
    CudaToolkit,
    EnvInfo,
    find_cuda_toolkit,
    probe,
    provision,
)
from .memory import load_estimates
from .request import BuildKind, BuildRequest, BuiltWheel
from .steps import (
    PROJECT_LINK,
    cache_summary,
    check_cxx_toolchain,
    compile_env,
    finish_wheel,
    full_version,
    load_checked,
    package_files,
    probe_toolchain,
    remedies_setting,
    remedy_header,
    run_worker,
    unchanged_compile,
    warnings_of,
    write_remedies,
)
from .wheelmeta import project_metadata, requirements, torch_requirement

DATA_LINK = "kernelwheel-data"


def _check_env_matches(env: EnvInfo, variant: Variant) -> None:
    assert variant.torch is not None
    running = env.torch_minor
    want = (variant.torch.major, variant.torch.minor)
    if variant.stable_abi and running < want:
        raise ToolchainError(
            f"variant {variant.name} targets the stable ABI of torch {variant.torch}, but "
            f"{env.python} has the older torch {env.torch}: a stable-ABI build needs a torch at "
            "least as new as its ABI version",
            hint=f"build with torch {variant.torch} or newer (omit --python to let kernelwheel "
            "create the environment)",
        )
    if not variant.stable_abi and running != want:
        raise ToolchainError(
            f"variant {variant.name} needs torch {variant.torch}, but {env.python} has torch "
            f"{env.torch}",
            hint="omit --python to let kernelwheel create the environment, or pick the variant "
            f"for torch {running[0]}.{running[1]}",
        )
    if variant.cxxabi is not None and env.cxx11_abi != (variant.cxxabi is CxxAbi.CXX11):
        have = "cxx11" if env.cxx11_abi else "cxx98"
        raise ToolchainError(
            f"variant {variant.name} needs the {variant.cxxabi.value} C++ ABI, but torch "
            f"{env.torch} in {env.python} uses {have}",
            hint=f"pick the {have} variant for this torch",
        )
    backend = variant.backend
    if backend is not None and backend.kind is BackendKind.CUDA:
        if env.cuda is None:
            raise ToolchainError(
                f"variant {variant.name} is a CUDA variant, but torch {env.torch} is CPU-only",
                hint="use a CUDA build of torch, or build the cpu variant",
            )
        if env.cuda != backend.cuda_version:
            raise ToolchainError(
                f"variant {variant.name} needs torch built for CUDA {backend.cuda_version}, but "
                f"torch {env.torch} uses CUDA {env.cuda}",
                hint=f"pick the cu{env.cuda.replace('.', '')} variant for this torch",
            )


def _note(log: Path, notes: tuple[str, ...]) -> None:
    if notes:
        with open(log, "a") as fh:
            fh.writelines(f"note: {note}\n" for note in notes)


def compile_extension(
    req: BuildRequest,
    env: EnvInfo,
    namespace: str,
    log: Path,
    toolkit: CudaToolkit | None,
    cross_build: cross.CrossBuild | None,
    header: ForcedHeader | None,
    runner: Runner,
    *,
    incremental: bool = False,
) -> dict[str, object]:
    """The compile step; ``incremental`` (``dev``) keeps the work folder's objects, and ninja
    recompiles only what changed."""
    variant = req.variant
    stage = req.work_dir / variant.name
    if stage.exists() and not incremental:
        shutil.rmtree(stage)
    codegen.write_registration_header(stage / "include")
    # The remedies keep the .so within the policy when built with a newer gcc/glibc.
    remedies = write_remedies(header, stage / "include")
    # The project and kernelwheel's data folder (the compat source) through links in the work
    # folder: the compilers (and the compiler cache's keys) then name them by the same relative
    # path on every machine (builder.compiler_cache).
    views = ((req.project.root, PROJECT_LINK), (remedies.data_dir, DATA_LINK))
    for folder, link in views:
        if (stage / link).is_symlink():  # an incremental build's, from its last run
            (stage / link).unlink()
        (stage / link).symlink_to(folder.resolve(), target_is_directory=True)
    headers = tuple(provide_headers(req.headers, req.cache_dir, env.python, log, runner))
    tools = probe_toolchain(toolkit, req, runner)
    costs = unit_costs.store_path(req.cache_dir, req.project.root)
    recorded = unit_costs.read_costs(costs)
    peaks = unit_costs.read_costs(unit_costs.peaks_path(req.cache_dir, req.project.root))
    plan = plan_compile(req, namespace, stage, tools, remedies, headers, recorded, peaks)
    if plan.keep_dir is not None:
        plan.keep_dir.mkdir(parents=True, exist_ok=True)
    _note(log, (*plan.notes, *plan.log_lines))
    spec = plan.spec.through_views(tuple((str(f), str(stage / link)) for f, link in views))
    spec = replace(spec, incremental=incremental)
    if cross_build is not None:  # kernelwheel.builder.cross: target include/lib dirs, nvcc -ccbin
        spec = cross_build.extend_spec(spec)
    # A dev build whose spec is its last run's: ninja and the link alone, without the worker's
    # torch and setuptools start (seconds of every edit)
    direct = _direct_commands(stage, spec) if incremental else None
    spec.write(stage / "compile.json")
    stats_log = stage / "ccache-stats.log"
    env_vars, cached = compile_env(req, toolkit, stats_log, runner)
    if cross_build is not None:  # kernelwheel.builder.cross: CC/CXX/LDSHARED = the cross compiler
        cross_build.extend_env(env_vars, req.cache_dir)
    reuse, key, stored = unchanged_compile(req, stage, spec, env, env_vars)
    if stored is not None:
        stored["cache"] = "unchanged: compile skipped"
        stored["notes"] = list(plan.notes)
        return stored
    result = run_worker(req, env.python, stage, env_vars, plan.keep_dir, runner, direct=direct)
    _record_unit_seconds(costs, spec, plan.spec, req)
    result["capabilities"] = list(spec.capabilities)
    if reuse is not None and direct is None:  # a direct run's inputs are not read again
        reuse.store(key, result, spec.sources, spec.include_dirs)
    result.pop("inputs", None)
    result.setdefault("cache", cache_summary(req, stats_log, cached))
    result["notes"] = list(plan.notes)
    return result


def _record_unit_seconds(
    costs: Path, spec: CompileSpec, planned: CompileSpec, req: BuildRequest
) -> None:
    """This compile's seconds per unit, from ninja's log, and peak MiB (builder/memory), kept
    by project-relative path for the next build's schedule and jobs (``spec``: the worker's,
    its paths through the work folder's links; ``planned``: the same sources by their own
    paths)."""
    root, temp = req.project.root, Path(spec.build_temp)
    own = {os.path.abspath(s): p for s, p in zip(spec.sources, planned.sources, strict=False)}
    peaks = unit_costs.peaks_path(req.cache_dir, root)
    floor = load_estimates().min_measured
    for store, took, decay in (
        (costs, unit_costs.unit_seconds(temp), unit_costs.DECAY),
        (peaks, unit_costs.unit_peaks(temp, floor), 1.0),
    ):
        found: dict[str, float] = {}
        for source, value in took.items():
            original = Path(own.get(os.path.abspath(source), source))
            if original.is_relative_to(root):
                found[original.relative_to(root).as_posix()] = value
        unit_costs.record_costs(store, found, decay=decay)


def _direct_commands(stage: Path, spec: CompileSpec) -> tuple[list[str], list[str]] | None:
    """ninja on the work folder's build.ninja, then the link the worker recorded: the compile
    of a dev build whose spec has not changed since its last run (whose build.ninja would be
    the same), else None."""
    try:
        last_spec = output_identity((stage / "compile.json").read_text())
        same = last_spec == output_identity(spec.to_json())
        last = json.loads((stage / "result.json").read_text())
    except (OSError, ValueError):
        return None
    ninja, link = last.get("ninja"), last.get("link")
    if not (same and ninja and link and Path(str(last.get("shared_object"))).is_file()):
        return None
    return [str(ninja), "-v", "-C", spec.build_temp, "-j", str(spec.jobs)], [str(a) for a in link]


def _python_tag(limited_api: str) -> tuple[str, str]:
    """(interpreter tag, Requires-Python) for the Py_LIMITED_API value the build really used."""
    value = int(limited_api, 16)
    major, minor = value >> 24, (value >> 16) & 0xFF
    return f"cp{major}{minor}", f">={major}.{minor}"


class Prepared(NamedTuple):
    """A torch variant's build environment: its interpreter's facts, the cross build (another
    arch only), the CUDA toolkit (CUDA variants only) and the ABI remedies' header."""

    env: EnvInfo
    cross_build: cross.CrossBuild | None
    toolkit: CudaToolkit | None
    header: ForcedHeader | None


def prepare_environment(req: BuildRequest, reporter: Reporter, runner: Runner) -> Prepared:
    """The environment step of a torch variant (``build`` and ``dev`` alike)."""
    variant, scope, log = req.variant, req.variant.name, req.log
    with step(reporter, scope, "environment", log=log) as detail:
        # kernelwheel.builder.cross: a variant for another arch builds in a host-arch environment
        # (the request's env_spec) against the target arch's torch (and CUDA) wheels, with the
        # cross compiler; request_for planned it.
        cross_plan = req.cross
        if req.python is not None:
            env = probe(req.python, req.cache_dir, runner)
        else:
            if req.env_spec is None:
                raise ToolchainError(f"no environment recipe for {variant.name}")
            env = provision(req.env_spec, req.cache_dir, log=log, runner=runner)
            for note in env.notes:
                reporter.info(scope, note)
        _check_env_matches(env, variant)
        cross_build = cross_plan.prepare(env, req.cache_dir, log, runner) if cross_plan else None
        toolkit = None
        if variant.backend is not None and variant.backend.kind is BackendKind.CUDA:
            toolkit = find_cuda_toolkit(
                env, req.cuda_home, req.cuda_system_paths, req.cache_dir / "toolkits", runner
            )
        detail.append(f"torch {env.torch}" + (" (cached)" if env.reused else ""))
        if toolkit:
            detail.append(f"CUDA {toolkit.version} at {toolkit.home}")
        if cross_build is not None:
            detail.append(cross_build.describe())
        header = remedy_header(req, runner)  # from the request's compiler: a cross build's

    return Prepared(env, cross_build, toolkit, header)


def build_variant(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
    """Build the torch extension wheel of ``req``'s variant (per torch or on the stable ABI),
    every command through ``runner``."""
    project, variant = req.project, req.variant
    scope = variant.name
    if req.kind is not BuildKind.TORCH:
        raise ProjectError(
            f"{project.name} is a {req.kind.value} project, not a torch extension",
            file=project.build_toml,
            hint="build it through kernelwheel.builder.entry.build_and_export",
        )
    if not req.best_effort and (variant.arch is None or variant.arch is Arch.host()):
        check_cxx_toolchain(req.cxx, os.environ, runner)  # a cross build brings its own
    output_dir(req.out_dir, "--output-dir")  # a clear error for a file or unwritable folder
    log = req.log
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(req.log_header())

    env, cross_build, toolkit, header = prepare_environment(req, reporter, runner)

    with step(reporter, scope, "codegen") as detail:
        bid = codegen.build_id(project, variant, settings=_settings(req, header))
        namespace = codegen.ops_namespace(project.package, bid)
        detail.append(namespace)

    with step(reporter, scope, "compile", log=log) as detail:
        result = compile_extension(req, env, namespace, log, toolkit, cross_build, header, runner)
        detail.append(str(result["cache"]))
    for note in _notes(result):
        reporter.info(scope, note)
    so_path = Path(str(result["shared_object"]))
    load_checked(req, env.python, so_path, namespace, "torch", reporter, runner)

    torch_req = torch_requirement(variant, [so_path])  # stable ABI: max(declared, measured)
    for warning in torch_req.warnings:
        reporter.info(scope, f"warning: {warning}")
    with step(reporter, scope, "wheel") as detail:
        version = full_version(req.version, variant, req.local_version_style)
        interpreter, requires_python = _python_tag(str(result["py_limited_api"]))
        tag = Tag(interpreter, "abi3", variant.platform_tag(manylinux=None))
        stamp = BuildStamp(
            dist_name=project.name,
            version=version,
            variant=variant,
            cuda_major=toolkit.major if toolkit else None,
        )
        files = package_files(project)
        files[f"{project.package}/_ops.py"] = codegen.ops_py(namespace, stamp).encode()
        files[f"{project.package}/{namespace}.abi3.so"] = so_path
        spec = WheelSpec(
            name=project.name,
            version=version,
            tag=tag,
            files=files,
            requires_dist=(torch_req.requirement, *requirements(project, variant)),
            requires_python=requires_python,
            summary=f"{project.name} PyTorch kernel ({variant.name}), built by kernelwheel",
            executables=frozenset({f"{project.package}/{namespace}.abi3.so"}),
        )
        # Licence, its files, project URLs, the kernel card: builder.wheelmeta.
        spec = project_metadata(
            project, version=version, variant=variant.name, dirty=bool(req.git and req.git.dirty)
        ).apply(spec)
        # A raw wheel that auditwheel re-zips is stored, not deflated; it is the output only
        # without repair, or with best effort (kept as is when the repair fails).
        raw = write_wheel(
            spec,
            req.work_dir / variant.name / "dist",
            compress=req.manylinux is None or req.best_effort,
        )
        detail.append(raw.name)
    return finish_wheel(
        req, raw, reporter, bid, namespace, env, _caps(result), runner, warnings_of(result)
    )


def _settings(req: BuildRequest, header: ForcedHeader | None) -> tuple[str, ...]:
    """Build settings that change what is compiled, beyond the files and the variant: with
    ``with-cpu-kernels``, the remedies' header digest (or their absence)."""
    cpu = ("with-cpu-kernels",) if req.with_cpu_kernels else ()
    return (*cpu, remedies_setting(header))


def _notes(result: dict[str, object]) -> tuple[str, ...]:
    notes = result.get("notes")
    return tuple(str(n) for n in notes) if isinstance(notes, list) else ()


def _caps(result: dict[str, object]) -> tuple[str, ...]:
    caps = result.get("capabilities")
    return tuple(str(c) for c in caps) if isinstance(caps, list) else ()
