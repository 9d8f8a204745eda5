"""Read a kernel project (``build.toml`` of any edition, docs/build-toml.md) into a frozen model,
checked up front so later stages can trust it; each problem is a ProjectError with the fix."""

from __future__ import annotations

import difflib
import keyword
import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .._toml import Located, describe, read_toml
from ..errors import ProjectError, UsageError, VariantError
from .capability import CudaCapability, parse_all
from .names import is_package_name, name_warning, package_name, self_requirement, shadowing
from .python_depends import load_python_depends
from .sections import (
    BACKENDS,
    DEFAULT_PYEXT,
    KERNEL_BACKENDS,
    BackendDepends,
    Framework,
    HubConfig,
    KernelDependency,
    KernelSection,
    NoarchSection,
    TorchSection,
    TvmFfiSection,
)

# Re-exported: other modules import these from here, though model/sections defines them.
__all__ = ["DEFAULT_PYEXT", "Framework", "HubConfig", "KernelDependency", "KernelSection"]

BUILD_TOML = "build.toml"
# The kernel card, first found: CARD.md (a template, model/card renders it), else README.md.
CARD_FILES = ("CARD.md", "README.md")
# What editors write beside a file and remove again, never part of a build: vim's swap files and
# its 4913 write probe, emacs's lock link and autosave, JetBrains' safe-write copies, kate's
# swap file and the name~ backups of all of them.
_EDITOR_FILE = re.compile(
    r"\.#.*|#.*#|.*~|\..*\.sw[a-z]|\..*\.kate-swp|.*___jb_(?:tmp|old)___|4913", re.DOTALL
)


def editor_file(name: str) -> bool:
    """Whether ``name`` is an editor's temporary or backup file: never part of a build."""
    return _EDITOR_FILE.fullmatch(name) is not None


LEGACY = 2  # the edition number kernelwheel gives the pre-edition-3 forms
FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")

# Keys per table and edition. A key some other edition allows gets "declare edition N".
_GENERAL_COMMON = ("name", "version", "backends", "cuda", "hub", "python-depends")
_GENERAL_4 = ("license", "upstream", "source", "neuron", "xpu")
_GENERAL_KEYS: dict[int, tuple[str, ...]] = {
    LEGACY: (*_GENERAL_COMMON, "universal", "cuda-minver", "cuda-maxver", *_GENERAL_4[:3]),
    3: (*_GENERAL_COMMON, "license", "upstream", "neuron", "xpu"),
    4: (*_GENERAL_COMMON, *_GENERAL_4),
    5: (*_GENERAL_COMMON, "edition", *_GENERAL_4, "tpu", "kernel-depends"),
}
_BACKEND_GENERAL_3: dict[str, tuple[str, ...]] = {
    "cuda": ("minver", "maxver", "python-depends"),
    "xpu": ("python-depends",),
    "neuron": ("python-depends",),
}
_BACKEND_GENERAL_KEYS: dict[int, dict[str, tuple[str, ...]]] = {
    LEGACY: {"cuda": ("minver", "maxver", "python-depends")},
    3: _BACKEND_GENERAL_3,
    4: _BACKEND_GENERAL_3,
    5: {
        "cuda": ("minver", "maxver", "python-depends", "kernel-depends"),
        "xpu": ("python-depends", "kernel-depends"),
        "neuron": ("python-depends", "kernel-depends"),
        "tpu": ("python-depends",),
    },
}
_HUB_KEYS = ("repo-id", "branch")
_TOP_KEYS: dict[int, tuple[str, ...]] = {
    LEGACY: ("general", "torch", "kernel"),
    3: ("general", "torch", "tvm-ffi", "kernel"),
    **dict.fromkeys((4, 5), ("general", *FRAMEWORKS, "kernel")),
}
_TORCH_COMMON = ("src", "include", "pyext", "minver", "maxver")
_TORCH_KEYS: dict[int, tuple[str, ...]] = {
    LEGACY: (*_TORCH_COMMON, "universal", "name", "pyroot"),
    3: _TORCH_COMMON,
    **dict.fromkeys((4, 5), (*_TORCH_COMMON, "cxx-flags", "stable-abi")),
}
# kernel-builder parses the underscore spellings here; its docs write the kebab ones.
_NOARCH_KEYS = ("pyext", "cuda-capabilities", "cuda_capabilities", "rocm-archs", "rocm_archs")
_TVM_FFI_KEYS: dict[int, tuple[str, ...]] = {
    3: ("src", "include", "pyext"),
    **dict.fromkeys((4, 5), ("src", "include", "pyext", "cxx-flags")),
}
_KERNEL_COMMON = ("backend", "src", "depends", "include", "cxx-flags")
_KERNEL_KEYS: dict[str, tuple[str, ...]] = {
    "cpu": _KERNEL_COMMON,
    "metal": _KERNEL_COMMON,
    "cuda": (*_KERNEL_COMMON, "cuda-capabilities", "cuda-flags", "cuda-minver"),
    "rocm": (*_KERNEL_COMMON, "rocm-archs", "hip-flags"),
    "xpu": (*_KERNEL_COMMON, "sycl-flags"),
}
_ALL_KERNEL_KEYS = tuple(dict.fromkeys(k for keys in _KERNEL_KEYS.values() for k in keys))
# The earliest form's kernels: no backend (CUDA; "cuda-hipify" also builds it for ROCm).
_FIRST_KERNEL_KEYS = (
    "src",
    "depends",
    "include",
    "capabilities",
    "cuda-capabilities",
    "rocm-archs",
    "language",
)
_LANGUAGES = ("cuda", "cuda-hipify")

# Where each key is valid, so a key put in the wrong table gets "belongs in [...]".
_KEY_HOMES: dict[str, list[str]] = {}
for _home, _keys in (
    ("the top level", _TOP_KEYS[5]),
    ("[general]", _GENERAL_KEYS[5] + _GENERAL_KEYS[LEGACY]),
    ("[general.cuda]", _BACKEND_GENERAL_KEYS[5]["cuda"]),
    ("[general.hub]", _HUB_KEYS),
    ("[torch]", _TORCH_KEYS[5]),
    ("[kernel.<id>]", _ALL_KERNEL_KEYS),
):
    for _key in dict.fromkeys(_keys):
        _KEY_HOMES.setdefault(_key, []).append(_home)
