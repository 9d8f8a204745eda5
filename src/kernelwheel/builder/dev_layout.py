"""What every kind's dev build (docs/dev.md) is and where it lies: the dev folder
``<cache>/dev/<package>-<digest of the project's path>/``, its importable ``site/<package>/`` and
its Hub layout ``hub/build/<variant>/`` marked ``dev`` (``kernelwheel upload`` refuses it)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement
from packaging.version import Version

from .. import __version__
from .._util import Runner, atomic_copy, atomic_write, sha256_remembered, write_if_changed
from ..log import Reporter, step
from ..model.project import BUILD_TOML, KernelProject
from ..model.variant import Variant
from ..wheels import Member
from . import codegen
from .load_check import DeferredLoad
from .request import BuildRequest
from .steps import Compiled, load_checked, package_files, package_notes


@dataclass(frozen=True)
class DevBuild:
    variant: Variant
    folder: Path  # <cache>/dev/<package>-<digest>
    site: Path  # on sys.path: holds <package>/
    hub: Path  # LOCAL_KERNELS's path: holds build/<variant>/
    python: Path | None  # the build environment's, which loads it (None: a pure-Python build)
    deferred: DeferredLoad | None = None  # the load check left to the tests, when due
    serves: tuple[Variant, ...] = ()  # a pure-Python build's Hub variants (): ``variant``
    runtime: str | None = None  # what importing it needs (None: the variant's torch)

    @property
    def name(self) -> str:
        return ", ".join(v.name for v in self.serves or (self.variant,))

    @property
    def runtime_name(self) -> str:
        """What an interpreter needs to import the build, by name."""
        return Requirement(self.runtime).name if self.runtime else "torch"

    @property
    def wanted(self) -> str:
        """The same, with its version."""
        return self.runtime or "this variant's torch"


@dataclass(frozen=True)
class Shared:
    """The compiled object of a dev build: the file, its name in the package, its sha256."""

    path: Path
    name: str
    digest: str


def dev_folder(cache_dir: Path, project: KernelProject) -> Path:
    """The project's dev folder in kernelwheel's cache (one per project folder)."""
    digest = hashlib.sha256(str(project.root.resolve()).encode()).hexdigest()[:12]
    return cache_dir / "dev" / f"{project.package}-{digest}"


def dev_site(folder: Path, variant: Variant) -> Path:
    """``variant``'s folder on ``sys.path``: one per variant, so another variant's dev build
    never replaces the one an interpreter was linked to."""
    return folder / "site" / variant.name


def dev_namespace(project: KernelProject, variant: Variant) -> str:
    """The fixed ops namespace of ``variant``'s dev builds: an edit recompiles only its unit."""
    return codegen.ops_namespace(project.package, dev_id(project, variant))


def dev_id(project: KernelProject, variant: Variant) -> str:
    """The build id of the project's dev builds of ``variant`` (``dev`` and a digest)."""
    digest = hashlib.sha256(f"{project.root.resolve()}\0{variant.name}".encode()).hexdigest()
    return "dev" + digest[:10]


def lay_out_site(site: Path, project: KernelProject, ops_py: str, shared: Shared | None) -> Path:
    """``site/<package>/``: links to the package's files (an edit is live), ``_ops.py`` and a
    copy of the ``shared`` object (swapped by rename: a Python that loaded the last keeps it);
    no bytecode (:func:`block_bytecode`).
    Only what changed is updated, ``site`` itself untouched: an interpreter's cached probe
    (compat/probe_cache watches its ``sys.path``) stays valid."""
    package = site / project.package
    package.mkdir(parents=True, exist_ok=True)
    # what the build writes is no link: an _ops.py of the project's own (kernel-builder writes
    # one into torch-ext/) is replaced, as in the wheel, never written through
    kept = ("_ops.py", *((shared.name,) if shared is not None else ()))
    links = {
        name: (project.package_dir / name).resolve()
        for rel in package_files(project)
        if (name := rel.split("/", 1)[1]) not in kept
    }
    # a folder the project no longer has goes whole, its __pycache__ too: left (even empty) it
    # would still import, as a namespace package
    folders = {parent.as_posix() for name in links for parent in PurePosixPath(name).parents}
    for path in sorted(package.rglob("*"), reverse=True):  # what the project no longer has
        name = path.relative_to(package).as_posix()
        if "__pycache__" in path.relative_to(package).parts:
            continue
        if path.is_symlink():  # kept while the project has it (is_file would follow it)
            if name not in links:
                path.unlink()
        elif path.is_dir():
            if name not in folders:
                shutil.rmtree(path)
        elif name not in kept:
            path.unlink()
    for name, target in links.items():
        dest = package / name
        if dest.is_symlink() and dest.readlink() == target:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)
        dest.symlink_to(target)
    write_if_changed(package / "_ops.py", ops_py)
    block_bytecode(package / folder for folder in {".", *folders})
    if shared is not None:
        copied = site.with_name(f"{site.name}-so.sha256")
        if not (package / shared.name).is_file() or not holds(copied, shared.digest):
            atomic_copy(shared.path, package / shared.name)
            atomic_write(copied, shared.digest)
    return site


# in each folder of the site, a file where Python would make its bytecode folder: a .pyc it
# wrote would record the source's mtime in whole seconds, so a save of the same size in that
# second (a constant changed, a ``git checkout``) imported the old code; the files compile anew
NO_BYTECODE = b"kernelwheel dev: no bytecode here, so a save is never imported stale\n"


