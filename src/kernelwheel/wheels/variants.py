"""Wheel variants (PEP 825): the CUDA builds of a kernel as variant wheels an installer picks.

A kernel's CUDA builds differ only by CUDA flavour (``+torch2.14.cu126.cxx11``,
``+torch2.14.cu130.cxx11``...). As variant wheels they share one version (the public one,
``0.1.0``) and one file name but for a variant label, the flavour token
(``img2gray-0.1.0-cp310-abi3-manylinux_2_28_x86_64-cu126.whl``); each carries
``*.dist-info/variant.json`` with the NVIDIA provider's properties, and the index serves
``<name>-<version>-variants.json`` beside them. A variant-aware installer (uv 0.13.9 with
``--preview-features wheel-variants``, whose NVIDIA provider is built in) asks the provider what
the machine supports and installs the best fitting build; no kernelwheel is needed there.

The properties of a ``cuXY`` build, by the NVIDIA provider's definitions:

- ``nvidia :: cuda_version_lower_bound :: X.Y``: the driver must support CUDA X.Y or newer;
- ``nvidia :: cuda_version_upper_bound :: X+1``: and be older than CUDA X+1 (exclusive), the
  rule the kernels loader and ``kernelwheel install`` apply (a CUDA X build within major X);
- ``nvidia :: sm_arch :: NN_real`` / ``NN_virtual``: the GPU architectures the build's shared
  objects carry code for (their fatbins' cubins and PTX), when they carry any.

Among fitting builds the provider ranks the newest lower bound first, so a CUDA 13.2 driver gets
cu132 over cu130. Installers without variant support (pip) do not parse the file names (the
label is a seventh dash-separated part) and see no wheel: they install nothing, never a wrong
build. variantlib (the format's reference implementation) writes both JSON files.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version
from variantlib.api import VariantDescription, VariantProperty, make_variant_dist_info
from variantlib.errors import ValidationError
from variantlib.models.variant_info import ProviderInfo, VariantInfo
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from ..errors import WheelError
from ..model.variant import Backend, BackendKind
from .fatbin import sm_archs
from .reader import escape_name
from .writer import rewrite_wheel

__all__ = [
    "NAMESPACE",
    "VariantBuild",
    "cuda_properties",
    "variants_json",
    "write_variant_wheel",
]

NAMESPACE = "nvidia"
# How variant.json names the NVIDIA provider: uv matches its built-in provider by this plugin
# API; other installers install the requirement (the provider's own package) to run it.
_PROVIDER = ProviderInfo(
    requires=["nvidia-variant-provider>=0.0.1,<1.0.0"],
    plugin_api="nvidia_variant_provider.plugin:NvidiaVariantPlugin",
)
_INFO = VariantInfo(namespace_priorities=[NAMESPACE], providers={NAMESPACE: _PROVIDER})
_SHARED_OBJECT = (".so",)


def cuda_properties(backend: Backend) -> list[tuple[str, str]]:
    """(feature, value) of a CUDA flavour's bounds: ``cu126`` -> lower 12.6, upper 13."""
    if backend.kind is not BackendKind.CUDA or backend.version is None:
        raise WheelError(f"{backend.token} is not a CUDA flavour", hint="only CUDA builds")
    major, minor = backend.version
    return [
        ("cuda_version_lower_bound", f"{major}.{minor}"),
        ("cuda_version_upper_bound", f"{major + 1}"),
    ]


@dataclass(frozen=True)
class VariantBuild:
    """One variant wheel written: its file, label, properties and the wheel it came from."""

    path: Path
    source: str  # the kernel wheel's file name
    label: str
    properties: tuple[tuple[str, str], ...]  # (feature, value) in the nvidia namespace
    dist_info_json: str  # the variant.json it carries


def _description(label: str, properties: Iterable[tuple[str, str]]) -> VariantDescription:
    return VariantDescription(
        [VariantProperty(NAMESPACE, feature, value) for feature, value in properties], label=label
    )


def _sm_values(zf: zipfile.ZipFile) -> list[str]:
    values: set[str] = set()
    for info in zf.infolist():
        if info.filename.endswith(_SHARED_OBJECT) or ".so." in info.filename:
            with zf.open(info) as fh:
                real, virtual = sm_archs(fh)
            values |= {f"{a}_real" for a in real} | {f"{a}_virtual" for a in virtual}
    return sorted(values, key=lambda v: (int(v.split("_")[0]), v))


def write_variant_wheel(source: Path, out_dir: Path, backend: Backend) -> VariantBuild:
    """The variant wheel of the kernel wheel ``source`` (already through the record rule) in
    ``out_dir``: the public version, the flavour token as label, ``variant.json`` added; every
    other member copied streamed as it is. Written beside its final place, then renamed."""
    label = backend.token
    name_part, version_text = source.name.split("-")[:2]
    new_version = Version(version_text).public
    new_dist = f"{escape_name(name_part)}-{new_version}.dist-info"
    tags = source.name[: -len(".whl")].split("-")[2:]
    target = out_dir / f"{escape_name(name_part)}-{new_version}-{'-'.join(tags)}-{label}.whl"
    with zipfile.ZipFile(source) as zin:
        # The one .dist-info folder (the record rule has checked there is exactly one).
        old_dist = next(n.split("/")[0] for n in zin.namelist() if ".dist-info/" in n)
        properties = [*cuda_properties(backend)]
        properties += [("sm_arch", v) for v in _sm_values(zin)]
        vdesc = _description(label, properties)
        try:
            variant_json = make_variant_dist_info(vdesc, variant_info=_INFO)
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
    return VariantBuild(target, source.name, label, tuple(properties), variant_json)


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
