"""``kernelwheel dev`` (docs/dev.md): one variant compiled incrementally into the cache's dev folder
under a fixed ops namespace (an edit never recompiles the binding), load-checked and laid out
(``dev_layout``), or a pure-Python project's laid out; the ``.pth`` link and the tests' pytest."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from .._util import CommandTimeout, Runner, atomic_write, locked
from ..compat.builds import parse_variant, torch_mismatch
from ..compat.guard import BuildStamp
from ..compat.probe_cache import kept_across
from ..log import Reporter, step
from ..model.project import KernelProject
from ..model.recipes import tvm_ffi_requirement
from ..model.variant import Variant
from . import codegen
from ._load_check import syntax_errors
from .dev_layout import (
    DevBuild,
    compile_and_lay_out,
    dev_folder,
    dev_id,
    dev_namespace,
    drop_other_variants,
    holds,
    lay_out_hub,
    lay_out_site,
    open_dev_log,
)
from .load_check import refuse_syntax
from .noarch import BACKEND, backend_namespace, torch_requirement
from .pipeline import compile_extension, prepare_environment
from .request import BuildKind, BuildRequest
from .steps import compile_step, full_version, package_notes
from .tvm_ffi import library_plan, prepare_tvm_ffi
from .wheelmeta import requirements

# the site folder of a pure-Python dev build: one for every backend it serves
NOARCH_SITE = "noarch"


def build_dev(
    req: BuildRequest,
    reporter: Reporter,
    runner: Runner,
    *,
    check_in_tests: bool = False,
    hold: ExitStack | None = None,
) -> DevBuild:
    """``req``'s variant built, load-checked (``check_in_tests``: by the tests' process,
    ``DevBuild.deferred``) and laid out; ``hold`` keeps the variant's lock, so no other run
    replaces the shared object while the caller's tests use it."""
    # No repair, policy or Hub layout; the compile flags stay the release's (the ABI remedies'
    # too): a unit compiled by ``dev`` is a compiler-cache hit for ``build``, and back.
    folder = dev_folder(req.outputs.cache_dir, req.project)
    outputs = replace(req.outputs, work_dir=folder, out_dir=folder, manylinux=None, hub_layout=None)
    req = replace(req, outputs=outputs)
    req.outputs.work_dir.mkdir(parents=True, exist_ok=True)
    # a pure-Python build's one site serves every variant: every selection of them waits
    scope = NOARCH_SITE if req.kind is BuildKind.NOARCH else req.variant.name

    def waiting(holder: str) -> None:
        reporter.info(
            scope,
            f"waiting for another kernelwheel dev or test of this project ({holder}) to finish "
            "its build of this variant, or the tests it runs on that build",
        )

    with ExitStack() as own:  # one at a time
        lock = locked(req.outputs.work_dir / f"{scope}.lock", waiting)
        if (dead := (hold or own).enter_context(lock)) is not None:  # killed: -9, a crash
            reporter.info(scope, f"{dead.describe()}; what it left is checked again")
        return _BUILDERS[req.kind](req, reporter, runner, check_in_tests)


def _build_dev(
    req: BuildRequest, reporter: Reporter, runner: Runner, check_in_tests: bool
) -> DevBuild:
    project, variant = req.project, req.variant
    open_dev_log(req)
    prepared = prepare_environment(req, reporter, runner)
    namespace = dev_namespace(project, variant)

    def ops_py() -> str:
        stamp = BuildStamp(
            dist_name=project.name,
            version=full_version(req.version, variant, req.outputs.local_version_style),
            variant=variant,
            dev_of=os.fspath(project.root),
        )
        return codegen.ops_py(namespace, stamp)

    site, hub, deferred = compile_and_lay_out(
        req,
        reporter,
        runner,
        prepared.env.python,
        lambda: compile_extension(req, prepared, namespace, runner, incremental=True),
        namespace,
        ops_py,
        ".abi3.so",
        defer=check_in_tests,
    )
    return DevBuild(variant, req.outputs.work_dir, site, hub, prepared.env.python, deferred)


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
    for note in package_notes(project):
        reporter.info(scope, note)
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
        lambda: compile_step(
            req, env.python, facts, toolkit, header, plan, runner, incremental=True
        ),
        namespace,
        partial(codegen.tvm_ffi_ops_py, namespace),
        ".so",
    )
    runtime = tvm_ffi_requirement(env.version)
    return DevBuild(req.variant, req.outputs.work_dir, site, hub, env.python, runtime=runtime)


_BUILDERS: dict[BuildKind, Callable[[BuildRequest, Reporter, Runner, bool], DevBuild]] = {
    BuildKind.TORCH: _build_dev,
    BuildKind.TVM_FFI: build_tvm_ffi_dev,
    BuildKind.NOARCH: build_noarch_dev,
}


