"""The dev builds (docs/dev.md) of the kinds that are no torch extension: a pure-Python project's,
nothing compiled, and a tvm-ffi variant's."""

from __future__ import annotations

from functools import partial

from packaging.version import Version

from .._util import Runner
from ..log import Reporter, step
from ..model.recipes import tvm_ffi_requirement
from . import codegen, steps
from ._load_check import syntax_errors
from .dev_layout import (
    DevBuild,
    compile_and_lay_out,
    dev_id,
    dev_namespace,
    drop_other_variants,
    lay_out_hub,
    lay_out_site,
    open_dev_log,
)
from .load_check import refuse_syntax
from .noarch import BACKEND, backend_namespace, torch_requirement
from .request import BuildRequest
from .tvm_ffi import library_plan, prepare_tvm_ffi

# the site folder of a pure-Python dev build: one for every backend it serves
NOARCH_SITE = "noarch"


def build_noarch_dev(
    req: BuildRequest, reporter: Reporter, runner: Runner, check_in_tests: bool
) -> DevBuild:
    """A pure-Python project's dev build: ``site/noarch/<package>/`` and a Hub folder for each
    variant it serves, as ``build`` makes one wheel for all; no environment: the interpreter
    linked imports it (``DevBuild.runtime``)."""
    del runner, check_in_tests  # nothing to compile or load
    project, variants, folder = req.project, req.serves or (req.variant,), req.outputs.work_dir
    scope = ",".join(v.name for v in variants)
    bid = dev_id(project, variants[0])
    with step(reporter, scope, "package") as detail:
        # in kernelwheel's own Python's grammar, as ``build`` checks it (no environment here)
        refuse_syntax(syntax_errors(str(project.package_dir)), project.root)
        ops_py = codegen.noarch_ops_py(project.package, bid)
        site = lay_out_site(folder / "site" / NOARCH_SITE, project, ops_py, None)
        package, major = site / project.package, Version(req.version).major
        pattern = f"_{project.package}_{BACKEND}_{bid}"
        for variant in variants:
            namespace = backend_namespace(pattern, variant)
            hub = lay_out_hub(folder / "hub", project, variant, namespace, package, major, None)
        drop_other_variants(hub, {v.name for v in variants})
        detail.append(str(package))
    if (left_out := steps.left_out_note(project)) is not None:
        reporter.info(scope, left_out)
    return DevBuild(
        variants[0], folder, site, hub, None, serves=variants, runtime=torch_requirement(project)
    )


def build_tvm_ffi_dev(
    req: BuildRequest, reporter: Reporter, runner: Runner, check_in_tests: bool
) -> DevBuild:
    """A tvm-ffi variant's dev build, its load check never left to the tests (no torch there to
    import twice)."""
    del check_in_tests
    open_dev_log(req)
    env, toolkit, header = prepare_tvm_ffi(req, reporter, runner)
    namespace = dev_namespace(req.project, req.variant)
    facts = (env.python, env.version, *env.include_dirs, env.lib_dir)
    plan = partial(library_plan, req, namespace, env, toolkit)
    site, hub, _ = compile_and_lay_out(
        req,
        reporter,
        runner,
        env.python,
        lambda: steps.compile_step(
            req, env.python, facts, toolkit, header, plan, runner, incremental=True
        ),
        namespace,
        partial(codegen.tvm_ffi_ops_py, namespace),
        ".so",
    )
    runtime = tvm_ffi_requirement(env.version)
    return DevBuild(req.variant, req.outputs.work_dir, site, hub, env.python, runtime=runtime)
