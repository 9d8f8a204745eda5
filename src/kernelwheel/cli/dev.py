"""``kernelwheel dev [DIR]``: the author's loop. One variant compiled incrementally into a
persistent dev folder, load-checked, importable without pip; ``--watch`` rebuilds on each save."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ..builder.dev import Linked, link_dev_build
from ..builder.dev_layout import DevBuild
from ..builder.load_check import skip_reason
from ..builder.preflight import select_buildable
from ..builder.request import BuildKind
from ..builder.service import dev_project
from ..errors import KernelwheelError, ProjectError, UsageError
from ..model.capability import CudaCapability
from ..model.project import BUILD_TOML, KernelProject, editor_file
from ..plan.defaults import active_venv_python, capabilities_here
from ..plan.options import Options
from ..plan.planning import Planned, plan_project
from ._args import (
    add_option_arguments,
    add_project_argument,
    add_variant_argument,
    option_values,
    project_path,
)
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dev",
        help="compile a kernel incrementally and make it importable, without a wheel",
        description=(
            "The author's loop: compile one variant of the kernel project (this machine's "
            "default, as 'kernelwheel build' picks it, or --variant) into a persistent folder "
            "in kernelwheel's cache, recompiling only what changed; import it in a child "
            "process (the load check); and make it importable by the active virtual "
            "environment or --python through a .pth file (no pip). No wheel, no repair, no ABI "
            "policy: nothing it writes is published ('kernelwheel build' makes wheels). Prints "
            "the PYTHONPATH and LOCAL_KERNELS lines that load the build elsewhere. A pure-Python "
            "project's package is laid out with nothing to compile; a tvm-ffi project's variant "
            "is compiled in its apache-tvm-ffi environment."
        ),
        formatter_class=argparse.HelpFormatter,  # one paragraph, wrapped
    )
    add_dev_arguments(p)
    p.add_argument(
        "--watch",
        action="store_true",
        help="stay running and build again each time a file of the project changes",
    )


def add_dev_arguments(p: argparse.ArgumentParser) -> None:
    add_project_argument(p)
    add_variant_argument(p, "build this one variant", "torch213-cxx11-cpu-x86_64-linux")
    p.add_argument(
        "--python",
        metavar="PY",
        help="build with this interpreter's torch and make the build importable by it "
        "(default: a kernelwheel-made environment; the active virtual environment imports it)",
    )
    add_option_arguments(
        p, "cache_dir", "jobs", "cuda_capabilities", "find_links", "load_check", grouped=False
    )


@dataclass(frozen=True)
class DevRun:
    planned: Planned
    build: DevBuild
    linked: Linked | None


def dev_once(
    args: argparse.Namespace,
    ui: ConsoleUI,
    *,
    check_in_tests: bool = False,
    before_build: Callable[[KernelProject], None] | None = None,
    hold: ExitStack | None = None,
) -> DevRun:
    """One dev build, linked into the user's interpreter; ``check_in_tests``: its load check
    left to the tests' process (``kernelwheel test``); ``before_build``: what refuses the
    project before anything is built; ``hold``: the build's lock is left on it."""
    planned = plan_project(project_path(args), option_values(args))
    if before_build is not None:
        before_build(planned.project)
    selection = select_buildable(planned, args.variant, runner=args.runner)
    recipes = selection.recipes
    gpus: tuple[CudaCapability, ...] = ()
    # a pure-Python project: one package for all its variants
    compiled = BuildKind.of(planned.project) is not BuildKind.NOARCH
    if compiled and len(recipes) != 1:
        raise UsageError(
            f"--variant matches {len(recipes)} variants: " + ", ".join(r.name for r in recipes),
            hint="a dev build is of one variant: give its full name",
        )
    if compiled:
        (recipe,) = recipes
        if (foreign := skip_reason(recipe.variant)) is not None:  # nothing here could import it
            raise UsageError(
                f"--variant {recipe.name}: a dev build is imported on this machine, and {foreign}",
                hint=f"check that it compiles with kernelwheel build --variant {recipe.name}, or "
                "give a variant of this machine's arch (kernelwheel matrix lists them)",
            )
        default = selection.default
        if default is not None:
            ui.info("", f"variant {recipe.name}: {default.reason}")
            notes, gpus = default.notes, default.gpu_capabilities
        else:  # a dev build only loads here: for this machine's GPUs, as the default's
            gpus, notes = capabilities_here(recipe, planned.options, runner=args.runner)
        for note in notes:
            ui.info("", note)
    build = dev_project(
        planned,
        recipes,
        ui,
        gpu_capabilities=gpus,
        check_in_tests=check_in_tests and compiled,
        hold=hold,
        runner=args.runner,
    )
    # --python, else the active virtual environment's; neither: the build's own environment
    # is kernelwheel's, never changed
    target = planned.options.python or active_venv_python()
    linked = (
        link_dev_build(build, planned.project, target, planned.options.cache_dir, args.runner)
        if target
        else None
    )
    _report(ui, planned.project, build, linked, testing=check_in_tests)
    return DevRun(planned, build, linked)