@dataclass(frozen=True)
class Linked:
    """The ``.pth`` file that made the dev build importable by ``python``, or why none was
    written (``skipped``); ``shadowed_by``: the version of a pip-installed copy that shadows it."""

    python: Path
    pth: Path | None
    skipped: str | None = None
    shadowed_by: str | None = None
    stale: str | None = None  # where not linked: the .pth left linking a build it refuses
    missing: tuple[str, ...] = ()  # the wheel's requirements (python-depends) it lacks
    replaced: str | None = None  # where linked: another checkout's dev site it linked until now
    replaced_project: Path | None = None  # that checkout's folder, where its links still tell
    renamed: tuple[str, ...] = ()  # where linked: this folder's .pth under an old name, removed


# Printed by the target interpreter: its site-packages, its torch's version, the version of the
# distribution pip installed there (empty: none).
_TARGET_PROBE = """
import importlib.metadata as m, json, sys, sysconfig
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return ""
print(json.dumps([sysconfig.get_path("purelib"), version("torch"), version(sys.argv[1]),
                  [version(name) for name in sys.argv[2:]]]))
"""


def link_dev_build(
    build: DevBuild, project: KernelProject, python: Path, cache_dir: Path, runner: Runner
) -> Linked:
    """Make ``build`` importable by ``python`` without pip: ``kernelwheel-dev-<package>.pth`` in
    its site-packages names the build's ``site``; not where that torch is not the variant's (the
    import guard would refuse it), nor where ``python`` lacks ``DevBuild.runtime``."""
    needs = _needs(project, build.variant)
    runtime = Requirement(build.runtime or "torch")
    answer = _probe(python, [project.name, *(r.name for r in needs), runtime.name], runner)
    if answer is None:
        return Linked(python, None, skipped=f"{python} did not answer")
    purelib, torch, installed, *found = answer
    versions = found[0] if found else []
    has = versions[len(needs)] if len(versions) > len(needs) else ""
    missing = _missing(needs, versions)
    pth = Path(purelib) / f"kernelwheel-dev-{project.package}.pth"
    if build.runtime is None:
        wanted = torch_mismatch(build.variant, torch)  # the import guard's rule
        have = f"torch {torch}" if torch else "no torch"
    else:
        fits = has and runtime.specifier.contains(has, prereleases=True)
        wanted = None if fits else str(runtime)
        have = f"{runtime.name} {has}" if has else f"no {runtime.name}"
    if wanted is not None:
        what = "the variant is for" if build.runtime is None else "the build needs"
        skipped = f"it has {have}, {what} {wanted}"
        return Linked(python, None, skipped=skipped, stale=_stale_link(pth, torch), missing=missing)
    line = f"{os.fspath(build.site)}\n"
    replaced, origin = None, None
    if not holds(pth, line):  # unchanged: its folder's probe stays valid
        old = _linked(pth)  # another project folder's dev site, linked until now?
        if old is not None and old.parent.name == "site" and old.parent.parent != build.folder:
            replaced, origin = str(old), _project_of(old / project.package / "__init__.py")
        with kept_across(python, cache_dir):  # and changed: it stays valid too
            atomic_write(pth, line)
    renamed = _drop_renamed(pth, build.folder)
    return Linked(
        python,
        pth,
        shadowed_by=installed or None,
        missing=missing,
        replaced=replaced,
        replaced_project=origin,
        renamed=renamed,
    )


def _project_of(link: Path) -> Path | None:
    """The project folder a dev site's link into its package leads to (its build.toml's)."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return next((p for p in target.parents if (p / "build.toml").is_file()), None)


def _drop_renamed(pth: Path, folder: Path) -> tuple[str, ...]:
    """Remove (and name) the other ``kernelwheel-dev-*.pth`` beside ``pth`` linking a dev site
    of the project folder of ``folder`` under another package name: the project was renamed,
    and its old name would import an empty namespace package of broken links."""
    digest = folder.name.rpartition("-")[2]
    dropped = []
    for other in sorted(pth.parent.glob("kernelwheel-dev-*.pth")):
        if (linked := _linked(other)) is None:
            continue
        old = linked.parent.parent  # <cache>/dev/<package>-<digest>/site/<variant>
        if (
            other != pth
            and linked.parent.name == "site"
            and old.parent == folder.parent
            and old != folder
            and old.name.rpartition("-")[2] == digest
        ):
            other.unlink(missing_ok=True)
            dropped.append(other.name)
    return tuple(dropped)


def _linked(pth: Path) -> Path | None:
    """The folder a ``.pth`` names; None where it cannot be read."""
    try:
        return Path(pth.read_text().strip())
    except (OSError, UnicodeDecodeError):
        return None


def _probe(python: Path, names: list[str], runner: Runner) -> list[Any] | None:
    """:data:`_TARGET_PROBE`'s answer from ``python``; None where it gives none."""
    try:
        proc = runner.captured([python, "-c", _TARGET_PROBE, *names], timeout=120)
        answer: list[Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, CommandTimeout, ValueError, IndexError):
        return None
    return answer