def block_bytecode(folders: Iterable[Path]) -> None:
    """Make each of ``folders`` hold a ``__pycache__`` file (an older run's folder goes)."""
    for folder in folders:
        cache = folder / "__pycache__"
        if cache.is_dir() and not cache.is_symlink():
            shutil.rmtree(cache)
        if not cache.is_file():
            cache.write_bytes(NO_BYTECODE)


def holds(record: Path, text: str) -> bool:
    return record.is_file() and record.read_text() == text


def lay_out_hub(
    hub: Path,
    project: KernelProject,
    variant: Variant,
    namespace: str,
    package: Path,
    major: int,
    shared: str | None,
) -> Path:
    """``hub/build/<variant>/``: the package's files (the ``shared`` object hard-linked) and a
    metadata.json marked as a dev build, as ``kernels`` loads a local kernel."""
    # Imported here: the hub package pulls in huggingface_hub, which a dev build needs only now.
    from ..hub.export import kernel_metadata, write_variant
    from ..hub.metadata import DEV_BUILD_MARK, METADATA_JSON, Provenance

    paths = [
        path
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    ]
    # The files' names and stats: the same, the layout is left alone unread (the shared object
    # may be hundreds of MB); and build.toml's digest (a license edit changes no file).
    toml = hashlib.sha256((project.root / BUILD_TOML).read_bytes()).hexdigest()
    stamp = json.dumps(
        [[str(p.relative_to(package)), *_stat(p)] for p in paths]
        + [__version__, namespace, major, toml]
    )
    record = hub.with_name(f"hub-{variant.name}.stamp")  # beside the layout, not in it
    if holds(record, stamp) and (hub / "build" / variant.name / METADATA_JSON).is_file():
        return hub
    # By path: hashed and copied in chunks, never read whole.
    files: dict[str, Member] = {str(path.relative_to(package)): path for path in paths}
    meta = kernel_metadata(project, variant, namespace, (), major=major, files=files)
    builder = f"kernelwheel {__version__} {DEV_BUILD_MARK}"
    meta = replace(meta, provenance=Provenance(builder_version=builder))
    # its metadata.json names every file's digest: the same one, the same folder, left alone
    if not holds(hub / "build" / variant.name / METADATA_JSON, meta.to_json()):
        # the site's shared object hard-linked: a process importing both (``import`` and
        # ``kernels.get_kernel``) maps it once (two copies register twice: torch aborts)
        write_variant(hub, variant, files, meta, linked={shared} if shared else set())
    atomic_write(record, stamp)
    return hub


def drop_other_variants(hub: Path, served: set[str]) -> None:
    """Remove the Hub folders of variants no longer served (a backend dropped from build.toml),
    which ``kernels`` would still load."""
    for folder in (hub / "build").iterdir():
        if folder.name not in served and not folder.name.startswith("."):
            hub.with_name(f"hub-{folder.name}.stamp").unlink(missing_ok=True)
            shutil.rmtree(folder)


def _stat(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def open_dev_log(req: BuildRequest) -> Path:
    req.log.parent.mkdir(parents=True, exist_ok=True)
    req.log.write_text(req.log_header().replace("kernelwheel build", "kernelwheel dev", 1))
    return req.log


def compile_and_lay_out(
    req: BuildRequest,
    reporter: Reporter,
    runner: Runner,
    python: Path,
    compile: Callable[[], Compiled],
    namespace: str,
    ops_py: Callable[[], str],
    so_suffix: str,
    *,
    defer: bool = False,
) -> tuple[Path, Path, DeferredLoad | None]:
    """A compiled kind's dev build: compiled, load-checked, laid out (``ops_py``: its
    ``_ops.py``); the site, the Hub layout and the check left to the tests."""
    project, variant, scope = req.project, req.variant, req.variant.name
    folder = req.outputs.work_dir
    with step(reporter, scope, "compile", log=req.log) as detail:
        compiled = compile()
        detail.append(compiled.cache)
    # what ``build`` shows after its compile; each unit's warnings replayed until they are gone
    for note in compiled.notes:
        reporter.info(scope, note)
    for note in package_notes(project):
        reporter.info(scope, note)
    for warning in compiled.warnings:
        reporter.info(scope, f"warning: {warning}")
    so_path = compiled.shared_object
    digest = sha256_remembered(so_path, folder / f"{variant.name}.so.sha256")
    # A shared object that loaded before is not loaded again: an unchanged project's run costs
    # no torch import. One that failed is checked on every run until it loads.
    loaded = (folder / f"{variant.name}.loaded", digest)
    deferred = load_checked(
        req, python, so_path, namespace, reporter, runner, loaded=loaded, defer=defer
    )
    shared = Shared(so_path, f"{namespace}{so_suffix}", digest)
    with step(reporter, scope, "package") as detail:
        site = lay_out_site(dev_site(folder, variant), project, ops_py(), shared)
        package, major = site / project.package, Version(req.version).major
        hub = lay_out_hub(folder / "hub", project, variant, namespace, package, major, shared.name)
        detail.append(str(package))
    if deferred is not None:  # the file the package imports: loaded twice it would register twice
        deferred = replace(deferred, shared_object=package / shared.name)
    return site, hub, deferred