del _home, _keys, _key

# kernel-builder's name rule (editions 3-5): the package is the name with '-' -> '_'.
_NAME_RE = re.compile(r"[a-z][-a-z0-9]*[a-z0-9]")
# The older forms allowed more; the name must still survive '-' -> '_' as an identifier.
_LEGACY_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_NAME_MAX = 255  # bytes in one path component (NAME_MAX of Linux and macOS file systems)
MAX_NAME = 64  # general.name: the wheel file name holds it with version and tags (255 bytes)
_KERNEL_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_ROCM_ARCH_RE = re.compile(r"gfx[0-9a-f]{3,4}(?::[a-z-]+[+-])*")
_PYEXT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HUB_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_GIT_URL_RE = re.compile(
    r"(?:(?:https?|git|ssh|git\+ssh|git\+https?)://[^\s/]+(?:/\S*)?|[^\s/:@]+@[^\s/:]+:[^\s/]\S*)"
)


@dataclass(frozen=True)
class KernelProject:
    """A validated kernel project. Paths in sections are relative to ``root``."""

    root: Path
    build_toml: Path
    name: str
    package: str
    version: str | None  # the older forms' full version string ("0.1.0")
    backends: tuple[str, ...]
    cuda_minver: Version | None
    cuda_maxver: Version | None
    python_depends: tuple[str, ...]  # PEP 508, kernel-builder's names already mapped
    hub: HubConfig | None
    torch: TorchSection | None
    kernels: tuple[KernelSection, ...]
    edition: int = LEGACY
    api_version: int | None = None  # general.version of editions 3-5: the API major
    license: str | None = None
    upstream: str | None = None
    source: str | None = None
    kernel_depends: tuple[KernelDependency, ...] = ()
    backend_depends: tuple[tuple[str, BackendDepends], ...] = ()
    framework: Framework = Framework.TORCH
    torch_noarch: NoarchSection | None = None
    tvm_ffi: TvmFfiSection | None = None

    @property
    def noarch(self) -> bool:
        """True for a pure-Python project (``[torch-noarch]``, or no kernels in older forms)."""
        return self.framework is Framework.TORCH_NOARCH

    @property
    def ext_dir(self) -> Path:
        if self.torch is not None and self.torch.pyroot is not None:
            return self.root / self.torch.pyroot
        return self.root / ("tvm-ffi-ext" if self.framework is Framework.TVM_FFI else "torch-ext")

    @property
    def package_dir(self) -> Path:
        return self.ext_dir / self.package

    @property
    def pyext(self) -> tuple[str, ...]:
        section = self.torch or self.torch_noarch or self.tvm_ffi
        return section.pyext if section is not None else DEFAULT_PYEXT

    def stable_abi_for(self, backend: str) -> Version | None:
        """The oldest torch of the stable ABI ``backend`` builds against; None: per-torch."""
        return dict(self.torch.stable_abi).get(backend) if self.torch is not None else None

    def backend_depends_for(self, backend: str) -> BackendDepends:
        return dict(self.backend_depends).get(backend, BackendDepends())

    def python_depends_for(self, backend: str) -> tuple[str, ...]:
        """The requirements of a build for ``backend``: the general ones, then the backend's."""
        extra = self.backend_depends_for(backend).python_depends
        return tuple(dict.fromkeys((*self.python_depends, *extra)))

    def check_own_name(self) -> str | None:
        """Refuse a name the wheel requires itself by; the warning a well-known name deserves."""
        requires = [r for b in self.backends for r in self.python_depends_for(b)]
        if (own := self_requirement(self.name, [*self.python_depends, *requires])) is not None:
            raise ProjectError(
                f"general.name {self.name!r} is also the name of a requirement of its own wheel "
                f"({own!r}): installing the kernel would replace the package it needs",
                file=self.build_toml,
                hint=f"rename the kernel (e.g. {self.name}-kernel) and its package folder",
            )
        if (warning := name_warning(self.name, self.package)) is None:
            return None
        return (
            f"{warning}; to publish it under another name, rename general.name (e.g. "
            f"{self.name}-kernel) and its package folder (docs/hardening.md)"
        )

    def kernel_depends_for(self, backend: str) -> tuple[KernelDependency, ...]:
        extra = self.backend_depends_for(backend).kernel_depends
        return tuple(dict.fromkeys((*self.kernel_depends, *extra)))

    def kernels_for(self, backends: Iterable[str]) -> tuple[KernelSection, ...]:
        # A bare string is one backend, not an iterable of letters.
        wanted = {backends} if isinstance(backends, str) else set(backends)
        unknown = sorted(wanted.difference(BACKENDS))
        if unknown:
            raise UsageError(
                f"unknown backend(s): {', '.join(map(repr, unknown))}",
                hint=f"use one of: {', '.join(BACKENDS)}",
            )
        return tuple(k for k in self.kernels if k.backend in wanted)

    def source_files(self) -> tuple[Path, ...]:
        """Every file that determines the build, sorted (input to a content hash): include
        folders are search paths (kernel-builder lists headers in ``src``)."""
        sections = (*self.kernels, *(s for s in (self.torch, self.tvm_ffi) if s is not None))
        listed = (self.root / rel for s in sections for rel in (*s.src, *s.include))
        files = {self.build_toml, *(path for path in listed if path.is_file())}
        for dirpath, dirnames, filenames in os.walk(self.package_dir):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            paths = (Path(dirpath, name) for name in filenames if not editor_file(name))
            files.update(p for p in paths if p.suffix not in (".pyc", ".pyo") and p.is_file())
        return tuple(sorted(files))


def load_project(path: Path | str) -> KernelProject:
    build_toml = _locate(Path(path))
    data = read_toml(
        build_toml,
        hint="fix the syntax at that line and column (strings need quotes, "
        'arrays look like ["a", "b"], tables like [kernel.<id>])',
    )
    return _Reader(build_toml).project(Located(data, file=build_toml))


