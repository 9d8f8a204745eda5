"""Export built variants as a Hub kernel repository tree (``build/<variant>/...``).

The flat layout of current kernel-builder output: the package's files directly in
``build/<variant>/`` beside a ``metadata.json`` that the ``kernels`` library reads (id = the
build's op namespace, name, major version, license, python-depends, backend). The tree is what
``kernelwheel to-wheel`` converts back into wheels, and what ``kernels.get_local_kernel`` loads.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from .._util import replace_dir, staging_dir
from ..model.project import KernelProject
from ..model.variant import Variant
from ..wheels import read_wheel
from .metadata import METADATA_JSON, KernelMetadata

# SPDX's word for "no license information was given" (metadata.json requires a string).
NO_LICENSE = "NOASSERTION"


def kernel_metadata(
    project: KernelProject, variant: Variant, namespace: str, capabilities: tuple[str, ...]
) -> KernelMetadata:
    version = Version(project.version) if project.version else None
    return KernelMetadata(
        id=namespace,
        name=project.name,
        version=str(version.major if version else 1),
        license=NO_LICENSE,
        python_depends=tuple(project.python_depends),
        backend=variant.backend.kind.value if variant.backend is not None else "universal",
        archs=tuple(c.removesuffix("+PTX") for c in capabilities),
    )


def export_variant(
    wheel: Path,
    project: KernelProject,
    variant: Variant,
    namespace: str,
    root: Path,
    *,
    capabilities: tuple[str, ...] = (),
) -> Path:
    """Write ``root/build/<variant>/`` from the package files of ``wheel``; replaces an older
    export of the same variant atomically. Returns the variant folder."""
    contents = read_wheel(wheel)
    prefix = f"{project.package}/"
    build = root / "build"
    build.mkdir(parents=True, exist_ok=True)
    with staging_dir(build, "export") as staging:
        for name, data in contents.files.items():
            if not name.startswith(prefix):
                continue  # dist-info
            dest = staging / name[len(prefix) :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            if dest.suffix == ".so":
                dest.chmod(0o755)
        meta = kernel_metadata(project, variant, namespace, capabilities)
        (staging / METADATA_JSON).write_text(meta.to_json())
        return replace_dir(staging, build / variant.name)
