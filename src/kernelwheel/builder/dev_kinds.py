"""The dev builds (docs/dev.md) of the kinds that are no torch extension: a pure-Python project's
package laid out with nothing to compile, and a tvm-ffi variant compiled into the kept work
folder (an unchanged project compiles nothing), load-checked and laid out."""

from __future__ import annotations

from functools import partial

from packaging.version import Version

from .._util import Runner, sha256_remembered
from ..log import Reporter, step
from ..model.recipes import tvm_ffi_requirement
from . import codegen, steps
from ._load_check import syntax_errors
from .dev_layout import (
    DevBuild,
    Shared,
    dev_id,
    dev_namespace,
    dev_site,
    drop_other_variants,
    lay_out_hub,
    lay_out_site,
    open_dev_log,
    show_compiled,
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
    """A pure-Python project's dev build: ``site/noarch/<package>/`` (links to its files and the
    generated ``_ops.py``) and ``hub/build/torch-<backend>/`` for each variant it serves, as
    ``build`` makes one wheel for all of them. Nothing compiled, no environment: the interpreter
    it is linked into imports it (``DevBuild.runtime``: the torch the wheel requires)."""
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
    """A tvm-ffi variant's dev build: compiled into the kept work folder under a fixed
    namespace (an unchanged project is not compiled again; an edit recompiles through the
    compiler cache), load-checked once per shared object in the build environment (no torch
    there to import twice: never left to the tests), laid out as ``site/<variant>/<package>/``
    and ``hub/build/<variant>/``."""
    del check_in_tests
    project, variant, scope = req.project, req.variant, req.variant.name
    log = open_dev_log(req)
    env, toolkit, header = prepare_tvm_ffi(req, reporter, runner)
    namespace = dev_namespace(project, variant)
    with step(reporter, scope, "compile", log=log) as detail:
        facts = (env.python, env.version, *env.include_dirs, env.lib_dir)
        plan = partial(library_plan, req, namespace, env, toolkit)
        compiled = steps.compile_step(
            req, env.python, facts, toolkit, header, plan, runner, incremental=True
        )
        detail.append(compiled.cache)
    show_compiled(reporter, scope, compiled, project)
    folder = req.outputs.work_dir
    digest = sha256_remembered(compiled.shared_object, folder / f"{variant.name}.so.sha256")
    loaded = (folder / f"{variant.name}.loaded", digest)
    steps.load_checked(
        req, env.python, compiled.shared_object, namespace, reporter, runner, loaded=loaded
    )
    shared = Shared(compiled.shared_object, f"{namespace}.so", digest)
    with step(reporter, scope, "package") as detail:
        ops_py = codegen.tvm_ffi_ops_py(namespace)
        site = lay_out_site(dev_site(folder, variant), project, ops_py, shared)
        package, major = site / project.package, Version(req.version).major
        hub = lay_out_hub(folder / "hub", project, variant, namespace, package, major, shared.name)
        detail.append(str(package))
    runtime = tvm_ffi_requirement(env.version)
    return DevBuild(variant, folder, site, hub, env.python, runtime=runtime)
