"""``kernelwheel dev``: the author's loop (docs/dev.md). One torch variant compiled incrementally
into ``<cache>/dev/<package>-<digest of the project's path>/`` with a fixed ops namespace (an edit
of a kernel never recompiles the binding), loaded (the load check), and laid out as an importable
``site/<package>/`` and a Hub layout ``hub/build/<variant>/`` marked ``dev`` (``kernelwheel
upload`` refuses it). No wheel, repair or ABI policy; nothing lies in the project."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from .. import __version__
from .._util import (
    CommandTimeout,
    Runner,
    atomic_copy,
    atomic_write,
    locked,
    sha256_remembered,
    write_if_changed,
)
from ..compat.builds import parse_variant, torch_mismatch
from ..compat.guard import BuildStamp
from ..compat.probe_cache import kept_across
from ..log import Reporter, step
from ..model.project import KernelProject
from ..model.variant import Variant
from ..wheels import Member
from . import codegen
from .load_check import DeferredLoad
from .pipeline import compile_extension, prepare_environment
from .request import BuildRequest
from .steps import full_version, left_out_note, load_checked, package_files
from .wheelmeta import requirements


@dataclass(frozen=True)
class DevBuild:
    """A finished dev build."""

    variant: Variant
    folder: Path  # <cache>/dev/<package>-<digest>
    site: Path  # on sys.path: holds <package>/
    hub: Path  # LOCAL_KERNELS's path: holds build/<variant>/
    python: Path  # the build environment's interpreter: it loads the extension
    # the load check left to the tests' interpreter (build_dev's check_in_tests), when due
    deferred: DeferredLoad | None = None


def dev_folder(cache_dir: Path, project: KernelProject) -> Path:
    """The project's dev folder in kernelwheel's cache (one per project folder)."""
    digest = hashlib.sha256(str(project.root.resolve()).encode()).hexdigest()[:12]
    return cache_dir / "dev" / f"{project.package}-{digest}"


def dev_site(folder: Path, variant: Variant) -> Path:
    """The folder on ``sys.path`` of ``variant``'s dev build: one per variant, so a dev build of
    another variant never replaces the one an interpreter was linked to."""
    return folder / "site" / variant.name


def dev_namespace(project: KernelProject, variant: Variant) -> str:
    """The ops namespace of the project's dev builds of ``variant``: fixed, so that an edit
    recompiles only the edited unit; distinct from every release build's (``dev`` in it)."""
    digest = hashlib.sha256(f"{project.root.resolve()}\0{variant.name}".encode()).hexdigest()
    return codegen.ops_namespace(project.package, "dev" + digest[:10])


def build_dev(
    req: BuildRequest,
    reporter: Reporter,
    runner: Runner,
    *,
    check_in_tests: bool = False,
    hold: ExitStack | None = None,
) -> DevBuild:
    """``req``'s variant compiled incrementally, load-checked (``check_in_tests``: by the
    process that runs the tests, ``DevBuild.deferred``) and laid out as an importable package.
    ``hold``: the variant's lock is left on it, so no other run replaces the shared object
    while the caller uses it (``kernelwheel test``'s tests)."""
    # Its work folder and log in the dev folder; no repair or policy, no Hub layout. The compile
    # flags stay the release's (the ABI remedies' too): a kernel unit compiled by ``dev`` is then
    # a compiler-cache hit for ``build``, and back.
    folder = dev_folder(req.outputs.cache_dir, req.project)
    outputs = replace(req.outputs, work_dir=folder, out_dir=folder, manylinux=None, hub_layout=None)
    req = replace(req, outputs=outputs)
    req.outputs.work_dir.mkdir(parents=True, exist_ok=True)
    scope = req.variant.name

    def waiting(holder: str) -> None:
        reporter.info(
            scope,
            f"waiting for another kernelwheel dev or test of this project ({holder}) to finish "
            "its build of this variant, or the tests it runs on that build",
        )

    with ExitStack() as own:  # one at a time
        (hold or own).enter_context(locked(req.outputs.work_dir / f"{scope}.lock", waiting))
        return _build_dev(req, reporter, runner, check_in_tests)