def _needs(project: KernelProject, variant: Variant) -> list[Requirement]:
    """The requirements of ``variant``'s wheel besides torch that apply here (no extra)."""
    needs = [Requirement(r) for r in requirements(project, variant)]
    return [r for r in needs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _missing(needs: list[Requirement], versions: list[str]) -> tuple[str, ...]:
    """Of ``needs``, those whose version (``versions``, in order; "": none) does not fit."""
    found = dict(zip((r.name for r in needs), versions, strict=False))
    return tuple(
        str(r)
        for r in needs
        if not (got := found.get(r.name)) or not r.specifier.contains(got, prereleases=True)
    )


def lacking(
    python: Path, project: KernelProject, variant: Variant, runner: Runner
) -> tuple[str, ...]:
    """The requirements of ``variant``'s wheel (python-depends) that ``python`` lacks."""
    if not (needs := _needs(project, variant)):
        return ()
    if not (answer := _probe(python, [project.name, *(r.name for r in needs)], runner)):
        return ()
    return _missing(needs, answer[-1])


def _stale_link(pth: Path, torch: str) -> str | None:
    """What ``pth``, an earlier run's link, names when its variant is one ``torch`` refuses at
    import (the torch changed since): the import there fails until rebuilt or unlinked."""
    if (site := _linked(pth)) is None:
        return None
    linked = parse_variant(site.name)
    if linked is None or (wanted := torch_mismatch(linked, torch)) is None:
        return None
    return f"{pth} links the dev build for {wanted} ({linked.name})"


def pytest_arguments(
    project: KernelProject, build: DevBuild, given: Sequence[str] = (), cwd: Path | None = None
) -> list[str]:
    """pytest's arguments for the project's ``tests/``, the project its rootdir, its own config
    or an empty one (none of a folder around applies, nor a conftest.py above it), the cache in
    the dev folder; ``given`` (after ``--``) last, a test path among them (from ``cwd``) run
    instead of ``tests/``."""
    own, chose_tests = _given_tests(given, cwd or project.root)
    found = (project.root / name for name in _PYTEST_CONFIGS)
    config = next((path for path in found if _configures_pytest(path)), None)
    if config is None:
        config = build.folder / "pytest.ini"
        if not holds(config, _PYTEST_INI):  # an older run's too
            atomic_write(config, _PYTEST_INI)
    return [
        "--rootdir",
        os.fspath(project.root),
        "-c",
        os.fspath(config),
        "--confcutdir",  # nor a conftest.py of a checkout around the project
        os.fspath(project.root),
        "-o",
        f"cache_dir={build.folder / 'pytest-cache'}",
        *([] if chose_tests else [os.fspath(project.root / "tests")]),
        *own,
    ]


# pytest's options whose value may be the next word (``-k shape``, ``--deselect tests/x.py``):
# that word is never a test path of the author's
_VALUE_OPTIONS = frozenset(
    "-k -m -p -c -o -W -r -n --deselect --ignore --ignore-glob --rootdir --confcutdir "
    "--basetemp --maxfail --tb --durations --durations-min --junitxml --junit-xml "
    "--override-ini --import-mode --capture --color --code-highlight --log-level --log-file "
    "--log-cli-level --log-format --log-date-format --log-file-level --verbosity --dist "
    "--timeout --cov --cov-report".split()
)


def _given_tests(given: Sequence[str], cwd: Path) -> tuple[list[str], bool]:
    """The author's pytest words, test paths made absolute from ``cwd`` (pytest runs in the
    project's root), and whether one names tests (a path, ``.py`` or ``::``, not an option's)."""
    out: list[str] = []
    chose = False
    for before, word in zip(["", *given], given, strict=False):
        if word.startswith("-") or before in _VALUE_OPTIONS:
            out.append(word)
            continue
        path, sep, rest = word.partition("::")
        found = cwd / path
        if sep or path.endswith(".py") or found.exists():
            chose = True
            word = os.fspath(found) + sep + rest if found.exists() else word
        out.append(word)
    return out, chose


# for a project without one: the marker kernel-builder's generated pyproject.toml registers
# (its CI runs ``pytest -m kernels_ci``), so kernels-community's tests run without a warning
_PYTEST_INI = "[pytest]\nmarkers =\n    kernels_ci: mark a test as a kernel CI test\n"

# pytest's configuration files, in its order, and the section one needs ("": none)
_PYTEST_CONFIGS = {
    "pytest.ini": "",
    ".pytest.ini": "",
    "pyproject.toml": "[tool.pytest.ini_options]",
    "tox.ini": "[pytest]",
    "setup.cfg": "[tool:pytest]",
}


def _configures_pytest(path: Path) -> bool:
    if not path.is_file():
        return False
    section = _PYTEST_CONFIGS[path.name]
    return not section or section in path.read_text(errors="replace")
