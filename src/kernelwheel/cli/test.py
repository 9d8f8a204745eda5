"""``kernelwheel test [DIR] [-- PYTEST_ARGS]``: ``kernelwheel dev``, then the project's own
``tests/`` run by pytest with the project as its rootdir, against the fresh dev build."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

from .._util import Runner, atomic_write, read_json_object
from ..builder import _pytest_report
from ..builder.dev import lacking, pytest_arguments
from ..builder.dev_layout import DevBuild, holds
from ..builder.load_check import (
    call_warnings,
    deferred_result,
    dispatch_key,
    record_load,
    then_pytest_command,
)
from ..builder.steps import package_notes
from ..builder.test_imports import PROBE, module_imports
from ..compat.gpus import visible_gpus
from ..errors import ToolchainError
from ..model.project import KernelProject
from ..model.recipes import load_pytest_requirements
from ..model.variant import BackendKind
from ..toolchain.pytest_tool import provision_pytest
from .dev import DevRun, add_dev_arguments, dev_once, local_kernels
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "test",
        help="kernelwheel dev, then run the project's tests against that build",
        description=(
            "Build the project as 'kernelwheel dev' does (incremental, load-checked, no wheel), "
            "then run its tests/ folder with pytest, the project as pytest's rootdir and only "
            "its own pytest configuration (when it has none, one registering kernel-builder's "
            "kernels_ci marker), so the settings of a checkout the project sits in do not "
            "apply. The tests run in the active virtual "
            "environment or --python (which needs what the tests import), else in the build "
            "environment; where that interpreter has no pytest, with a pinned pytest kernelwheel "
            "installs into its cache (recipes/pytest.toml), never into the environment; with "
            "LOCAL_KERNELS naming the build for tests that load it "
            "through kernels.get_kernel. Arguments after -- go to pytest; a test file or id "
            "among them (relative to the current folder) runs instead of all of tests/. The "
            "exit code is pytest's."
        ),
        epilog="examples:\n  kernelwheel test my-kernel -- -x -k smoke\n"
        "  kernelwheel test -- tests/test_my_kernel.py::test_add_one",
    )
    add_dev_arguments(p)
    p.set_defaults(pytest_args=[])  # main() hands it the words after --


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    # the build's lock held until the tests end: another dev or test of the project waits
    # rather than swap the shared object under them (they would test its build, not this one)
    with ExitStack() as hold:
        done = dev_once(args, ui, check_in_tests=True, before_build=_has_tests, hold=hold)
        return _test(args, ui, done)


def _test(args: argparse.Namespace, ui: ConsoleUI, done: DevRun) -> int:
    project, build, linked = done.planned.project, done.build, done.linked
    env = dev_environment(project, build, os.environ)
    # the linked interpreter, else the build's own
    python = linked.python if linked is not None and linked.pth is not None else build.python
    if python is None:  # a pure-Python build: no environment of its own
        why = f" ({linked.python}: {linked.skipped})" if linked is not None else ""
        into = f"'{linked.python} -m pip install \"{build.runtime}\"', or " if linked else ""
        raise ToolchainError(
            f"{project.name} is pure Python: its tests need an interpreter holding "
            f"{build.runtime}, and none is linked{why}",
            hint=f"{into}activate a virtual environment holding torch (and pytest, or "
            "kernelwheel provides one), or pass --python PY",
        )
    if python == build.python and (missing := lacking(python, project, build.variant, args.runner)):
        ui.warn(
            f"the build environment the tests run in lacks {', '.join(missing)}, which "
            f"{project.name}'s wheel requires (build.toml python-depends), and is never "
            f"changed: activate a virtual environment holding {build.runtime_name} and them, or "
            "pass --python PY"
        )
    # the interpreter's own pytest, else kernelwheel's pinned one (build environments have none)
    if not has_pytest(python, env, args.runner):
        options = done.planned.options
        tools = provision_pytest(
            python,
            options.cache_dir,
            load_pytest_requirements(options.recipes),
            options.pip_sources,
            args.runner,
        )
        where = "the build environment" if python == build.python else str(python)
        ui.info("", f"pytest for {where}: kernelwheel's, {tools}")
        env["PYTHONPATH"] = _paths(tools, env.get("PYTHONPATH", ""))
    unimportable = _warn_missing_imports(project, build, python, env, ui, args.runner)
    outcome = _counting(build.folder, env)
    pytest_args = ["-p", _pytest_report.PLUGIN]
    pytest_args += pytest_arguments(project, build, args.pytest_args, Path.cwd())
    # pytest runs in the project: its tests import the package from the dev build, not from
    # a torch-ext/ folder next to them (that has no _ops.py).
    cmd = [os.fspath(python), "-m", "pytest", *pytest_args]
    deferred = build.deferred
    if deferred is None:
        ui.info("", "$ " + " ".join(cmd))
        code = args.runner.attached(cmd, env=env, cwd=project.root)
        return pytest_exit(
            code, ui, project, unimportable, outcome, gpu_note(build, code, args.runner)
        )
    # the load check in pytest's own process, before it collects: torch imported once
    ui.info(build.variant.name, "load check: in the tests' process, before pytest collects")
    ui.info("", "$ " + " ".join(cmd))
    offset = deferred.log.stat().st_size
    cmd = then_pytest_command(python, deferred, pytest_args)
    code = int(args.runner.attached(cmd, env=env, cwd=project.root))
    report = deferred_result(deferred, code, offset)  # a failed load: its BuildError
    if report is None:
        raise ToolchainError(
            f"{python} has no pytest",
            hint=f"'{python} -m pip install pytest', or activate a virtual environment holding "
            "torch and pytest (or pass --python PY)",
        )
    ui.info(build.variant.name, "load check: " + report.describe(deferred.namespace))
    package, namespace = deferred.package, deferred.namespace
    warnings = report.warnings(namespace, dispatch_key(build.variant), package)
    calls = call_warnings(report, namespace, package, deferred.root)
    for warning in (*warnings, *calls, *report.notes(namespace, package)):
        ui.info(build.variant.name, warning)
    record_load(deferred.record, deferred.digest, report)  # it loaded: not loaded again
    return pytest_exit(code, ui, project, unimportable, outcome, gpu_note(build, code, args.runner))


def gpu_note(build: DevBuild, code: int, runner: Runner) -> str | None:
    """Why tests of a CUDA build that failed (``code``) may have: no GPU here (nvidia-smi asked
    only then)."""
    backend = build.variant.backend
    if code not in (1, 2) or backend is None or backend.kind is not BackendKind.CUDA:
        return None
    if (gpus := visible_gpus(None, runner=runner)).present:
        return None
    return (
        f"this machine has {gpus.describe()}: a test that puts a tensor on a CUDA device fails "
        "here (torch: 'Found no NVIDIA driver', 'No CUDA GPUs are available'): skip it where "
        "torch.cuda.is_available() is False, as kernelwheel init's tests do "
        "(pytest.mark.skipif), and run it on a GPU machine"
    )


def _warn_missing_imports(
    project: KernelProject,
    build: DevBuild,
    python: Path,
    env: Mapping[str, str],
    ui: ConsoleUI,
    runner: Runner,
) -> str | None:
    """Before pytest's collection errors: the modules the tests import that ``python`` lacks
    (``build``'s own environment holds torch, or apache-tvm-ffi, alone and is never changed);
    what to say again under those errors, if any."""
    imported = module_imports(project.root / "tests")
    if not imported:
        return None
    found = runner.captured(
        [python, "-c", PROBE, *sorted(imported)], timeout=120, env=env, cwd=project.root
    )
    missing = found.stdout.split() if found.returncode == 0 else []
    held = build.runtime_name
    own = python == build.python
    where = f" (the build environment: kernelwheel's, holding {held} alone)" if own else ""
    for name in missing:
        ui.warn(f"{imported[name]} imports {name}, which {python}{where} cannot import")
    if not missing:
        return None
    fix = (
        f"fix: activate a virtual environment holding {build.wanted}, pytest and "
        f"{', '.join(missing)}, or pass --python PY"
    )
    ui.info("", fix)
    return f"{python} cannot import {', '.join(missing)}; {fix}"


def has_pytest(python: Path, env: Mapping[str, str], runner: Runner) -> bool:
    """Whether ``python`` finds pytest: found, not imported (an import of pytest costs most of
    a second of every ``kernelwheel test``, before pytest's own run imports it again)."""
    found = runner.captured([python, "-c", PROBE, "pytest"], timeout=120, env=env)
    return found.returncode == 0 and "pytest" not in found.stdout.split()


def _has_tests(project: KernelProject) -> None:
    """Refused before the build (minutes for a CUDA variant): a project without tests/."""
    if not (project.root / "tests").is_dir():
        raise ToolchainError(
            f"{project.root} has no tests/ folder",
            hint="put the kernel's tests in tests/ (kernelwheel init writes one)",
        )


def _counting(folder: Path, env: dict[str, str]) -> Path:
    """The report the tests' run writes (``_pytest_report``, loaded from a folder of its own at
    the end of ``env``'s ``PYTHONPATH``: the dev build still leads), an older run's removed."""
    plugins = folder / "pytest-plugin"
    copy = plugins / f"{_pytest_report.PLUGIN}.py"
    text = Path(_pytest_report.__file__).read_text(encoding="utf-8")
    if not holds(copy, text):
        atomic_write(copy, text)
    env["PYTHONPATH"] = os.pathsep.join((env["PYTHONPATH"], str(plugins)))
    report = folder / "pytest-report.json"
    report.unlink(missing_ok=True)
    env[_pytest_report.ENV] = str(report)
    return report


def pytest_exit(
    code: int,
    ui: ConsoleUI,
    project: KernelProject | None = None,
    missing: str | None = None,
    outcome: Path | None = None,
    no_gpu: str | None = None,
) -> int:
    """pytest's exit code; for a process a signal ended, the shell's 128 + N (a negative code
    would leave this process as 256 - N), the signal named. Failed tests hear again, under the
    failures, of the modules the interpreter lacks (``missing``), of a GPU this machine lacks
    (``no_gpu``, :func:`gpu_note`) and of the files the build
    leaves out of ``project``'s package (a test or an import reading one fails far below the
    build's note; not of a ``py.typed``: no test fails for its lack). A run that skipped every
    test (``outcome``, its report) says so, its exit code still 0: pytest's last line alone
    does not tell a run that tested nothing here."""
    if (
        code == 0
        and outcome is not None
        and (skipped := _pytest_report.all_skipped(read_json_object(outcome)))
    ):
        ui.warn(skipped)
    if code in (1, 2):
        said = "tests failed" if code == 1 else "collecting the tests failed"
        notes = package_notes(project, markers=False) if project is not None else []
        for line in (*(said for said in (missing, no_gpu) if said is not None), *notes):
            ui.info("", f"{said}; {line}")
    if code >= 0:
        return code
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    ui.error(
        f"the tests' process was ended by {name} (its output is above)\n  fix: to see the "
        "test that ended it, run 'kernelwheel test -- -v -x': the last test it names (a "
        "kernel's SIGSEGV or SIGABRT: most often a read or write past the end of a tensor)"
    )
    return 128 - code


def dev_environment(
    project: KernelProject, build: DevBuild, environ: Mapping[str, str]
) -> dict[str, str]:
    """The tests' environment: the dev build on ``PYTHONPATH``, ahead of site-packages, so a
    pip-installed copy of the package never answers for it; ``LOCAL_KERNELS`` naming it for
    tests that load the kernel through kernels.get_kernel (kernels-community's)."""
    env = dict(environ)
    env.setdefault("LOCAL_KERNELS", local_kernels(project, build))
    env["PYTHONPATH"] = _paths(build.site, env.get("PYTHONPATH", ""))
    return env


def _paths(first: Path, rest: str) -> str:
    return os.pathsep.join(p for p in (str(first), rest) if p)