def _build_dev(
    req: BuildRequest, reporter: Reporter, runner: Runner, check_in_tests: bool
) -> DevBuild:
    project, variant, scope, log = req.project, req.variant, req.variant.name, req.log
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(req.log_header().replace("kernelwheel build", "kernelwheel dev", 1))
    prepared = prepare_environment(req, reporter, runner)
    env = prepared.env
    namespace = dev_namespace(project, variant)
    with step(reporter, scope, "compile", log=log) as detail:
        compiled = compile_extension(req, prepared, namespace, runner, incremental=True)
        detail.append(compiled.cache)
    for note in compiled.notes:  # as build shows them: code left out, kernels passed over
        reporter.info(scope, note)
    if (left_out := left_out_note(project)) is not None:
        reporter.info(scope, left_out)
    for warning in compiled.warnings:
        reporter.info(scope, f"warning: {warning}")
    so_path = compiled.shared_object
    digest = sha256_remembered(so_path, req.outputs.work_dir / f"{variant.name}.so.sha256")
    # A shared object that loaded before is not loaded again: an unchanged project's run costs
    # no torch import. One that failed is checked on every run until it loads.
    loaded = (req.outputs.work_dir / f"{variant.name}.loaded", digest)
    deferred = load_checked(
        req,
        env.python,
        so_path,
        namespace,
        reporter,
        runner,
        loaded=loaded,
        defer=check_in_tests,
    )
    folder = req.outputs.work_dir
    stamp = BuildStamp(
        dist_name=project.name,
        version=full_version(req.version, variant, req.outputs.local_version_style),
        variant=variant,
        dev_of=os.fspath(project.root),
    )
    with step(reporter, scope, "package") as detail:
        site = _lay_out_site(dev_site(folder, variant), project, namespace, stamp, so_path, digest)
        major = Version(req.version).major
        hub = _lay_out_hub(
            folder / "hub", project, variant, namespace, site / project.package, major
        )
        detail.append(str(site / project.package))
    if deferred is not None:  # the file the package imports: loaded twice it would register twice
        copy = site / project.package / f"{namespace}.abi3.so"
        deferred = replace(deferred, shared_object=copy)
    return DevBuild(variant, folder, site, hub, env.python, deferred)


def _lay_out_site(
    site: Path,
    project: KernelProject,
    namespace: str,
    stamp: BuildStamp,
    so_path: Path,
    digest: str,
) -> Path:
    """``site/<package>/``: links to the package's files, ``_ops.py`` and a copy of the shared
    object (swapped in by rename: a Python that loaded the last one keeps its file) whose
    ``digest`` is kept beside ``site``. Only what changed is updated: ``site`` itself stays
    untouched, so the interpreter whose ``sys.path`` holds it keeps its cached probe
    (compat/probe_cache watches those folders)."""
    package = site / project.package
    package.mkdir(parents=True, exist_ok=True)
    links = {
        rel.split("/", 1)[1]: (project.package_dir / rel.split("/", 1)[1]).resolve()
        for rel in package_files(project)
    }
    shared = f"{namespace}.abi3.so"
    # the folders the links lie in: a subpackage the project no longer has goes with its
    # folder (left, even empty, `import <package>.<sub>` finds it there and not in the wheel)
    folders = {parent.as_posix() for name in links for parent in Path(name).parents}
    for path in sorted(package.rglob("*"), reverse=True):  # what the project no longer has
        name = path.relative_to(package).as_posix()
        if "__pycache__" in path.parts:
            continue
        if path.is_symlink():  # kept while the project has it (is_file would follow it)
            if name not in links:
                path.unlink()
        elif path.is_file() and name not in ("_ops.py", shared):
            path.unlink()
        elif path.is_dir() and name not in folders:
            shutil.rmtree(path)
    for name, target in links.items():
        dest = package / name
        if dest.is_symlink() and dest.readlink() == target:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)
        dest.symlink_to(target)
    write_if_changed(package / "_ops.py", codegen.ops_py(namespace, stamp))
    copied = site.with_name(f"{site.name}-so.sha256")
    if not (package / shared).is_file() or not _holds(copied, digest):
        atomic_copy(so_path, package / shared)
        atomic_write(copied, digest)
    return site


def _holds(record: Path, text: str) -> bool:
    return record.is_file() and record.read_text() == text


def _lay_out_hub(
    hub: Path, project: KernelProject, variant: Variant, namespace: str, package: Path, major: int
) -> Path:
    """``hub/build/<variant>/``: the package's files (copies, with their digest) and a
    metadata.json marked as a dev build, as ``kernels`` loads a local kernel."""
    # Imported here: the hub package pulls in huggingface_hub, which a dev build needs only now.
    from ..hub.export import kernel_metadata, write_variant
    from ..hub.metadata import DEV_BUILD_MARK, METADATA_JSON, Provenance

    paths = [
        path
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    ]
    # The files' names and stats (links followed): the same, the layout is left alone without
    # reading them (the shared object alone may be hundreds of MB).
    stamp = json.dumps(
        [[str(p.relative_to(package)), *_stat(p)] for p in paths] + [__version__, namespace]
    )
    record = hub.with_name(f"hub-{variant.name}.stamp")  # beside the layout, not in it
    if _holds(record, stamp) and (hub / "build" / variant.name / METADATA_JSON).is_file():
        return hub
    # By path: hashed and copied in chunks, never read whole.
    files: dict[str, Member] = {str(path.relative_to(package)): path for path in paths}
    meta = kernel_metadata(project, variant, namespace, (), major=major, files=files)
    builder = f"kernelwheel {__version__} {DEV_BUILD_MARK}"
    meta = replace(meta, provenance=Provenance(builder_version=builder))
    # its metadata.json names every file's digest: the same one, the same folder, left alone
    if not _holds(hub / "build" / variant.name / METADATA_JSON, meta.to_json()):
        # the shared object the site's package loads, hard-linked: one process importing both
        # (a test's ``import`` and its ``kernels.get_kernel``) maps it once, so its ops register
        # once (two copies would register the namespace twice: torch aborts)
        write_variant(hub, variant, files, meta, linked={f"{namespace}.abi3.so"})
    atomic_write(record, stamp)
    return hub