def find_project_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the current one) holding build.toml;
    the search stops at the git repository's root (never build a project around a checkout)."""
    first = (Path.cwd() if start is None else start.expanduser()).resolve()
    for folder in (first, *first.parents):
        if (folder / BUILD_TOML).is_file():
            return folder
        if (folder / ".git").exists():
            end = f"{folder}, the root of its git repository"
            break
    else:
        end = f"{folder}, the filesystem root"
    looked = f"in {end}" if folder == first else f"in {first} or a folder above it, up to {end}"
    # in a checkout (a monorepo), the projects below (its kernels/<name>/), three folders deep
    # at most; not from a folder outside any (a home folder, /: a slow walk)
    below = sorted(
        path.parent.relative_to(first).as_posix()
        for depth in range(1, 4)
        for path in (first.glob("*/" * depth + BUILD_TOML) if (folder / ".git").exists() else ())
        if not any(part.startswith(".") for part in path.relative_to(first).parts)
    )
    named = f": {', '.join(below[:5])}" + (", …" if len(below) > 5 else "") if below else ""
    raise ProjectError(
        f"no {BUILD_TOML} found {looked}",
        hint="run this in a kernel project (the folder holding build.toml, csrc/ and "
        f"torch-ext/) or one of its subfolders, or pass the project's folder{named}",
    )


# a test file, folder or id given as the project (pytest's habit): where `kernelwheel test` takes it
_TESTS_AFTER_DASHES = (
    "to run some of the tests, give them after --: kernelwheel test -- tests/test_x.py::test_one"
)


def _locate(path: Path) -> Path:
    path = path.expanduser()
    if path.is_dir():
        candidate = path / BUILD_TOML
        if candidate.is_dir():
            raise ProjectError(
                "is a folder, not a file",
                file=candidate,
                hint="build.toml must be the project's TOML file: remove or rename the folder",
            )
        if not candidate.is_file():
            raise ProjectError(
                f"not found (looked in directory {path.resolve()})",
                file=candidate,
                hint="pass the kernel project directory, the one that holds build.toml, "
                "csrc/ and torch-ext/ (or the path of its build.toml)"
                + (f"; {_TESTS_AFTER_DASHES}" if path.name.startswith("test") else ""),
            )
    elif path.is_file():
        if path.suffix == ".py":  # `kernelwheel test tests/test_x.py`, pytest's habit
            raise ProjectError(
                "is a Python file, not a kernel project's folder or its build.toml",
                file=path,
                hint="pass the project's folder (or none: the project the current folder lies "
                f"in); {_TESTS_AFTER_DASHES}",
            )
        candidate = path
    else:
        raise ProjectError(
            f"no such directory or file (looked for {path.absolute()})",
            file=path,
            hint="pass an existing kernel project directory or its build.toml"
            + (f"; {_TESTS_AFTER_DASHES}" if "::" in str(path) else ""),
        )
    # Resolve once so root and every derived path are absolute and stable.
    return candidate.resolve()


def _edition_needed(key: str, table: dict[int, tuple[str, ...]], edition: int) -> str | None:
    """For a key this edition lacks, the hint naming an edition that has it."""
    newer = [e for e in (5, 4) if e > edition and key in table.get(e, ())]
    if not newer:
        return None
    if edition == LEGACY:
        return (
            f"{key!r} is a key of kernel-builder's newer build.toml: declare edition = 5 under "
            "[general], with an integer version, license and backends (docs/build-toml.md)"
        )
    return f"{key!r} needs edition {newer[0]} or later: add edition = 5 under [general]"


