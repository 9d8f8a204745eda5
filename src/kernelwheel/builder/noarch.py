"""Build a pure-Python kernel project (``[torch-noarch]``, ``universal = true``, edition 3's no
framework section) into ONE ``py3-none-any`` wheel for every ``torch-<backend>`` variant: each
backend's python-depends an extra, no local version: fit for PyPI (docs/noarch-and-tvm-ffi.md)."""

from __future__ import annotations

from collections.abc import Sequence

from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.version import Version

from .._util import RUNNER, Runner, output_dir
from ..errors import ProjectError
from ..log import Reporter, step
from ..model.project import KernelProject
from ..model.variant import Variant
from ..wheels import WheelSpec, write_wheel
from . import codegen
from ._load_check import syntax_errors
from .load_check import refuse_syntax
from .request import BuildRequest, BuiltWheel
from .steps import package_files, package_notes
from .wheelmeta import requirements, with_metadata

NOARCH_TAG = Tag("py3", "none", "any")
REQUIRES_PYTHON = ">=3.9"  # what kernel-builder's noarch packages declare
BACKEND = "<backend>"  # in the wheel's namespace: the backend its _ops.py imports for
# The build id hashes the project's files with this name: the wheel serves every backend.
_ID_VARIANT = Variant(None, None, None, None, None)


def torch_requirement(project: KernelProject) -> str:
    """``torch``, within the ``[torch]`` minver/maxver an edition-3 noarch project may give
    (bounds are inclusive at their own precision: maxver 2.9 admits 2.9.1)."""
    specs: list[str] = []
    section = project.torch
    if section is not None and section.minver is not None:
        specs.append(f">={section.minver}")
    if section is not None and section.maxver is not None:
        release = section.maxver.release
        if len(release) >= 3:
            specs.append(f"<={section.maxver}")
        else:
            major, minor = (*release, 0)[:2]
            specs.append(f"<{major}.{minor + 1}")
    return "torch" + ",".join(specs)


def _with_extra(requirement: str, extra: str) -> str:
    """``requirement`` installed only with ``extra``: its own marker, if any, still applies."""
    req = Requirement(requirement)
    marker = f'extra == "{extra}"'
    if req.marker is not None:
        marker = f"({req.marker}) and {marker}"
    req.marker = None
    return f"{req}; {marker}"


def noarch_requirements(
    project: KernelProject, variants: Sequence[Variant]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(Requires-Dist, Provides-Extra): what all share for everyone, each backend's own under
    its extra; every backend gets one, even empty, so ``kernel[<backend>]`` always exists."""
    shared = requirements(project, _ID_VARIANT)
    requires = [torch_requirement(project), *shared]
    extras: list[str] = []
    for variant in variants:
        # the build.toml backend (general.backends) the variant stands for
        backend = variant.backend.kind.value if variant.backend is not None else None
        if backend is None or backend in extras:
            continue
        extras.append(backend)
        requires += [
            _with_extra(r, backend) for r in requirements(project, variant) if r not in shared
        ]
    return tuple(dict.fromkeys(requires)), tuple(extras)


def build_noarch(req: BuildRequest, reporter: Reporter, runner: Runner = RUNNER) -> BuiltWheel:
    """The one wheel of ``req``'s pure-Python project for every noarch variant it serves."""
    del runner  # the same signature as every builder: nothing is compiled
    project, variants = req.project, req.serves or (req.variant,)
    version, out_dir = req.version, req.outputs.out_dir
    if not project.noarch or any(not v.noarch for v in variants):
        raise ProjectError(
            f"{project.name} is not a pure-Python project (or no noarch variant is selected)",
            file=project.build_toml,
            hint="build compiled projects variant by variant; select torch-<backend> variants "
            "of a [torch-noarch] project",
        )
    if Version(version).local is not None:
        raise ProjectError(
            f"version {version!r} has a local part: the pure-Python wheel serves every torch "
            "and backend, and carries none (so it can be published to PyPI)",
            file=project.build_toml,
            hint=f"pass --version {Version(version).public}",
        )
    output_dir(out_dir, "--output-dir")
    scope = ",".join(v.name for v in variants)
    with step(reporter, scope, "codegen") as detail:
        bid = codegen.build_id(project, _ID_VARIANT)
        # made per backend at import (_ops.py): named here as a pattern
        namespace = f"_{project.package}_{BACKEND}_{bid}"
        detail.append(namespace)
    for note in package_notes(project):
        reporter.info(scope, note)
    with step(reporter, scope, "wheel") as detail:
        # no build environment here: in kernelwheel's own Python's grammar
        refuse_syntax(syntax_errors(str(project.package_dir)), project.root)
        files = package_files(project)
        files[f"{project.package}/_ops.py"] = codegen.noarch_ops_py(project.package, bid).encode()
        requires, extras = noarch_requirements(project, variants)
        backends = ", ".join(extras) or "any"
        spec = WheelSpec(
            name=project.name,
            version=version,
            tag=NOARCH_TAG,
            files=files,
            requires_dist=requires,
            requires_python=REQUIRES_PYTHON,
            provides_extra=extras,
            summary=f"{project.name} PyTorch kernel (pure Python, for {backends} backend), built "
            "by kernelwheel",
        )
        variant = f"pure Python (py3-none-any; backends: {backends})"
        dirty = bool(req.git and req.git.dirty)
        path = write_wheel(with_metadata(spec, project, variant=variant, dirty=dirty), out_dir)
        detail.append(path.name)
    return BuiltWheel(req.variant, path, namespace, req.log)


def backend_namespace(namespace: str, variant: Variant) -> str:
    """A noarch ``namespace`` pattern for ``variant``'s backend (a compiled one: unchanged)."""
    backend = variant.backend.token if variant.backend is not None else "universal"
    return namespace.replace(BACKEND, backend)