def _stat(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


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
    """Make ``build`` importable by ``python`` without pip: ``kernelwheel-dev-<package>.pth``
    in its site-packages names the dev build's ``site`` folder. Not written where that torch is
    not the variant's (the import guard would refuse the build there)."""
    needs = _needs(project, build.variant)
    probe: list[str | Path] = [python, "-c", _TARGET_PROBE, project.name, *(r.name for r in needs)]
    try:
        proc = runner.captured(probe, timeout=120)
        purelib, torch, installed, *found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, CommandTimeout, ValueError, IndexError):
        return Linked(python, None, skipped=f"{python} did not answer")
    missing = _missing(needs, found[0] if found else [])
    pth = Path(purelib) / f"kernelwheel-dev-{project.package}.pth"
    if (wanted := torch_mismatch(build.variant, torch)) is not None:  # the import guard's rule
        have = f"torch {torch}" if torch else "no torch"
        skipped = f"it has {have}, the variant is for {wanted}"
        return Linked(python, None, skipped=skipped, stale=_stale_link(pth, torch), missing=missing)
    line = f"{os.fspath(build.site)}\n"
    if not _holds(pth, line):  # unchanged: its folder's probe stays valid
        with kept_across(python, cache_dir):  # and changed: it stays valid too
            atomic_write(pth, line)
    return Linked(python, pth, shadowed_by=installed or None, missing=missing)


def _needs(project: KernelProject, variant: Variant) -> list[Requirement]:
    """The requirements of ``variant``'s wheel besides torch that apply here (no extra)."""
    needs = [Requirement(r) for r in requirements(project, variant)]
    return [r for r in needs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _missing(needs: list[Requirement], versions: list[str]) -> tuple[str, ...]:
    """Of ``needs``, those whose version (``versions``, in order; "": not installed) is
    missing or excluded."""
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
    probe: list[str | Path] = [python, "-c", _TARGET_PROBE, project.name, *(r.name for r in needs)]
    try:
        proc = runner.captured(probe, timeout=120)
        *_, found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, CommandTimeout, ValueError, IndexError):
        return ()
    return _missing(needs, found)


def _stale_link(pth: Path, torch: str) -> str | None:
    """What ``pth``, an earlier run's link, names when that dev build is of a variant the
    torch version ``torch`` refuses at import (the environment's torch changed since): the
    package's import there fails until it is built again or the link removed."""
    try:
        site = Path(pth.read_text().strip())
    except (OSError, UnicodeDecodeError):
        return None
    linked = parse_variant(site.name)
    if linked is None or (wanted := torch_mismatch(linked, torch)) is None:
        return None
    return f"{pth} links the dev build for {wanted} ({linked.name})"


def pytest_arguments(
    project: KernelProject, build: DevBuild, given: Sequence[str] = (), cwd: Path | None = None
) -> list[str]:
    """pytest's arguments for the project's ``tests/``, the project its rootdir, with its own
    configuration file or an empty one (none of a folder around it applies); the cache goes to
    the dev folder, not the project. ``given``: the author's own (after ``--``), last; a test
    file or id among them (``tests/test_kx.py::test_one``, relative to ``cwd``, the folder the
    author ran kernelwheel in) runs instead of the whole ``tests/``."""
    own, chose_tests = _given_tests(given, cwd or project.root)
    found = (project.root / name for name in _PYTEST_CONFIGS)
    config = next((path for path in found if _configures_pytest(path)), None)
    if config is None:
        config = build.folder / "pytest.ini"
        if not config.is_file() or config.read_text() != _PYTEST_INI:  # an older run's too
            atomic_write(config, _PYTEST_INI)
    return [
        "--rootdir",
        os.fspath(project.root),
        "-c",
        os.fspath(config),
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
    """The author's pytest words, each test path made absolute from ``cwd`` (pytest runs in
    the project's root), and whether one names tests: a word that is no option nor an
    option's value and names a file or folder, or ends in ``.py`` or holds ``::``."""
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
    """Whether ``path`` is a pytest configuration file, by pytest's own rules for each name."""
    if not path.is_file():
        return False
    section = _PYTEST_CONFIGS[path.name]
    return not section or section in path.read_text(errors="replace")
