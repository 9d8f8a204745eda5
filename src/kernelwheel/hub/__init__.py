"""Hub kernel repos -> wheels (``kernelwheel to-wheel``), and builds -> Hub kernel repos
(``build --hub-layout``, ``kernelwheel upload``); each module's part: docs/architecture.md."""

from .gitsource import GitSource
from .hubsource import HubSettings, HubSource, repo_id_problem
from .layout import KernelMetadata, Layout, VariantPlan
from .revision import Ref, RefKind, RequestKind, Resolution, VersionRequest, choose_ref
from .source import FileReader, RepoFile, RepoSource
from .towheel import (
    AbiCheck,
    AbiVerdict,
    Converted,
    Rejected,
    ToWheelRequest,
    ToWheelResult,
    open_source,
    resolve,
    to_wheels,
)

__all__ = [
    "AbiCheck",
    "AbiVerdict",
    "Converted",
    "FileReader",
    "GitSource",
    "HubSettings",
    "HubSource",
    "KernelMetadata",
    "Layout",
    "Ref",
    "RefKind",
    "Rejected",
    "RepoFile",
    "RepoSource",
    "Resolution",
    "RequestKind",
    "ToWheelRequest",
    "ToWheelResult",
    "VariantPlan",
    "VersionRequest",
    "choose_ref",
    "open_source",
    "repo_id_problem",
    "resolve",
    "to_wheels",
]
