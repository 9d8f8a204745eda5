"""Build one variant of a kernel project: environment, codegen, compile, wheel.

Each stage is a step reported with its duration; the compile output goes to a per-variant log
under the output folder, named in any error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from packaging.tags import Tag

from .._util import atomic_copy, output_dir, run_logged
from ..abi import check_wheel
from ..abi.remedies import remedy_flags
from ..abi.repair import RepairResult, repair_wheel
from ..compat.guard import BuildStamp
from ..errors import AbiError, BuildError, ProjectError, ToolchainError
from ..log import Reporter, step
from ..model.project import Framework, KernelProject
from ..model.variant import Arch, BackendKind, CxxAbi, LocalVersionStyle, Variant
from ..plan.options import available_memory_mib, resolve_jobs
from ..wheels import WheelSpec, write_wheel
from . import codegen, cross
from .compile_plan import Toolchain, plan_compile
from .compile_rules import NO_GNU_UNIQUE
from .compiler_cache import ccache_env, read_stats
from .deps import provide_headers
from .envs import (
    CudaToolkit,
    EnvInfo,
    find_cuda_toolkit,
    locked,
    probe,
    provision,
    supported_capabilities,
)
from .request import BuildRequest, BuiltWheel
from .reuse import Reuse, build_key, repair_key
from .wheelmeta import project_metadata, requirements

_WORKER = Path(__file__).with_name("_compile_worker.py")


def full_version(
    base: str, variant: Variant, style: LocalVersionStyle = LocalVersionStyle.DOTTED
) -> str:
    return f"{base}+{variant.local_version_in(style)}"


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


def _links_shared_libstdcxx(cxx: str) -> bool:
    """Whether ``cxx`` has a shared libstdc++ to link (``-print-file-name`` echoes the bare name
    when it has none, as on toolchains that only ship the static archive)."""
    try:
        out = subprocess.run(
            [*cxx.split(), "-print-file-name=libstdc++.so"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        ).stdout.strip()
    except OSError:
        return True  # no such compiler: the compile step reports it
    return os.path.isabs(out)


def check_cxx_toolchain(environ: Mapping[str, str]) -> None:
    """Refuse, before anything is compiled, a C++ compiler that links libstdc++ statically (it
    ships only libstdc++.a, as self-built toolchains in /opt often do): that libstdc++ was built
    against the toolchain's newer glibc, so the extension would import GLIBC_2.34+ symbols no
    manylinux_2_28 wheel may need, and the build would only fail at repair. The error names the
    compiler and, where one is on PATH, a system compiler that links libstdc++ as a library."""
    cxx = environ.get("CXX") or "c++"
    if _links_shared_libstdcxx(cxx):
        return
    first = cxx.split()[0] if cxx.split() else cxx
    where = shutil.which(first, path=environ.get("PATH")) or first
    alternatives = [
        (found, cc)
        for name, cc_name in (("g++", "gcc"), ("c++", "cc"))
        if (found := shutil.which(name, path=environ.get("PATH"))) is not None
        and os.path.realpath(found) != os.path.realpath(where)
        and _links_shared_libstdcxx(found)
        and (cc := shutil.which(cc_name, path=environ.get("PATH"))) is not None
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


def package_files(project: KernelProject) -> dict[str, bytes]:
    """The Python package files from torch-ext/<package>/ (tvm-ffi-ext/ for tvm-ffi projects),
    recursively: ``.py`` and the framework section's ``pyext`` suffixes."""
    files: dict[str, bytes] = {}
    suffixes = {"." + s.lstrip(".") for s in ("py", *project.pyext)}
    for path in sorted(project.package_dir.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if path.suffix not in suffixes:
            continue
        if path.is_symlink() and not path.resolve().is_relative_to(project.root.resolve()):
            raise ProjectError(
                f"{path} is a symlink pointing outside the project",
                file=path,
                hint="copy the file into the project instead",
            )
        rel = path.relative_to(project.package_dir).as_posix()
        files[f"{project.package}/{rel}"] = path.read_bytes()
    return files


def _accepts_flag(cxx: str, flag: str) -> bool:
    """Whether the C++ compiler ``cxx`` takes ``flag`` (as CMake's check_cxx_compiler_flag)."""
    try:
        proc = subprocess.run(
            [*cxx.split(), flag, "-x", "c++", "-fsyntax-only", os.devnull],
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def _toolchain(toolkit: CudaToolkit | None, variants_at_once: int = 1) -> Toolchain:
    """What the compile plan needs to know about the compilers, found by running them, and this
    variant's share of the machine's CPUs and memory."""
    cxx = os.environ.get("CXX", "c++")
    memory = available_memory_mib()
    return Toolchain(
        cuda=toolkit,
        nvcc_supports=supported_capabilities(toolkit.home) if toolkit else None,
        shared_libstdcxx=_links_shared_libstdcxx(cxx),
        no_gnu_unique=_accepts_flag(cxx, NO_GNU_UNIQUE),
        cpus=max(1, resolve_jobs(None) // variants_at_once),
        memory_mib=None if memory is None else memory // variants_at_once,
    )


def _note(log: Path, notes: tuple[str, ...]) -> None:
    if notes:
        with open(log, "a") as fh:
            fh.writelines(f"note: {note}\n" for note in notes)


def _worker_env(
    req: BuildRequest,
    toolkit: CudaToolkit | None,
    stats_log: Path,
    cross_build: cross.CrossBuild | None,
) -> tuple[dict[str, str], bool]:
    """The worker's environment, and whether the compiler cache is on."""
    env_vars = dict(os.environ)
    if toolkit is not None:
        env_vars["CUDA_HOME"] = str(toolkit.home)
        env_vars["PATH"] = f"{toolkit.home / 'bin'}{os.pathsep}{env_vars.get('PATH', '')}"
    nvcc = toolkit.home / "bin" / "nvcc" if toolkit else None
    cached = None if req.no_ccache else ccache_env(req.cache_dir, stats_log, nvcc, env_vars)
    if cached is not None:
        env_vars.update(cached)
    else:
        # No cache means none: torch >= 2.13 would otherwise wrap its compilers in a ccache it
        # finds on PATH by itself.
        env_vars["TORCH_NO_COMPILER_WRAPPER"] = "1"
    if cross_build is not None:  # kernelwheel.builder.cross: CC/CXX/LDSHARED = the cross compiler
        cross_build.extend_env(env_vars, req.cache_dir)
    return env_vars, cached is not None


def _compile(
    req: BuildRequest,
    env: EnvInfo,
    namespace: str,
    log: Path,
    toolkit: CudaToolkit | None,
    cross_build: cross.CrossBuild | None = None,
) -> dict[str, object]:
    variant = req.variant
    stage = req.work_dir / variant.name
    if stage.exists():
        shutil.rmtree(stage)
    codegen.write_registration_header(stage / "include")
    # Known remedies keep the .so within manylinux_2_28 when built with a newer gcc/glibc.
    headers = tuple(provide_headers(req.headers, req.cache_dir, env.python, log))
    tools = _toolchain(toolkit, req.variants_at_once)
    plan = plan_compile(req, namespace, stage, tools, remedy_flags(), headers)
    if plan.keep_dir is not None:
        plan.keep_dir.mkdir(parents=True, exist_ok=True)
    _note(log, plan.notes)
    spec = plan.spec
    if cross_build is not None:  # kernelwheel.builder.cross: target include/lib dirs, nvcc -ccbin
        spec = cross_build.extend_spec(spec)
    spec_path = spec.write(stage / "compile.json")
    result_path = stage / "result.json"
    stats_log = stage / "ccache-stats.log"
    env_vars, cached = _worker_env(req, toolkit, stats_log, cross_build)
    # An unchanged variant (same key, same input files) reuses its last shared object; with the
    # compiler cache off (the no-ccache option) every build really compiles.
    reuse = (
        None
        if req.no_ccache
        else Reuse(req.work_dir / "reuse" / variant.name, (req.project.root, stage))
    )
    key = build_key(spec, env, env_vars, _WORKER) if reuse else ""
    stored = reuse.lookup(key) if reuse else None
    if stored is not None:
        with open(log, "a") as fh:
            fh.write(
                "compile skipped: sources, headers, flags, toolchain and torch are those of the "
                f"last build of {variant.name}; its shared object is reused\n"
            )
        stored["cache"] = "unchanged: compile skipped"
        stored["notes"] = list(plan.notes)
        return stored
    try:
        code = run_logged(
            [env.python, _WORKER, spec_path, result_path], log, env=env_vars, cwd=stage
        )
    finally:
        # nvcc's --keep files (named after the source, for reproducible objects) are hundreds
        # of MB per variant: gone when the compile ends, however it ends, unless asked for.
        if plan.keep_dir is not None and not req.keep_intermediates:
            shutil.rmtree(plan.keep_dir, ignore_errors=True)
    if code != 0 or not result_path.exists():
        raise BuildError(
            f"compiling {variant.name} failed (exit {code})",
            log=log,
            hint="read the compiler errors at the end of the log",
        )
    result: dict[str, object] = json.loads(result_path.read_text())
    result["capabilities"] = list(spec.capabilities)
    if reuse is not None:
        reuse.store(key, result, spec.sources, spec.include_dirs)
    result.pop("inputs", None)
    stats = read_stats(stats_log) if cached else None
    result["cache"] = stats.describe() if stats else "no compiler cache (install ccache)"
    result["notes"] = list(plan.notes)
    return result


def _python_tag(limited_api: str) -> tuple[str, str]:
    """(interpreter tag, Requires-Python) for the Py_LIMITED_API value the build really used."""
    value = int(limited_api, 16)
    major, minor = value >> 24, (value >> 16) & 0xFF
    return f"cp{major}{minor}", f">={major}.{minor}"


def build_variant(req: BuildRequest, reporter: Reporter) -> BuiltWheel:
    project, variant = req.project, req.variant
    scope = variant.name
    if project.noarch:
        raise ProjectError(
            "a pure-Python (noarch) project has no variant of its own to compile",
            file=project.build_toml,
            hint="build it with 'kernelwheel build' (kernelwheel.builder.noarch.build_noarch): "
            "one py3-none-any wheel for all of its torch-<backend> variants",
        )
    if project.framework is Framework.TVM_FFI:
        from .tvm_ffi import build_tvm_ffi_variant  # imported here: it imports this module

        return build_tvm_ffi_variant(req, reporter)
    if not req.best_effort and (variant.arch is None or variant.arch is Arch.host()):
        check_cxx_toolchain(os.environ)  # a cross build brings its own compiler
    output_dir(req.out_dir, "--output-dir")  # a clear error for a file or unwritable folder
    log = req.log
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"kernelwheel build of {project.name} for {variant.name}\n")

    with step(reporter, scope, "environment", log=log) as detail:
        # kernelwheel.builder.cross: a variant for another arch builds in a host-arch environment
        # (the request's env_spec) against the target arch's torch (and CUDA) wheels, with the
        # cross compiler; request_for planned it.
        cross_plan = req.cross
        if req.python is not None:
            env = probe(req.python, req.cache_dir)
        else:
            if req.env_spec is None:
                raise ToolchainError(f"no environment recipe for {variant.name}")
            env = provision(req.env_spec, req.cache_dir, log=log)
            for note in env.notes:
                reporter.info(scope, note)
        _check_env_matches(env, variant)
        cross_build = cross_plan.prepare(env, req.cache_dir, log) if cross_plan else None
        toolkit = None
        if variant.backend is not None and variant.backend.kind is BackendKind.CUDA:
            toolkit = find_cuda_toolkit(
                env, req.cuda_home, req.cuda_system_paths, req.cache_dir / "toolkits"
            )
        detail.append(f"torch {env.torch}" + (" (cached)" if env.reused else ""))
        if toolkit:
            detail.append(f"CUDA {toolkit.version} at {toolkit.home}")
        if cross_build is not None:
            detail.append(cross_build.describe())

    with step(reporter, scope, "codegen") as detail:
        bid = codegen.build_id(project, variant, settings=_settings(req))
        namespace = codegen.ops_namespace(project.package, bid)
        detail.append(namespace)

    with step(reporter, scope, "compile", log=log) as detail:
        result = _compile(req, env, namespace, log, toolkit, cross_build)
        detail.append(str(result["cache"]))
    for note in _notes(result):
        reporter.info(scope, note)

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
        so_path = Path(str(result["shared_object"]))
        files[f"{project.package}/{namespace}.abi3.so"] = so_path.read_bytes()
        spec = WheelSpec(
            name=project.name,
            version=version,
            tag=tag,
            files=files,
            requires_dist=(variant.torch_requirement(), *requirements(project, variant)),
            requires_python=requires_python,
            summary=f"{project.name} PyTorch kernel ({variant.name}), built by kernelwheel",
            executables=frozenset({f"{project.package}/{namespace}.abi3.so"}),
        )
        # Licence, its files, project URLs, the kernel card: builder.wheelmeta.
        spec = project_metadata(project).apply(spec)
        # A raw wheel that auditwheel re-zips is stored, not deflated; it is the output only
        # without repair, or with best effort (kept as is when the repair fails).
        raw = write_wheel(
            spec,
            req.work_dir / variant.name / "dist",
            compress=req.manylinux is None or req.best_effort,
        )
        detail.append(raw.name)
    return finish_wheel(req, raw, reporter, bid, namespace, env, _caps(result))


def finish_wheel(
    req: BuildRequest,
    raw: Path,
    reporter: Reporter,
    bid: str,
    namespace: str,
    env: EnvInfo | None,
    capabilities: tuple[str, ...],
) -> BuiltWheel:
    """Repair the raw wheel to the manylinux policy (or only check it, without one) and put it
    into the output folder: the last steps of every compiled build."""
    variant, scope, log = req.variant, req.variant.name, req.log
    if req.manylinux is None:
        with step(reporter, scope, "check") as detail:
            report = check_wheel(raw, policy=None)
            path = atomic_copy(raw, req.out_dir / raw.name)
            detail.append("ok" if report.ok else f"{len(report.violations)} violation(s)")
        if not report.ok and not req.best_effort:
            raise AbiError(report.summary(), hint=_ABI_HINT)
        return BuiltWheel(variant, path, bid, namespace, log, env, report.ok, capabilities)

    with step(reporter, scope, "repair") as detail:
        repaired = _repair(req, raw)
        with open(log, "a") as fh:
            fh.write(f"\n$ auditwheel repair ({req.manylinux})\n{repaired.log}\n")
        detail.append(repaired.tag)
    with step(reporter, scope, "check") as detail:
        report = repaired.report
        if report.ok:
            detail.append(f"complies with {report.policy}")
        else:
            detail.append(f"{len(report.violations)} violation(s), kept as {repaired.tag}")
            with open(log, "a") as fh:
                fh.write("\n" + report.summary(limit=100) + "\n")
    return BuiltWheel(variant, repaired.wheel, bid, namespace, log, env, report.ok, capabilities)


def _repair(req: BuildRequest, raw: Path) -> RepairResult:
    """auditwheel repair, or the wheel an earlier repair made from the same bytes (a variant
    rebuilt unchanged gives a byte-identical raw wheel): copied, then checked again."""
    assert req.manylinux is not None
    reuse = Reuse(req.work_dir / "reuse" / req.variant.name, ())
    key = repair_key(req.manylinux, req.best_effort)
    hit = None if req.no_ccache else reuse.repaired(raw, key)
    if hit is not None:
        wheel, record = hit
        final = atomic_copy(wheel, req.out_dir / wheel.name)
        report = check_wheel(final, policy=req.manylinux)
        grafted = record.get("grafted")
        return RepairResult(
            wheel=final,
            tag=str(record["tag"]),
            report=report,
            grafted=tuple(str(g) for g in grafted) if isinstance(grafted, list) else (),
            log=f"(reused: the repair of the same raw wheel)\n{record.get('log', '')}",
        )
    repaired = repair_wheel(raw, req.out_dir, policy=req.manylinux, best_effort=req.best_effort)
    reuse.keep_repaired(raw, key, repaired.wheel, repaired.tag, repaired.grafted, repaired.log)
    return repaired


def _settings(req: BuildRequest) -> tuple[str, ...]:
    """Build settings that change what is compiled, beyond the files and the variant."""
    return ("with-cpu-kernels",) if req.with_cpu_kernels else ()


def _notes(result: dict[str, object]) -> tuple[str, ...]:
    notes = result.get("notes")
    return tuple(str(n) for n in notes) if isinstance(notes, list) else ()


def _caps(result: dict[str, object]) -> tuple[str, ...]:
    caps = result.get("capabilities")
    return tuple(str(c) for c in caps) if isinstance(caps, list) else ()


_ABI_HINT = (
    "run 'kernelwheel check WHEEL' for each symbol's cause and fix; build in a manylinux_2_28 "
    "image for a guaranteed result, or pass --best-effort to keep a linux_<arch> wheel"
)


def build_and_export(
    req: BuildRequest, reporter: Reporter, *, hub_layout: Path | None = None
) -> BuiltWheel:
    """Build one variant (serialised with other processes building it: they share its work
    folder) and, with ``hub_layout``, also write it as a Hub kernel tree there."""
    with locked(req.work_dir / f"{req.variant.name}.lock"):
        wheel = build_variant(req, reporter)
    if hub_layout is not None:
        # Imported here: the hub package pulls in huggingface_hub, which builds do not need.
        from ..hub.export import export_variant

        with step(reporter, req.variant.name, "hub layout") as detail:
            folder = export_variant(
                wheel.path,
                req.project,
                wheel.variant,
                wheel.namespace,
                hub_layout,
                capabilities=wheel.capabilities,
                git=req.git,
            )
            detail.append(str(folder))
    return wheel