class _Reader:
    """Turns the parsed TOML document into the model; every error names ``self.file``."""

    def __init__(self, build_toml: Path) -> None:
        self.file = build_toml
        self.root = build_toml.parent
        self.edition = LEGACY

    def error(self, message: str, key: str | None, hint: str) -> ProjectError:
        return ProjectError(message, file=self.file, key=key, hint=hint)

    def check_keys(self, table: Located, known: dict[int, tuple[str, ...]]) -> None:
        table.check_keys(
            known[self.edition],
            homes=_KEY_HOMES,
            explain=lambda key: _edition_needed(key, known, self.edition),
        )

    # -- the document -----------------------------------------------------------------------

    def project(self, doc: Located) -> KernelProject:
        general = doc.table("general")
        torch_table = doc.table("torch")
        if general is None:
            if torch_table is None or "name" not in torch_table:
                raise self.error(
                    "missing required key",
                    "general.name",
                    'add a [general] table with name = "<kernel name>"',
                )
            general = Located({}, file=self.file, prefix="general")  # the earliest form
        self.edition = self.detect_edition(doc, general)
        self.check_keys(doc, _TOP_KEYS)
        self.check_keys(general, _GENERAL_KEYS)
        name = self.kernel_name(general, torch_table)
        if (problem := kernel_name_problem(name, legacy=self.edition == LEGACY)) is not None:
            raise self.error(problem[0], "general.name", problem[1])
        package = package_name(name)
        api_version, version = self.project_version(general)
        license = general.string("license")
        if self.edition >= 4:
            hint = 'add license = "<SPDX id>" under [general], e.g. license = "Apache-2.0"'
            license = general.required_string("license", hint)
        listed = self.listed_backends(general)
        kernels = self.kernels(doc, package)
        framework = self.framework(doc, general, kernels)
        backends = listed if listed is not None else tuple(sorted({k.backend for k in kernels}))
        cuda_minver, cuda_maxver, backend_depends = self.backend_generals(general)
        torch = self.torch(torch_table, backends) if torch_table is not None else None
        project = KernelProject(
            root=self.root,
            build_toml=self.file,
            name=name,
            package=package,
            version=version,
            backends=backends,
            cuda_minver=cuda_minver,
            cuda_maxver=cuda_maxver,
            python_depends=self.python_depends(general, None),
            hub=self.hub(general),
            torch=torch,
            kernels=kernels,
            edition=self.edition,
            api_version=api_version,
            license=license,
            upstream=self.git_url(general, "upstream"),
            source=self.git_url(general, "source"),
            kernel_depends=self.kernel_depends(general),
            backend_depends=backend_depends,
            framework=framework,
            torch_noarch=self.noarch(doc) if framework is Framework.TORCH_NOARCH else None,
            tvm_ffi=self.tvm_ffi(doc) if framework is Framework.TVM_FFI else None,
        )
        self.check_compiled(project)
        self.check_package_dir(project)
        return project

    def detect_edition(self, doc: Located, general: Located) -> int:
        """kernel-builder's rule (docs/build-toml.md): ``edition = 5``, else 4 with an integer
        version, a licence and a framework section, 3 with ``backends``, else the older forms."""
        if "edition" in general:
            edition = general.integer("edition", hint="set edition = 5")
            if edition != 5:
                raise self.error(
                    f"edition {edition} is not a build.toml edition",
                    "general.edition",
                    "set edition = 5, or remove the key for the edition-4 and edition-3 forms "
                    "(kernel-builder writes edition = 5 since July 2026)",
                )
            return 5
        torch = doc.data.get("torch")
        legacy = (
            "backends" not in general
            or isinstance(general.data.get("version"), str)
            or any(k in general for k in ("universal", "cuda-minver", "cuda-maxver"))
            or (isinstance(torch, dict) and "universal" in torch)
        )
        if legacy:
            return LEGACY
        framework = any(section in doc for section in FRAMEWORKS)
        versioned = isinstance(general.data.get("version"), int) and "license" in general
        return 4 if framework and versioned else 3

    def kernel_name(self, general: Located, torch: Located | None) -> str:
        """general.name; the earliest form wrote it as [torch] name."""
        hint = 'add name = "<kernel name>" under [general]'
        early = None
        if self.edition == LEGACY and torch is not None:  # editions 3-5 refuse the key
            early = torch.string("name", nonempty=True)
        if early is None:
            return general.required_string("name", hint)
        if "name" in general:
            raise self.error(
                "both general.name and torch.name are given",
                "torch.name",
                "remove name from [torch]: general.name names the kernel",
            )
        return early

    def project_version(self, general: Located) -> tuple[int | None, str | None]:
        """(API major, full version): editions 3-5 give an integer, the older forms a string."""
        raw = general.data.get("version")
        if raw is None:
            if self.edition >= 4:
                raise self.error(
                    "missing required key",
                    "general.version",
                    "add version = 1 under [general]: the kernel's API major version "
                    "(0 while the API is unstable)",
                )
            return None, None
        if isinstance(raw, str) and self.edition == LEGACY:
            return None, self.full_version(raw)
        hint = (
            "write the kernel's API major version as an integer, e.g. version = 1; the wheel's "
            "full version (1.2.3) comes from --version, a VERSION file or a git tag v1.2.3"
        )
        return general.integer("version", low=0, hint=hint), None

    def full_version(self, raw: str) -> str:
        try:
            version = Version(raw)
        except InvalidVersion:
            raise self.error(
                f"{raw!r} is not a valid PEP 440 version",
                "general.version",
                'use a version such as "0.1.0" or "1.2.0rc1", or the integer API major '
                "version of kernel-builder's current format (version = 1)",
            ) from None
        if version.local is not None:
            raise self.error(
                f"{raw!r} has a local version part ('+{version.local}')",
                "general.version",
                f'drop it (version = "{version.public}"): kernelwheel appends '
                "+torch<X>.<Y>.<backend>... per variant",
            )
        return str(version)  # normalized, as it will appear in wheel names and METADATA

    def framework(
        self, doc: Located, general: Located, kernels: tuple[KernelSection, ...]
    ) -> Framework:
        present = [section for section in FRAMEWORKS if section in doc]
        universal = general.boolean("universal")  # the older forms' flag: a boolean if given
        if len(present) > 1:
            raise self.error(
                f"has {' and '.join(f'[{p}]' for p in present)}: a project has one framework",
                present[1],
                "keep [torch] for compiled torch ops, [torch-noarch] for a Python-only kernel, "
                "or [tvm-ffi] for a kernel built against apache-tvm-ffi",
            )
        if not present:
            if self.edition >= 4:
                raise self.error(
                    "no framework section",
                    None,
                    "add [torch] (compiled torch ops), [torch-noarch] (Python/Triton only) or "
                    "[tvm-ffi]; edition 3's 'no section means noarch' needs [torch-noarch] now",
                )
            if kernels:
                raise self.error(
                    "a project with [kernel.*] sections needs a [torch] section with src",
                    "torch.src",
                    'add [torch] with src = ["torch-ext/torch_binding.cpp", '
                    '"torch-ext/torch_binding.h"] (the sources that register the ops)',
                )
            return Framework.TORCH_NOARCH
        if present[0] == "torch-noarch":
            if kernels:
                raise self.error(
                    "[torch-noarch] is a Python-only kernel, but the project has "
                    f"[kernel.{kernels[0].id}]",
                    f"kernel.{kernels[0].id}",
                    "use [torch] for compiled kernels, or remove the [kernel.*] sections",
                )
            return Framework.TORCH_NOARCH
        if present[0] == "tvm-ffi":
            return Framework.TVM_FFI
        # [torch]: compiled, except the older forms' universal = true or no kernels.
        torch = doc.table("torch")
        assert torch is not None
        if self.edition == 3 and not kernels and "src" not in torch:
            return Framework.TORCH_NOARCH  # edition 3 wrote pure-Python kernels this way too
        if self.edition != LEGACY:
            return Framework.TORCH
        if universal is None:
            universal = torch.boolean("universal")
        if universal and kernels:
            raise self.error(
                "universal = true, but the project has [kernel.*] sections (compiled code)",
                "general.universal",
                "remove universal = true, or remove the [kernel.*] sections "
                "for a pure-Python kernel",
            )
        return Framework.TORCH_NOARCH if universal or not kernels else Framework.TORCH

    def listed_backends(self, general: Located) -> tuple[str, ...] | None:
        """general.backends; None (older forms only) means: the kernels' backends."""
        raw = general.string_list("backends")
        if raw is None:
            return None
        if not raw:
            raise self.error(
                "lists no backends",
                "general.backends",
                f"list at least one of {', '.join(BACKENDS)}",
            )
        for backend in raw:
            self.check_backend(backend, "general.backends", BACKENDS)
        return tuple(sorted(set(raw)))

    def check_backend(self, backend: str, dotted: str, valid: tuple[str, ...]) -> None:
        if backend in valid:
            return
        close = difflib.get_close_matches(backend.lower(), valid, n=1, cutoff=0.5)
        suggestion = f"did you mean {close[0]!r}? " if close else ""
        raise self.error(
            f"unknown backend {backend!r}",
            dotted,
            f"{suggestion}valid backends: {', '.join(valid)}",
        )

    def backend_generals(
        self, general: Located
    ) -> tuple[Version | None, Version | None, tuple[tuple[str, BackendDepends], ...]]:
        """CUDA bounds and the per-backend dependency tables [general.<backend>]."""
        old = [k for k in ("cuda-minver", "cuda-maxver") if k in general]
        if old and "cuda" in general:
            raise self.error(
                f"both general.{old[0]} and a [general.cuda] table are given",
                "general.cuda",
                "keep one form: minver/maxver under [general.cuda] (current), or "
                "cuda-minver/cuda-maxver under [general] (older)",
            )
        minver, maxver = general.version_range("cuda-minver", "cuda-maxver")
        depends: list[tuple[str, BackendDepends]] = []
        for backend, keys in _BACKEND_GENERAL_KEYS[self.edition].items():
            table = general.table(backend)
            if table is None:
                continue
            table.check_keys(keys, homes=_KEY_HOMES)
            if backend == "cuda":
                minver, maxver = table.version_range("minver", "maxver")
            found = BackendDepends(
                python_depends=self.python_depends(table, backend),
                kernel_depends=self.kernel_depends(table),
            )
            if found != BackendDepends():
                depends.append((backend, found))
        return minver, maxver, tuple(depends)

    def python_depends(self, table: Located, backend: str | None) -> tuple[str, ...]:
        names = load_python_depends()
        requirements: list[str] = []
        dotted = table.dotted("python-depends")
        known = names.names_for(backend)
        for entry in table.string_list("python-depends") or ():
            owner = names.owner(entry)
            if entry not in known and owner is not None:
                raise self.error(
                    f"{entry!r} is a {owner} name: only {owner} builds may depend on it",
                    dotted,
                    f"move it to python-depends under [general.{owner}]",
                )
            # A bare name close to a known one is a typo, not a PyPI package.
            close = difflib.get_close_matches(entry, known, n=1, cutoff=0.8)
            if entry not in known and close and re.fullmatch(r"[A-Za-z0-9._-]+", entry):
                raise self.error(
                    f"{entry!r} is no python-depends name",
                    dotted,
                    f"did you mean {close[0]!r}? (a PyPI package of that name is written with "
                    f'a version, e.g. "{entry}>=1")',
                )
            found = names.requirements(entry, backend)
            if found is None:
                close = difflib.get_close_matches(entry, known, n=1, cutoff=0.6)
                raise self.error(
                    f"{entry!r} is neither one of kernel-builder's python-depends names "
                    f"{'for ' + backend + ' ' if backend else ''}nor a PEP 508 requirement",
                    dotted,
                    (f"did you mean {close[0]!r}? " if close else "")
                    + f"names here: {', '.join(known) or 'none'}; or write a requirement such "
                    'as "numpy>=1.26"',
                )
            requirements += [r for r in found if r not in requirements]
        return tuple(requirements)

    def kernel_depends(self, table: Located) -> tuple[KernelDependency, ...]:
        depends: list[KernelDependency] = []
        for item in table.table_array("kernel-depends") or ():
            item.check_keys(("repo-id", "version", "revision"))
            repo_id = item.required_string(
                "repo-id", 'add repo-id = "<owner>/<kernel>" (the Hub repository)'
            )
            self.check_repo_id(repo_id, item.dotted("repo-id"))
            version = item.integer("version", low=0, hint="the kernel's API major, e.g. 1")
            revision = item.string("revision")
            if (version is None) == (revision is None):
                raise self.error(
                    "needs exactly one of version and revision",
                    item.prefix,
                    'give version = <API major> (a branch v<N>) or revision = "<git ref>"',
                )
            depends.append(KernelDependency(repo_id, version, revision))
        return tuple(depends)

    def check_repo_id(self, repo_id: str, dotted: str) -> None:
        if not _HUB_REPO_RE.fullmatch(repo_id):
            raise self.error(
                f"{repo_id!r} is not a Hub repository id",
                dotted,
                'use "<owner>/<name>", e.g. "kernels-community/relu"',
            )

    def git_url(self, general: Located, key: str) -> str | None:
        url = general.string(key)
        if url is not None and not _GIT_URL_RE.fullmatch(url):
            raise self.error(
                f"{url!r} is not a git URL",
                f"general.{key}",
                "use https://host/owner/repo(.git), git+https://..., ssh://... or "
                "git@host:owner/repo",
            )
        return url

    def hub(self, general: Located) -> HubConfig | None:
        hub = general.table("hub")
        if hub is None:
            return None
        hub.check_keys(_HUB_KEYS)
        repo_id = hub.string("repo-id")
        if repo_id is not None:
            self.check_repo_id(repo_id, "general.hub.repo-id")
        branch = hub.string("branch")
        if branch is not None and not branch.strip():
            raise self.error(
                "must not be empty", "general.hub.branch", "name a branch, or remove the key"
            )
        return HubConfig(repo_id=repo_id, branch=branch)

    # -- framework sections -----------------------------------------------------------------

    def torch(self, torch: Located, backends: tuple[str, ...]) -> TorchSection:
        self.check_keys(torch, _TORCH_KEYS)
        minver, maxver = torch.version_range("minver", "maxver")
        return TorchSection(
            src=self.paths(torch, "src", files_only=True),
            include=self.paths(torch, "include", files_only=False),
            pyext=self.pyext(torch),
            minver=minver,
            maxver=maxver,
            cxx_flags=torch.string_list("cxx-flags") or (),
            stable_abi=self.stable_abi(torch, backends),
            pyroot=self.pyroot(torch),
        )

    def pyroot(self, torch: Located) -> Path | None:
        """The earliest form's ``pyroot``: the Python package's folder instead of torch-ext/."""
        raw = torch.string("pyroot", nonempty=True)
        if raw is None:
            return None
        single = Located({"pyroot": [raw]}, file=self.file, prefix=torch.prefix)
        (path,) = self.paths(single, "pyroot", files_only=False)
        if not (self.root / path).is_dir():
            raise self.error(
                f"{raw!r} is not a folder",
                "torch.pyroot",
                "name the folder that holds the Python package (<pyroot>/<package>/__init__.py)",
            )
        return None if path == Path("torch-ext") else path

    def stable_abi(
        self, torch: Located, backends: tuple[str, ...]
    ) -> tuple[tuple[str, Version], ...]:
        """``stable-abi = "2.10"`` (every backend) or, from edition 5, a table per backend."""
        if "stable-abi" not in torch:
            return ()
        raw = torch.data["stable-abi"]
        if isinstance(raw, str):
            version = self.stable_abi_version(torch, "stable-abi")
            return tuple((backend, version) for backend in backends)
        if self.edition < 5 or not isinstance(raw, dict):
            five = self.edition >= 5
            raise self.error(
                f"expected a torch version string{' or a table' * five}, got {describe(raw)}",
                "torch.stable-abi",
                'write stable-abi = "2.10"; a table per backend ({ cuda = "2.10" })'
                + ("" if five else " needs edition = 5 under [general]"),
            )
        table = torch.required_table("stable-abi", "")
        found: list[tuple[str, Version]] = []
        for backend in table.keys():
            # A backend the project does not build is allowed (kernel-builder allows it too).
            self.check_backend(backend, table.dotted(backend), BACKENDS)
            if backend in backends:
                found.append((backend, self.stable_abi_version(table, backend)))
        return tuple(found)

    def stable_abi_version(self, table: Located, key: str) -> Version:
        raw = table.string(key)
        try:
            version = Version(raw or "")
        except InvalidVersion:
            version = Version("0")
        if len(version.release) != 2 or version.major != 2 or version.minor < 9:
            raise self.error(
                f"{raw!r} is not a stable-ABI torch version",
                table.dotted(key),
                'give the oldest torch minor the build supports, "2.9" or later, e.g. "2.10"',
            )
        return version

    def noarch(self, doc: Located) -> NoarchSection:
        section = doc.table("torch-noarch")
        if section is None:  # edition 3: no framework section
            return NoarchSection(pyext=DEFAULT_PYEXT)
        section.check_keys(_NOARCH_KEYS)
        for kebab in ("cuda-capabilities", "rocm-archs"):
            if kebab in section and kebab.replace("-", "_") in section:
                raise self.error(
                    f"both {kebab} and {kebab.replace('-', '_')} are given",
                    section.dotted(kebab),
                    "keep one spelling",
                )
        caps = self.capabilities(section, "cuda-capabilities") or self.capabilities(
            section, "cuda_capabilities"
        )
        archs = self.rocm_archs(section, "rocm-archs") or self.rocm_archs(section, "rocm_archs")
        return NoarchSection(pyext=self.pyext(section), cuda_capabilities=caps, rocm_archs=archs)

    def tvm_ffi(self, doc: Located) -> TvmFfiSection:
        section = doc.table("tvm-ffi")
        assert section is not None
        self.check_keys(section, _TVM_FFI_KEYS)
        return TvmFfiSection(
            src=self.paths(section, "src", files_only=True),
            include=self.paths(section, "include", files_only=False),
            pyext=self.pyext(section),
            cxx_flags=section.string_list("cxx-flags") or (),
        )

    def pyext(self, section: Located) -> tuple[str, ...]:
        raw = section.string_list("pyext")
        if raw is None:
            return DEFAULT_PYEXT
        for entry in raw:
            if not _PYEXT_RE.fullmatch(entry.removeprefix(".")):  # ".py" means "py"
                raise self.error(
                    f"{entry!r} is not a file suffix",
                    section.dotted("pyext"),
                    'list suffixes without paths or wildcards, e.g. pyext = ["py", "json"]',
                )
        return tuple(dict.fromkeys(entry.removeprefix(".") for entry in raw))

    def check_compiled(self, project: KernelProject) -> None:
        """A compiled project needs binding sources to register its ops with."""
        if project.framework is Framework.TORCH and project.torch and not project.torch.src:
            if project.kernels:
                raise self.error(
                    "a project with [kernel.*] sections needs a [torch] section with src",
                    "torch.src",
                    'add src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"] '
                    "under [torch] (the sources that register the ops)",
                )
            raise self.error(
                "lists no sources: a [torch] project compiles its binding",
                "torch.src",
                'add src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"], or use '
                "[torch-noarch] for a Python-only kernel",
            )
        if project.framework is Framework.TVM_FFI and project.tvm_ffi and not project.tvm_ffi.src:
            raise self.error(
                "lists no sources", "tvm-ffi.src", "list the binding sources under tvm-ffi-ext/"
            )

    # -- kernels ----------------------------------------------------------------------------

    def kernels(self, doc: Located, package: str) -> tuple[KernelSection, ...]:
        table = doc.table("kernel")
        if table is None:
            return ()
        kernels: list[KernelSection] = []
        for kernel_id in table.keys():
            dotted = f"kernel.{kernel_id}"
            section = table.data[kernel_id]
            if not isinstance(section, dict):
                if kernel_id in _ALL_KERNEL_KEYS:
                    # `[kernel]` + `backend = ...`: the id was left out of the header.
                    raise self.error(
                        f"{kernel_id!r} is set directly under [kernel]; "
                        "each kernel needs its own [kernel.<id>] table",
                        dotted,
                        f"rename the [kernel] header to [kernel.<id>], e.g. [kernel.{package}]",
                    )
                raise self.error(
                    f"expected a table, got {describe(section)}",
                    dotted,
                    f"write it as a [{dotted}] table with backend and src",
                )
            if not _KERNEL_ID_RE.fullmatch(kernel_id):
                raise self.error(
                    f"invalid kernel id {kernel_id!r}",
                    dotted,
                    "use ASCII letters, digits, '_' and '-' in the id of [kernel.<id>]",
                )
            located = Located(section, file=self.file, prefix=dotted)
            if self.edition == LEGACY and "backend" not in section:
                kernels += self.first_form_kernels(kernel_id, located, table)
            else:
                kernels.append(self.kernel(kernel_id, located))
        return tuple(kernels)

    def first_form_kernels(
        self, kernel_id: str, section: Located, table: Located
    ) -> list[KernelSection]:
        """A kernel of the first format: CUDA; ``language = "cuda-hipify"`` builds the same
        sources for ROCm as ``<id>_rocm`` too, as kernel-builder did."""
        prefix = section.prefix
        section.check_keys(
            _FIRST_KERNEL_KEYS,
            homes=_KEY_HOMES,
            explain=lambda key: (
                f'{key!r} is a key of the later form: add backend = "cuda" to [{prefix}] '
                "(and write capabilities as cuda-capabilities)"
                if key in _ALL_KERNEL_KEYS
                else None
            ),
        )
        if "capabilities" in section and "cuda-capabilities" in section:
            raise self.error(
                "both capabilities and cuda-capabilities are given",
                f"{prefix}.capabilities",
                "keep cuda-capabilities (capabilities is its first spelling)",
            )
        language = section.string("language") or "cuda"
        if language not in _LANGUAGES:
            raise self.error(
                f"unknown language {language!r}",
                f"{prefix}.language",
                f'write backend = "cuda" (or "rocm") instead of language; language was '
                f"one of {', '.join(_LANGUAGES)}",
            )
        if language == "cuda" and "rocm-archs" in section:
            raise self.error(
                'rocm-archs has no meaning for a kernel of language "cuda"',
                f"{prefix}.rocm-archs",
                'remove it, or add a [kernel.<id>] with backend = "rocm", the same src and '
                "these rocm-archs",
            )
        key = "capabilities" if "capabilities" in section else "cuda-capabilities"
        cuda = self.kernel_section(kernel_id, "cuda", section, key)
        if language == "cuda":
            return [cuda]
        rocm_id = f"{kernel_id}_rocm"
        if rocm_id in table:
            raise self.error(
                f'language = "cuda-hipify" adds the ROCm kernel {rocm_id!r}, which exists',
                f"{prefix}.language",
                f"rename [kernel.{rocm_id}], or give each kernel its backend (cuda, rocm)",
            )
        rocm = replace(
            cuda,
            id=rocm_id,
            backend="rocm",
            cuda_capabilities=(),
            rocm_archs=self.rocm_archs(section, "rocm-archs"),
        )
        return [cuda, rocm]

    def kernel_section(
        self, kernel_id: str, backend: str, section: Located, capabilities: str
    ) -> KernelSection:
        prefix = section.prefix
        if "src" not in section:
            raise self.error(
                "missing required key",
                f"{prefix}.src",
                f'add src = ["csrc/<file>.cu", ...] to [{prefix}], listing its sources',
            )
        src = self.paths(section, "src", files_only=True)
        if not src:
            raise self.error(
                "lists no sources",
                f"{prefix}.src",
                f"list the kernel's source files, or remove the [{prefix}] section",
            )
        if self.edition >= 4 and "depends" not in section:
            raise self.error(
                "missing required key",
                f"{prefix}.depends",
                f'add depends = ["torch"] to [{prefix}] (and e.g. "cutlass_3_8" for CUTLASS)',
            )
        return KernelSection(
            id=kernel_id,
            backend=backend,
            src=src,
            depends=section.string_list("depends") or (),
            include=self.paths(section, "include", files_only=False),
            cxx_flags=section.string_list("cxx-flags") or (),
            cuda_flags=section.string_list("cuda-flags") or (),
            cuda_capabilities=self.capabilities(section, capabilities),
            cuda_minver=section.version("cuda-minver"),
            rocm_archs=self.rocm_archs(section, "rocm-archs") if backend == "rocm" else (),
            hip_flags=section.string_list("hip-flags") or (),
            sycl_flags=section.string_list("sycl-flags") or (),
        )

    def kernel(self, kernel_id: str, section: Located) -> KernelSection:
        prefix = section.prefix
        if "backend" not in section:  # a misspelt backend: the unknown key, with the fix
            section.check_keys(_ALL_KERNEL_KEYS, homes=_KEY_HOMES)
        backend = section.required_string(
            "backend", f'add backend = "<one of {", ".join(KERNEL_BACKENDS)}>" to [{prefix}]'
        )
        self.check_backend(backend, f"{prefix}.backend", KERNEL_BACKENDS)
        section.check_keys(
            _KERNEL_KEYS[backend],
            homes=_KEY_HOMES,
            explain=lambda key: _other_backend_key(key, backend),
        )
        return self.kernel_section(kernel_id, backend, section, "cuda-capabilities")

    def capabilities(self, section: Located, key: str) -> tuple[CudaCapability, ...]:
        raw = section.string_list(key)
        if raw is None:
            return ()
        dotted = section.dotted(key)
        if not raw:
            raise self.error(
                "lists no capabilities",
                dotted,
                "remove the key to build for the default capabilities of the CUDA version, "
                'or list some, e.g. ["8.0", "9.0"]',
            )
        try:
            return tuple(dict.fromkeys(parse_all(raw)))
        except VariantError as exc:
            raise self.error(exc.message, dotted, exc.hint or "") from None

    def rocm_archs(self, section: Located, key: str) -> tuple[str, ...]:
        raw = section.string_list(key) or ()
        for entry in raw:
            if not _ROCM_ARCH_RE.fullmatch(entry):
                raise self.error(
                    f"invalid ROCm arch {entry!r}",
                    section.dotted(key),
                    'write ROCm targets as gfx names, e.g. ["gfx90a", "gfx942"]',
                )
        return tuple(dict.fromkeys(raw))

    def check_package_dir(self, project: KernelProject) -> None:
        init = project.package_dir / "__init__.py"
        if init.is_file():
            return
        rel = init.relative_to(self.root).as_posix()
        hint = f"create {rel}: the Python package that exposes the ops"
        # A package under another name usually means general.name has a typo.
        found = sorted(p.parent.name for p in project.ext_dir.glob("*/__init__.py"))
        if found:
            hint += (
                f", or set general.name to match an existing package "
                f"({', '.join(found)}); the package is general.name with '-' -> '_'"
            )
        raise self.error(f"{rel} does not exist", "general.name", hint)

    # -- paths ------------------------------------------------------------------------------

    def paths(self, table: Located, key: str, *, files_only: bool) -> tuple[Path, ...]:
        """Relative, normalized paths that must exist inside the project root."""
        dotted = table.dotted(key)
        paths: dict[Path, None] = {}  # in order, each once
        entries = table.string_list(key) or ()
        for entry in entries:
            # build.toml paths are '/'-separated; '../other' and '/abs' are refused lexically,
            # symlinks (even in a parent folder) by where they resolve: inside the root only.
            if entry.startswith("/") or Path(entry).is_absolute():
                raise self.error(
                    f"{entry!r} is an absolute path",
                    dotted,
                    f"write paths relative to the project root {self.root}",
                )
            if "\0" in entry or any(ord(c) < 32 for c in entry):
                raise self.error(
                    f"{entry!r} holds a control character (NUL, newline...), which no file "
                    "name may hold",
                    dotted,
                    "remove it from the path",
                )
            long = [part for part in entry.split("/") if len(os.fsencode(part)) > _NAME_MAX]
            if long:
                raise self.error(
                    f"{entry!r} has a component of {len(os.fsencode(long[0]))} bytes "
                    f"({long[0][:30]!r}…); file systems allow at most {_NAME_MAX}",
                    dotted,
                    "use a shorter file or folder name",
                )
            normalized = posixpath.normpath(entry)
            if normalized == ".." or normalized.startswith("../"):
                raise self.error(
                    f"{entry!r} points outside the project root {self.root}",
                    dotted,
                    "move or copy the file into the project and list it relative to the root",
                )
            full = self.root / normalized
            if full.is_symlink() and not full.exists():
                raise self.error(
                    f"{entry!r} is a symlink to {os.readlink(full)!r}, which does not exist",
                    dotted,
                    "fix the link, or replace it with the file itself",
                )
            resolved = full.resolve()
            if full.exists() and not resolved.is_relative_to(self.root.resolve()):
                # Decision (issue 13): refused, not followed. The build, its cache key and the
                # Hub export read the project folder; a file outside it would make the wheel
                # depend on something the project does not hold.
                raise self.error(
                    f"{entry!r} leads outside the project root through a symlink (to {resolved})",
                    dotted,
                    "copy the file into the project, or make the link point inside it",
                )
            if not full.exists():
                raise self.error(
                    f"{entry!r} does not exist (looked for {full})",
                    dotted,
                    self.missing_path_hint(entry, full, dotted, entries),
                )
            if files_only and not full.is_file():
                raise self.error(
                    f"{entry!r} is not a file",
                    dotted,
                    "list source files one by one (directories belong in include)",
                )
            paths[Path(normalized)] = None
        return tuple(paths)

    def missing_path_hint(self, entry: str, full: Path, key: str, listed: Sequence[str]) -> str:
        if any(c in entry for c in "*?["):
            return "wildcards are not expanded: list each file"
        if full.parent.is_dir():
            # Same suffix (a typo in the stem) or same stem (wrong extension) only, so a
            # not-yet-written foo.cu is not "corrected" to an unrelated foo_cpu.cpp; never a
            # file the key lists already (foo.hpp beside a renamed foo.cpp).
            taken = {self.root / posixpath.normpath(e) for e in listed}
            names = [
                p.name
                for p in full.parent.iterdir()
                if (p.suffix == full.suffix or p.stem == full.stem) and p not in taken
            ]
            close = difflib.get_close_matches(full.name, names, n=1, cutoff=0.6)
            if close:
                return f"did you mean {posixpath.join(posixpath.dirname(entry), close[0])!r}?"
        # a header deleted in a refactor: its entry is what is left to remove
        return (
            f"fix the path (relative to the project root), create the file, or remove {entry!r} "
            f"from {key}"
        )


