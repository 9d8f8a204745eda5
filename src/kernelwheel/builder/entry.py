"""The one entry of every build kind: :func:`build_and_export` takes a request and a reporter
(and the process runner), runs the builder of the request's kind, and writes the Hub layout.

The kind was decided when the request was made (:class:`~.request.BuildKind`); the builders
share their steps (:mod:`.steps`) and never import each other.
"""

from __future__ import annotations

from .._util import RUNNER, Runner, locked
from ..log import Reporter, step
from .noarch import build_noarch
from .pipeline import build_variant
from .request import BuildKind, BuildRequest, BuiltWheel
from .tvm_ffi import build_tvm_ffi_variant

__all__ = ["build_and_export"]

_BUILDERS = {
    BuildKind.TORCH: build_variant,
    BuildKind.TVM_FFI: build_tvm_ffi_variant,
    BuildKind.NOARCH: build_noarch,
}


def build_and_export(req: BuildRequest, reporter: Reporter, runner: Runner = RUNNER) -> BuiltWheel:
    """Build ``req`` (serialised with other processes building the same variant: they share its
    work folder), every command through ``runner``, and with the request's ``hub_layout`` also
    write it as a Hub kernel tree there (a noarch build writes one per variant it serves)."""
    with locked(req.work_dir / f"{req.variant.name}.lock"):
        wheel = _BUILDERS[req.kind](req, reporter, runner)
    if req.hub_layout is not None and req.kind is not BuildKind.NOARCH:
        # Imported here: the hub package pulls in huggingface_hub, which builds do not need.
        from ..hub.export import export_variant

        with step(reporter, req.variant.name, "hub layout") as detail:
            folder = export_variant(
                wheel.path,
                req.project,
                wheel.variant,
                wheel.namespace,
                req.hub_layout,
                capabilities=wheel.capabilities,
                git=req.git,
            )
            detail.append(str(folder))
    return wheel
