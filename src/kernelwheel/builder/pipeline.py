"""Build one torch variant: environment, codegen, compile, wheel, each a reported step."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import NamedTuple

from packaging.tags import Tag

from .._util import Runner
from ..abi.symver import ForcedHeader
from ..compat.guard import BuildStamp
from ..compile.compile_spec import CompileSpec
from ..errors import ToolchainError
from ..log import Reporter, step
from ..model.variant import BackendKind, CxxAbi, Variant
from ..toolchain import cross
from ..toolchain.envs import CudaToolkit, EnvInfo, find_cuda_toolkit, probe, provision
from ..wheels import WheelSpec
from . import codegen, steps
from .compile_plan import CompilePlan, plan_compile
from .request import BuildRequest, BuiltWheel
from .wheelmeta import requirements, torch_requirement


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


def compile_extension(
    req: BuildRequest,
    prepared: Prepared,
    namespace: str,
    runner: Runner,
    *,
    incremental: bool = False,
) -> steps.Compiled:
    """A torch variant's compile (steps.compile_step); ``incremental``: ``dev``'s."""
    env, cross_build, toolkit, header = prepared
    plan = partial(_plan, req, namespace, cross_build, incremental)
    return steps.compile_step(
        req,
        env.python,
        env,
        toolkit,
        header,
        plan,
        runner,
        cross_build=cross_build,
        incremental=incremental,
    )


def _plan(
    req: BuildRequest,
    namespace: str,
    cross_build: cross.CrossBuild | None,
    incremental: bool,
    given: steps.PlanInputs,
) -> CompilePlan[CompileSpec]:
    """The extension's compile (builder.compile_plan), the project and kernelwheel's data
    folder named through links in the work folder: the same relative path on every machine
    for the compilers and the compiler cache's keys."""
    stage = given.stage
    codegen.write_registration_header(stage / "include")
    views = ((req.project.root, steps.PROJECT_LINK), (given.remedies.data_dir, steps.DATA_LINK))
    for folder, link in views:
        steps.link_folder(stage, folder, link)
    plan = plan_compile(req, namespace, *given)
    spec = plan.spec.through_views(tuple((str(f), str(stage / link)) for f, link in views))
    spec = replace(spec, incremental=incremental)
    if cross_build is not None:  # kernelwheel.toolchain.cross: target include/lib dirs, nvcc -ccbin
        spec = cross_build.extend_spec(spec)
    return replace(plan, spec=spec)


def _python_tag(limited_api: str) -> tuple[str, str]:
    """(interpreter tag, Requires-Python) for the Py_LIMITED_API value the build really used."""
    value = int(limited_api, 16)
    major, minor = value >> 24, (value >> 16) & 0xFF
    return f"cp{major}{minor}", f">={major}.{minor}"


class Prepared(NamedTuple):
    """A torch variant's build environment (cross build and toolkit only where needed)."""

    env: EnvInfo
    cross_build: cross.CrossBuild | None
    toolkit: CudaToolkit | None
    header: ForcedHeader | None


def prepare_environment(req: BuildRequest, reporter: Reporter, runner: Runner) -> Prepared:
    """The environment step of a torch variant (``build`` and ``dev`` alike)."""
    variant, scope, log = req.variant, req.variant.name, req.log
    with step(reporter, scope, "environment", log=log) as detail:
        # kernelwheel.toolchain.cross: another arch's variant builds in a host-arch environment
        # against the target's torch wheels, with the cross compiler plan_requests planned.
        cross_plan, cache = req.compile.cross, req.outputs.cache_dir
        if req.env.python is not None:
            env = probe(req.env.python, cache, runner)
        else:
            if req.env.spec is None:
                raise ToolchainError(f"no environment recipe for {variant.name}")
            env = provision(req.env.spec, cache, log=log, runner=runner)
            for note in env.notes:
                reporter.info(scope, note)
        _check_env_matches(env, variant)
        cross_build = cross_plan.prepare(env, cache, log, runner) if cross_plan else None
        toolkit = None
        if variant.backend is not None and variant.backend.kind is BackendKind.CUDA:
            toolkit = find_cuda_toolkit(
                env, req.cuda.home, req.cuda.system_paths, cache / "toolkits", runner
            )
        detail.append(f"torch {env.torch}" + (" (cached)" if env.reused else ""))
        if toolkit:
            detail.append(f"CUDA {toolkit.version} at {toolkit.home}")
        if cross_build is not None:
            detail.append(cross_build.describe())
        header = steps.remedy_header(req, runner)  # from the request's compiler: a cross build's

    return Prepared(env, cross_build, toolkit, header)


def build_variant(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
    """The torch extension wheel of ``req``'s variant (per torch or on the stable ABI)."""
    project, variant = req.project, req.variant
    scope = variant.name
    steps.open_build(req, runner)
    prepared = prepare_environment(req, reporter, runner)

    with step(reporter, scope, "codegen") as detail:
        bid = codegen.build_id(project, variant, settings=_settings(req, prepared.header))
        namespace = codegen.ops_namespace(project.package, bid)
        detail.append(namespace)

    with step(reporter, scope, "compile", log=req.log) as detail:
        compiled = compile_extension(req, prepared, namespace, runner)
        detail.append(compiled.cache)
    for note in compiled.notes:
        reporter.info(scope, note)
    for note in steps.package_notes(project):
        reporter.info(scope, note)
    so_path = compiled.shared_object
    steps.load_checked(req, prepared.env.python, so_path, namespace, reporter, runner)

    torch_req = torch_requirement(variant, [so_path])  # stable ABI: max(declared, measured)
    for warning in torch_req.warnings:
        reporter.info(scope, f"warning: {warning}")
    with step(reporter, scope, "wheel") as detail:
        version = steps.full_version(req.version, variant, req.outputs.local_version_style)
        interpreter, requires_python = _python_tag(compiled.py_limited_api)
        stamp = BuildStamp(dist_name=project.name, version=version, variant=variant)
        files = steps.package_files(project)
        files[f"{project.package}/_ops.py"] = codegen.ops_py(namespace, stamp).encode()
        files[f"{project.package}/{namespace}.abi3.so"] = so_path
        raw = steps.raw_wheel(
            req,
            WheelSpec(
                name=project.name,
                version=version,
                tag=Tag(interpreter, "abi3", variant.platform_tag(manylinux=None)),
                files=files,
                requires_dist=(torch_req.requirement, *requirements(project, variant)),
                requires_python=requires_python,
                summary=f"{project.name} PyTorch kernel ({variant.name}), built by kernelwheel",
                executables=frozenset({f"{project.package}/{namespace}.abi3.so"}),
            ),
        )
        detail.append(raw.name)
    return steps.finish_wheel(req, raw, reporter, namespace, compiled, runner)


def _settings(req: BuildRequest, header: ForcedHeader | None) -> tuple[str, ...]:
    """Settings beyond the files and variant that change what is compiled (the build id's)."""
    cpu = ("with-cpu-kernels",) if req.cuda.with_cpu_kernels else ()
    return (*cpu, steps.remedies_setting(header))
