"""The one entry of every build kind: the builder of the request's kind, then the Hub layout."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .._util import RUNNER, Runner, locked
from ..log import Reporter, step
from .noarch import backend_namespace, build_noarch
from .pipeline import build_variant
from .request import BuildKind, BuildRequest, BuiltWheel
from .steps import full_version
from .tvm_ffi import build_tvm_ffi_variant

_BUILDERS = {
    BuildKind.TORCH: build_variant,
    BuildKind.TVM_FFI: build_tvm_ffi_variant,
    BuildKind.NOARCH: build_noarch,
}


def build_and_export(req: BuildRequest, reporter: Reporter, runner: Runner = RUNNER) -> BuiltWheel:
    """Build ``req`` (locked: builds of one variant share its work folder) and write its Hub
    layout; an interrupt takes the wheel it had put in the output folder back out."""
    before = _variant_wheels(req)
    try:
        lock = req.outputs.work_dir / f"{req.variant.name}.lock"
        with locked(lock, partial(_waiting, req, reporter)) as dead:
            if dead is not None:  # killed outright: what it started was stopped
                reporter.info(req.variant.name, f"{dead.describe()}; the build starts afresh")
            wheel = _BUILDERS[req.kind](req, reporter, runner)
        _export(req, reporter, wheel)
    except KeyboardInterrupt:  # Terminated (SIGTERM) is one
        # the repair step published it before the check and the Hub layout ended; a wheel of
        # that name from before the run stays (wheels are only ever replaced whole)
        for path in _variant_wheels(req) - before:
            path.unlink(missing_ok=True)
        raise
    return wheel


def _waiting(req: BuildRequest, reporter: Reporter, holder: str) -> None:
    reporter.info(
        req.variant.name,
        f"waiting for another kernelwheel build ({holder}) of this variant to finish with its "
        f"work folder {req.outputs.work_dir}",
    )


def _export(req: BuildRequest, reporter: Reporter, wheel: BuiltWheel) -> None:
    """The Hub layout's ``build/<variant>/`` of every variant the wheel serves."""
    if req.outputs.hub_layout is None:
        return
    # Imported here: the hub package pulls in huggingface_hub, which builds do not need.
    from ..hub.export import export_variant

    git = None if req.kind is BuildKind.NOARCH else req.git  # a noarch layout names no commit
    for variant in req.serves or (req.variant,):
        with step(reporter, variant.name, "hub layout") as detail:
            namespace = backend_namespace(wheel.namespace, variant)
            folder = export_variant(
                wheel.path,
                req.project,
                variant,
                namespace,
                req.outputs.hub_layout,
                capabilities=wheel.capabilities,
                git=git,
            )
            detail.append(str(folder))


def _variant_wheels(req: BuildRequest) -> set[Path]:
    """The output folder's wheels of ``req``'s project at its variant's version."""
    name = canonicalize_name(req.project.name)
    noarch = req.kind is BuildKind.NOARCH
    style = req.outputs.local_version_style
    version = Version(req.version if noarch else full_version(req.version, req.variant, style))
    found: set[Path] = set()
    for path in req.outputs.out_dir.glob("*.whl"):  # none where the folder is not yet
        try:
            dist, ver, _, _ = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if dist == name and ver == version:
            found.add(path)
    return found