def _report(
    ui: ConsoleUI,
    project: KernelProject,
    build: DevBuild,
    linked: Linked | None,
    *,
    testing: bool = False,
) -> None:
    """What the dev build is and where; ``testing``: ``kernelwheel test``'s, whose tests get
    the dev build before any pip-installed copy."""
    package = build.site / project.package
    ui.info("", f"dev build of {project.name} ({build.name}): {package}")
    if linked is not None and linked.pth is not None:
        ui.info("", f"importable by {linked.python}: {linked.pth}")
        if linked.replaced is not None:
            origin = linked.replaced_project
            ui.warn(
                f"that file linked another folder's dev build of {project.package} until now "
                f"({f'{origin}, built in ' if origin else ''}{linked.replaced}): {linked.python} "
                f"imports this project's from now on (a kernelwheel dev in "
                f"{origin or 'that project folder'} links it back)"
            )
        for name in linked.renamed:
            ui.info(
                "",
                f"removed {name} from that environment: it linked this folder's build under "
                f"its old package name (now {project.package})",
            )
        if linked.shadowed_by is not None:
            tests = " (not by these tests: they get the dev build first)" if testing else ""
            ui.warn(
                f"{project.name} {linked.shadowed_by} is pip-installed in that environment and "
                f"is imported before the dev build{tests}: {linked.python} -m pip uninstall "
                f"{project.name}"
            )
    else:
        why = f" ({linked.python}: {linked.skipped})" if linked is not None else ""
        ui.info("", f"not linked into an interpreter{why}; import it with")
        # a pure-Python build has no environment: any Python holding the torch it needs
        python = build.python or f"python  # holding {build.runtime}"
        ui.info("", f"  PYTHONPATH={build.site} {python}")
        if linked is not None and linked.stale is not None:
            ui.warn(
                f"{linked.stale}, whose import fails under this environment's torch: "
                "run kernelwheel dev without --variant to build for that torch (it replaces "
                "the link), or delete that file"
            )
    if linked is not None and linked.missing:
        wanted = " ".join(f"'{r}'" for r in linked.missing)
        ui.warn(
            f"{linked.python} lacks {', '.join(linked.missing)}, which {project.name}'s wheel "
            f"requires (build.toml python-depends): the package's import there fails; "
            f"{linked.python} -m pip install {wanted}"
        )
    ui.info("", f"kernels users: LOCAL_KERNELS={local_kernels(project, build)}")


def local_kernels(project: KernelProject, build: DevBuild) -> str:
    """``LOCAL_KERNELS``'s value that makes ``kernels.get_kernel`` load the dev build."""
    repo = (project.hub.repo_id if project.hub else None) or f"local/{project.name}"
    return f"{repo}={build.hub}"


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    if not args.watch:
        dev_once(args, ui)
        return 0
    # the files as the first build reads them: a save during that build is built next
    seen: dict[str, tuple[int, int]] = {}
    roots: list[Path] = []

    def remember(project: KernelProject) -> None:
        roots.append(project.root)
        seen.update(_snapshot(project.root))

    try:
        dev_once(args, ui, before_build=remember)
    except KernelwheelError as exc:
        # a build.toml being written (it does not parse yet): its folder is the project
        toml = exc.file if isinstance(exc, ProjectError) else None
        if not roots and toml is not None and toml.name == BUILD_TOML and toml.is_file():
            roots.append(toml.parent.resolve())
            seen.update(_snapshot(roots[0]))
        if not roots:  # no project to watch (no build.toml, a wrong DIR)
            raise
        ui.error(str(exc))  # a kernel that does not compile yet: the next save tries again
    project_root = roots[0]
    ui.info("", f"watching {project_root} (Ctrl-C stops)")
    while True:
        seen = next_change(project_root, seen)
        try:
            dev_once(args, ui)
        except KernelwheelError as exc:  # the next save tries again
            ui.error(str(exc))  # its fix included, once


def next_change(
    root: Path,
    seen: dict[str, tuple[int, int]],
    poll: float = 0.5,
    settle: float = 0.3,
    patience: float = 10.0,
) -> dict[str, tuple[int, int]]:
    """The project's files once they differ from ``seen`` and then stay the same for ``settle``
    seconds: a ``git checkout`` still writing, or a save by rename, is built when done, not
    half-way; a file that never stops changing (a log) waits ``patience`` seconds at most."""
    while (now := _snapshot(root)) == seen:
        time.sleep(poll)
    give_up = time.monotonic() + patience
    time.sleep(settle)
    while (later := _snapshot(root)) != now and time.monotonic() < give_up:
        now = later
        time.sleep(settle)
    return later


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file of the project but hidden folders, caches, editors' swap
    files and ``kernelwheel build``'s ``wheelhouse/`` (a build in another terminal is no save)."""
    found: dict[str, tuple[int, int]] = {}
    output = os.path.join(root, Options.output_dir)
    for folder, dirs, files in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".") and d != "__pycache__" and os.path.join(folder, d) != output
        ]
        for name in files:
            if editor_file(name):
                continue
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            found[path] = (st.st_size, st.st_mtime_ns)
    return found