def _other_backend_key(key: str, backend: str) -> str | None:
    owners = [b for b, keys in _KERNEL_KEYS.items() if key in keys]
    if not owners:
        return None
    return (
        f"{key!r} is for backend = {owners[0]!r} kernels; this kernel's backend is {backend!r}: "
        "remove the key, or put the sources in a kernel of that backend"
    )


def kernel_name_problem(name: str, *, legacy: bool = False) -> tuple[str, str] | None:
    """Why ``name`` cannot be a kernel's name, with the fix, or None; ``legacy``: the older
    forms' looser spelling rule."""
    if not name.strip():
        return "must not be empty", 'set the kernel\'s name, e.g. name = "relu"'
    if len(name) > MAX_NAME:
        return (
            f"{name[:40]!r}… is {len(name)} characters long; at most {MAX_NAME} are allowed",
            "use a short name: it is the package folder, the ops namespace and part of "
            "every wheel's file name (file systems refuse names over 255 bytes)",
        )
    package = package_name(name)
    if legacy and (not _LEGACY_NAME_RE.fullmatch(name) or not is_package_name(package)):
        via = f" ({package!r})" if package != name else ""
        return (
            f"{name!r} does not give a valid Python package name{via}",
            "use lowercase ASCII letters, digits and '-', starting with a letter "
            "(it becomes the package torch-ext/<name with '-' -> '_'>/), "
            "and not a Python keyword",
        )
    if not legacy and (not _NAME_RE.fullmatch(name) or not is_package_name(package)):
        return f"{name!r} is not a kernel name: {_name_problem(name)}", _name_fix(name)
    if (shadowed := shadowing(name, package)) is not None:
        return (
            f"{name!r} would shadow {shadowed}",
            f"choose a name of the kernel's own, e.g. {name}-kernel (kernelwheel refuses names "
            "of core packages and of the standard library: data/names.toml)",
        )
    return None


