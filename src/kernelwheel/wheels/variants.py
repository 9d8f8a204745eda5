"""Wheel variants (PEP 825): a kernel's CUDA builds as variant wheels with their
``variant.json`` and the index's ``<name>-<version>-variants.json``, both written by variantlib
(docs/install.md, "Wheel variants"); pip sees no wheel at all, never a wrong one."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version
from variantlib.api import VariantDescription, VariantProperty, make_variant_dist_info
from variantlib.errors import ValidationError
from variantlib.models.variant_info import ProviderInfo, VariantInfo
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from ..errors import WheelError
from ..model.variant import Backend, BackendKind, TorchVersion
from .fatbin import sm_archs
from .reader import escape_name
from .writer import rewrite_wheel

NAMESPACE = "nvidia"
ABI_DEPENDENCY = "abi_dependency"  # variantlib's VARIANT_ABI_DEPENDENCY_NAMESPACE
# How variant.json names the NVIDIA provider: uv matches its built-in provider by this plugin
# API; other installers install the requirement (the provider's own package) to run it.
_PROVIDER = ProviderInfo(
    requires=["nvidia-variant-provider>=0.0.1,<1.0.0"],
    plugin_api="nvidia_variant_provider.plugin:NvidiaVariantPlugin",
)
_INFO = VariantInfo(namespace_priorities=[NAMESPACE], providers={NAMESPACE: _PROVIDER})
# abi_dependency needs no plugin (the installer reads the environment), but variantlib's reader
# wants every namespace listed with a provider: the draft's ``builtin`` kind, ranked last (where
# variantlib's resolver puts the namespace).
_TORCH_INFO = VariantInfo(
    namespace_priorities=[NAMESPACE, ABI_DEPENDENCY],
    providers={NAMESPACE: _PROVIDER, ABI_DEPENDENCY: ProviderInfo(builtin=ABI_DEPENDENCY)},
)


def cuda_properties(backend: Backend) -> list[tuple[str, str]]:
    """(feature, value) of a CUDA flavour's bounds: ``cu126`` -> lower 12.6, upper 13."""
    if backend.kind is not BackendKind.CUDA or backend.version is None:
        raise WheelError(f"{backend.token} is not a CUDA flavour", hint="only CUDA builds")
    major, minor = backend.version
    return [
        ("cuda_version_lower_bound", f"{major}.{minor}"),
        ("cuda_version_upper_bound", f"{major + 1}"),
    ]


def torch_properties(torch: TorchVersion, backend: Backend) -> list[tuple[str, str, str]]:
    """The ``abi_dependency`` properties of a per-torch build: its torch series and, for CUDA,
    the CUDA runtime the torch itself was built with (see the module docstring)."""
    props = [(ABI_DEPENDENCY, "torch", f"{torch.major}.{torch.minor}")]
    if backend.kind is BackendKind.CUDA and backend.version is not None:
        major, minor = backend.version
        # NVIDIA's CUDA runtime distribution a CUDA ``major`` torch wheel pins, normalised as
        # variantlib names installed distributions: ``nvidia-cuda-runtime-cu12`` up to CUDA 12,
        # ``nvidia-cuda-runtime`` from CUDA 13 (one name, the major in the version).
        runtime = "nvidia_cuda_runtime" if major >= 13 else f"nvidia_cuda_runtime_cu{major}"
        props.append((ABI_DEPENDENCY, runtime, f"{major}.{minor}"))
    return props


@dataclass(frozen=True)
class VariantBuild:
    """One variant wheel written: its file, label and the wheel it came from."""

    path: Path
    source: str  # the kernel wheel's file name
    label: str
    dist_info_json: str  # the variant.json it carries


def _sm_values(zf: zipfile.ZipFile) -> list[str]:
    values: set[str] = set()
    for info in zf.infolist():
        if info.filename.endswith(".so") or ".so." in info.filename:
            with zf.open(info) as fh:
                real, virtual = sm_archs(fh)
            values |= {f"{a}_real" for a in real} | {f"{a}_virtual" for a in virtual}
    return sorted(values, key=lambda v: (int(v.split("_")[0]), v))


def write_variant_wheel(
    source: Path, out_dir: Path, backend: Backend, torch: TorchVersion | None = None
) -> VariantBuild:
    """The variant wheel of the kernel wheel ``source`` (already through the record rule) in
    ``out_dir``: the public version, the label, ``variant.json`` added, every other member
    copied as it is. ``torch``: a torch-dimension variant, where a CPU build is one too."""
    # ``torch214_cu130``: the label of a torch-dimension variant
    label = backend.token if torch is None else f"torch{torch.major}{torch.minor}_{backend.token}"
    name_part, version_text, *tags = source.name[: -len(".whl")].split("-")
    new_version = Version(version_text).public
    new_dist = f"{escape_name(name_part)}-{new_version}.dist-info"
    target = out_dir / f"{escape_name(name_part)}-{new_version}-{'-'.join(tags)}-{label}.whl"
    with zipfile.ZipFile(source) as zin:
        # The one .dist-info folder (the record rule has checked there is exactly one).
        old_dist = next(n.split("/")[0] for n in zin.namelist() if ".dist-info/" in n)
        properties = _properties(zin, backend, torch)
        vdesc = VariantDescription([VariantProperty(*p) for p in properties], label=label)
        try:
            info = _INFO if torch is None else _TORCH_INFO
            variant_json = make_variant_dist_info(vdesc, variant_info=info)
        except ValidationError as exc:
            raise WheelError(f"{source.name}: no valid variant.json ({exc})") from None
        metadata = _with_version(zin.read(f"{old_dist}/METADATA"), new_version, source.name)
    rewrite_wheel(
        source,
        target,
        dist_info=new_dist,
        replace={f"{new_dist}/METADATA": metadata},
        add={f"{new_dist}/variant.json": variant_json.encode()},
    )
    return VariantBuild(target, source.name, label, variant_json)


def _properties(
    zin: zipfile.ZipFile, backend: Backend, torch: TorchVersion | None
) -> list[tuple[str, str, str]]:
    props = [] if torch is None else torch_properties(torch, backend)
    if torch is None or backend.kind is BackendKind.CUDA:
        props += [(NAMESPACE, f, v) for f, v in cuda_properties(backend)]
        props += [(NAMESPACE, "sm_arch", v) for v in _sm_values(zin)]
    return props


def _with_version(metadata: bytes, version: str, where: str) -> bytes:
    lines = metadata.decode("utf-8").split("\n")
    for i, line in enumerate(lines):
        if not line:
            break  # the headers end at the first empty line
        if line.startswith("Version:"):
            lines[i] = f"Version: {version}"
            return "\n".join(lines).encode("utf-8")
    raise WheelError(f"{where}: METADATA has no Version header", hint="rebuild the wheel")


def variants_json(builds: Sequence[VariantBuild]) -> str:
    """``<name>-<version>-variants.json`` for the variant wheels of one release: every label
    with its properties, merged (and checked consistent) by variantlib."""
    merged: VariantsJson | None = None
    for build in builds:
        info = VariantDistInfo(build.dist_info_json, build.label)
        if merged is None:
            merged = VariantsJson(info)
        try:
            merged.merge(info)
        except ValidationError as exc:
            raise WheelError(
                f"{build.path.name}: its variant {build.label} clashes with another wheel of "
                f"the release ({exc})",
                hint="one label must mean the same properties in every wheel of a release",
            ) from None
    assert merged is not None
    return str(merged.to_str()) + "\n"