def _name_problem(name: str) -> str:
    problems = (
        (any(c.isupper() for c in name), "it has uppercase letters"),
        ("_" in name, "it has '_' (kernel names use '-'; the package gets '_')"),
        (not name[0].isalpha(), "it must start with a letter"),
        (not name[-1].isalnum(), "it must end with a letter or digit"),
        (len(name) < 2, "it needs at least two characters"),
        (keyword.iskeyword(package_name(name)), "its package name is a Python keyword"),
    )
    default = "only lowercase letters, digits and '-' are allowed"
    return next((problem for found, problem in problems if found), default)


def _name_fix(name: str) -> str:
    suggestion = re.sub(r"[^a-z0-9-]", "", name.lower().replace("_", "-")).lstrip("-0123456789")
    suggestion = suggestion.rstrip("-")
    rule = "names match ^[a-z][-a-z0-9]*[a-z0-9]$ (kernel-builder's rule)"
    package = package_name(suggestion)
    if shadowing(suggestion, package) is not None or keyword.iskeyword(package):
        suggestion += "-kernel"  # never suggest a name that is refused in turn
    if _NAME_RE.fullmatch(suggestion) and is_package_name(package_name(suggestion)):
        return (
            f'use name = "{suggestion}" and rename the package folder to '
            f"{package_name(suggestion)}; {rule}"
        )
    return rule
