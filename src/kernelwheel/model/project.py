"""Read a kernel-builder project (``build.toml`` and its sources) into a frozen, validated model.

Everything is checked up front, so later stages (matrix, compile, wheel) can trust the model.
Each problem raises :class:`~kernelwheel.errors.ProjectError` naming the file, the dotted key and
the fix. The accepted keys are the union of kernel-builder's schema versions (see formats.md §1)
plus ``general.version``, which kernelwheel adds for the wheel version.
"""

from __future__ import annotations

import difflib
import keyword
import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from .._toml import read_toml
from ..errors import ProjectError, UsageError

__all__ = [
    "BACKENDS",
    "BUILD_TOML",
    "DEFAULT_PYEXT",
    "HubConfig",
    "KernelProject",
    "KernelSection",
    "TorchSection",
    "load_project",
]

BUILD_TOML = "build.toml"
BACKENDS: tuple[str, ...] = ("cpu", "cuda", "metal", "rocm", "xpu")
DEFAULT_PYEXT: tuple[str, ...] = ("py", "pyi")

# Known keys per table, in the order they are listed in hints.
_TOP_KEYS = ("general", "torch", "kernel")
_GENERAL_KEYS = (
    "name",
    "version",
    "universal",
    "backends",
    "cuda-minver",
    "cuda-maxver",
    "cuda",
    "python-depends",
    "hub",
)
_GENERAL_CUDA_KEYS = ("minver", "maxver")
_HUB_KEYS = ("repo-id", "branch")
_TORCH_KEYS = ("src", "include", "pyext", "minver", "maxver")
_KERNEL_KEYS = (
    "backend",
    "src",
    "depends",
    "include",
    "cxx-flags",
    "cuda-capabilities",
    "cuda-flags",
    "cuda-minver",
)

# Where each key is valid, so a key put in the wrong table gets "belongs in [...]".
_KEY_HOMES: dict[str, list[str]] = {}
for _home, _keys in (
    ("the top level", _TOP_KEYS),
    ("[general]", _GENERAL_KEYS),
    ("[general.cuda]", _GENERAL_CUDA_KEYS),
    ("[general.hub]", _HUB_KEYS),
    ("[torch]", _TORCH_KEYS),
    ("[kernel.<id>]", _KERNEL_KEYS),
):
    for _key in _keys:
        _KEY_HOMES.setdefault(_key, []).append(_home)
del _home, _keys, _key

# The package name must survive '-' -> '_' as an importable ASCII identifier.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def package_name(name: str) -> str:
    """The import name of a kernel named ``name``, as kernel-builder derives it: '-' and '.'
    become '_' (build.toml allows only '-'; Hub metadata names may hold '.')."""
    return re.sub(r"[-.]", "_", name)


def is_package_name(name: str) -> bool:
    """Whether ``name`` can be imported: an identifier that is not a keyword."""
    return name.isidentifier() and not keyword.iskeyword(name)
MAX_NAME = 64  # general.name: the wheel file name holds it with version and tags (255 bytes)
_KERNEL_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
# Compute capability "X.Y" with an optional arch-specific ("a") or family ("f") suffix.
_CAPABILITY_RE = re.compile(r"[1-9][0-9]?\.[0-9][af]?")
# Spellings nvcc/CMake users often write instead: 80, sm_80, compute_90a.
_CAPABILITY_DIGITS_RE = re.compile(r"(?:sm_|compute_)?([1-9][0-9]?)([0-9])([af]?)")
_PYEXT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HUB_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class HubConfig:
    """``[general.hub]``: where the kernel is published on the Hugging Face Hub."""

    repo_id: str | None
    branch: str | None


@dataclass(frozen=True)
class TorchSection:
    """``[torch]``: the op-registration binding and the Python package's file suffixes."""

    src: tuple[Path, ...]
    include: tuple[Path, ...]
    pyext: tuple[str, ...]
    minver: Version | None
    maxver: Version | None


@dataclass(frozen=True)
class KernelSection:
    """One ``[kernel.<id>]`` table: sources compiled for one backend."""

    id: str
    backend: str
    src: tuple[Path, ...]
    depends: tuple[str, ...]
    include: tuple[Path, ...]
    cxx_flags: tuple[str, ...]
    cuda_flags: tuple[str, ...]
    cuda_capabilities: tuple[str, ...]
    cuda_minver: Version | None


@dataclass(frozen=True)
class KernelProject:
    """A validated kernel project. Paths in sections are relative to ``root``."""

    root: Path
    build_toml: Path
    name: str
    package: str
    version: str | None
    universal: bool
    backends: tuple[str, ...]
    cuda_minver: Version | None
    cuda_maxver: Version | None
    python_depends: tuple[str, ...]
    hub: HubConfig | None
    torch: TorchSection | None
    kernels: tuple[KernelSection, ...]

    @property
    def noarch(self) -> bool:
        """True for a pure-Python project (no ``[kernel.*]`` section)."""
        return not self.kernels

    @property
    def package_dir(self) -> Path:
        return self.root / "torch-ext" / self.package

    def kernels_for(self, backends: Iterable[str]) -> tuple[KernelSection, ...]:
        """The kernel sections built for any of ``backends``, in file order."""
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
        """Every file that determines the build, absolute and sorted (input to a content hash).

        That is build.toml, each src/include entry that is a file (include directories are
        search paths, usually ``.`` or ``csrc``; headers the build depends on are listed in
        ``src`` in the kernel-builder layout), and everything in the Python package except
        bytecode caches, which change on import.
        """
        files: set[Path] = {self.build_toml}
        sections: list[TorchSection | KernelSection] = list(self.kernels)
        if self.torch is not None:
            sections.append(self.torch)
        for section in sections:
            for rel in (*section.src, *section.include):
                path = self.root / rel
                if path.is_file():
                    files.add(path)
        for dirpath, dirnames, filenames in os.walk(self.package_dir):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for filename in filenames:
                path = Path(dirpath, filename)
                if path.suffix not in (".pyc", ".pyo") and path.is_file():
                    files.add(path)
        return tuple(sorted(files))


def load_project(path: Path | str) -> KernelProject:
    """Load and validate the project at ``path`` (its directory, or its build.toml)."""
    build_toml = _locate(Path(path))
    data = read_toml(
        build_toml,
        hint="fix the syntax at that line and column (strings need quotes, "
        'arrays look like ["a", "b"], tables like [kernel.<id>])',
    )
    return _Parser(build_toml).project(data)


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
                "csrc/ and torch-ext/ (or the path of its build.toml)",
            )
    elif path.is_file():
        candidate = path
    else:
        raise ProjectError(
            f"no such directory or file (looked for {path.absolute()})",
            file=path,
            hint="pass an existing kernel project directory or its build.toml",
        )
    # Resolve once so root and every derived path are absolute and stable.
    return candidate.resolve()


def _toml_type(value: object) -> str:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (datetime, date, time)):
        return "a date/time"
    return type(value).__name__


def _describe(value: object) -> str:
    if isinstance(value, (dict, list)):
        return _toml_type(value)
    if isinstance(value, bool):
        return f"{_toml_type(value)} ({str(value).lower()})"
    return f"{_toml_type(value)} ({value!r})"


def _leaf(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


class _Parser:
    """Turns the parsed TOML mapping into the model; every error names ``self.file``."""

    def __init__(self, build_toml: Path) -> None:
        self.file = build_toml
        self.root = build_toml.parent

    def error(self, message: str, key: str | None, hint: str) -> ProjectError:
        return ProjectError(message, file=self.file, key=key, hint=hint)

    # -- sections ---------------------------------------------------------------------------

    def project(self, data: Mapping[str, Any]) -> KernelProject:
        self.check_keys(data, _TOP_KEYS, "")
        if "general" not in data:
            raise self.error(
                "missing required key",
                "general.name",
                'add a [general] table with name = "<kernel name>"',
            )
        general = self.table(data, "general", "general")
        self.check_keys(general, _GENERAL_KEYS, "general")

        name = self.required_string(
            general, "name", "general.name", 'add name = "<kernel name>" under [general]'
        )
        package = self.checked_package_name(name)
        version = self.project_version(general)
        universal = self.boolean(general, "universal", "general.universal")
        backends = self.backends(general)
        cuda_minver, cuda_maxver = self.general_cuda(general)
        python_depends = self.python_depends(general)
        hub = self.hub(general)
        torch = self.torch(data)
        kernels = self.kernels(data, package)

        if kernels and (torch is None or not torch.src):
            raise self.error(
                "a project with [kernel.*] sections needs a [torch] section with src",
                "torch.src",
                'add [torch] with src = ["torch-ext/torch_binding.cpp", '
                '"torch-ext/torch_binding.h"] (the sources that register the ops)',
            )
        if universal and kernels:
            raise self.error(
                "universal = true, but the project has [kernel.*] sections (compiled code)",
                "general.universal",
                "remove universal = true, or remove the [kernel.*] sections "
                "for a pure-Python kernel",
            )
        self.check_package_dir(package)

        if backends is None:
            backends = tuple(sorted({k.backend for k in kernels}))
        return KernelProject(
            root=self.root,
            build_toml=self.file,
            name=name,
            package=package,
            version=version,
            # Older schemas said universal = true; newer ones imply it by having no kernels.
            universal=universal if universal is not None else not kernels,
            backends=backends,
            cuda_minver=cuda_minver,
            cuda_maxver=cuda_maxver,
            python_depends=python_depends,
            hub=hub,
            torch=torch,
            kernels=kernels,
        )

    def checked_package_name(self, name: str) -> str:
        if not name.strip():
            raise self.error(
                "must not be empty",
                "general.name",
                'set name to the kernel\'s name, e.g. name = "img2gray"',
            )
        if len(name) > MAX_NAME:
            raise self.error(
                f"{name[:40]!r}… is {len(name)} characters long; at most {MAX_NAME} are allowed",
                "general.name",
                "use a short name: it is the package folder, the ops namespace and part of "
                "every wheel's file name (file systems refuse names over 255 bytes)",
            )
        package = package_name(name)
        if not _NAME_RE.fullmatch(name) or not is_package_name(package):
            via = f" ({package!r})" if package != name else ""
            raise self.error(
                f"{name!r} does not give a valid Python package name{via}",
                "general.name",
                "use ASCII letters, digits, '_' and '-', starting with a letter or '_' "
                "(it becomes the package torch-ext/<name with '-' -> '_'>/), "
                "and not a Python keyword",
            )
        return package

    def project_version(self, general: Mapping[str, Any]) -> str | None:
        raw = self.string(general, "version", "general.version")
        if raw is None:
            return None
        try:
            version = Version(raw)
        except InvalidVersion:
            raise self.error(
                f"{raw!r} is not a valid PEP 440 version",
                "general.version",
                'use a version such as "0.1.0" or "1.2.0rc1"',
            ) from None
        if version.local is not None:
            raise self.error(
                f"{raw!r} has a local version part ('+{version.local}')",
                "general.version",
                f'drop it (version = "{version.public}"): kernelwheel appends '
                "+torch<X><Y><backend>... per variant",
            )
        # Normalized, as it will appear in wheel names and METADATA.
        return str(version)

    def backends(self, general: Mapping[str, Any]) -> tuple[str, ...] | None:
        raw = self.string_list(general, "backends", "general.backends")
        if raw is None:
            return None
        if not raw:
            raise self.error(
                "lists no backends",
                "general.backends",
                f"list at least one of {', '.join(BACKENDS)}, or remove the key to derive "
                "the backends from the [kernel.*] sections",
            )
        for backend in raw:
            self.check_backend(backend, "general.backends")
        return tuple(sorted(set(raw)))

    def check_backend(self, backend: str, dotted: str) -> None:
        if backend in BACKENDS:
            return
        close = difflib.get_close_matches(backend.lower(), BACKENDS, n=1, cutoff=0.5)
        suggestion = f"did you mean {close[0]!r}? " if close else ""
        raise self.error(
            f"unknown backend {backend!r}",
            dotted,
            f"{suggestion}valid backends: {', '.join(BACKENDS)}",
        )

    def general_cuda(self, general: Mapping[str, Any]) -> tuple[Version | None, Version | None]:
        old_keys = [k for k in ("cuda-minver", "cuda-maxver") if k in general]
        if "cuda" in general:
            if old_keys:
                raise self.error(
                    f"both general.{old_keys[0]} and a [general.cuda] table are given",
                    "general.cuda",
                    "keep one form: cuda-minver/cuda-maxver under [general] (older schema), "
                    "or minver/maxver under [general.cuda] (newer schema)",
                )
            cuda = self.table(general, "cuda", "general.cuda")
            self.check_keys(cuda, _GENERAL_CUDA_KEYS, "general.cuda")
            return self.version_range(cuda, "general.cuda.minver", "general.cuda.maxver")
        return self.version_range(general, "general.cuda-minver", "general.cuda-maxver")

    def python_depends(self, general: Mapping[str, Any]) -> tuple[str, ...]:
        raw = self.string_list(general, "python-depends", "general.python-depends") or ()
        depends: list[str] = []
        for entry in raw:
            try:
                requirement = Requirement(entry)
            except InvalidRequirement as exc:
                # packaging's message spans lines (a caret diagram); keep the first.
                reason = str(exc).splitlines()[0] if str(exc) else "unparsable"
                raise self.error(
                    f"{entry!r} is not a valid requirement ({reason})",
                    "general.python-depends",
                    'write PEP 508 requirements, e.g. "einops>=0.7" or '
                    "\"numpy; python_version >= '3.10'\"",
                ) from None
            # Canonical spelling, as it will appear in Requires-Dist.
            depends.append(str(requirement))
        return tuple(depends)

    def hub(self, general: Mapping[str, Any]) -> HubConfig | None:
        if "hub" not in general:
            return None
        hub = self.table(general, "hub", "general.hub")
        self.check_keys(hub, _HUB_KEYS, "general.hub")
        repo_id = self.string(hub, "repo-id", "general.hub.repo-id")
        if repo_id is not None and not _HUB_REPO_RE.fullmatch(repo_id):
            raise self.error(
                f"{repo_id!r} is not a Hub repository id",
                "general.hub.repo-id",
                'use "<owner>/<name>", e.g. "kernels-community/img2gray"',
            )
        branch = self.string(hub, "branch", "general.hub.branch")
        if branch is not None and not branch.strip():
            raise self.error(
                "must not be empty", "general.hub.branch", "name a branch, or remove the key"
            )
        return HubConfig(repo_id=repo_id, branch=branch)

    def torch(self, data: Mapping[str, Any]) -> TorchSection | None:
        if "torch" not in data:
            return None
        torch = self.table(data, "torch", "torch")
        self.check_keys(torch, _TORCH_KEYS, "torch")
        src = self.paths(torch, "src", "torch.src", files_only=True)
        include = self.paths(torch, "include", "torch.include", files_only=False)
        pyext = self.pyext(torch)
        minver, maxver = self.version_range(torch, "torch.minver", "torch.maxver")
        return TorchSection(src=src, include=include, pyext=pyext, minver=minver, maxver=maxver)

    def pyext(self, torch: Mapping[str, Any]) -> tuple[str, ...]:
        raw = self.string_list(torch, "pyext", "torch.pyext")
        if raw is None:
            return DEFAULT_PYEXT
        suffixes: list[str] = []
        for entry in raw:
            suffix = entry[1:] if entry.startswith(".") else entry  # ".py" means "py"
            if not _PYEXT_RE.fullmatch(suffix):
                raise self.error(
                    f"{entry!r} is not a file suffix",
                    "torch.pyext",
                    'list suffixes without paths or wildcards, e.g. pyext = ["py", "json"]',
                )
            if suffix not in suffixes:
                suffixes.append(suffix)
        return tuple(suffixes)

    def kernels(self, data: Mapping[str, Any], package: str) -> tuple[KernelSection, ...]:
        if "kernel" not in data:
            return ()
        table = self.table(data, "kernel", "kernel")
        kernels: list[KernelSection] = []
        for kernel_id, section in table.items():
            dotted = f"kernel.{kernel_id}"
            if not isinstance(section, dict):
                if kernel_id in _KERNEL_KEYS:
                    # `[kernel]` + `backend = ...`: the id was left out of the header.
                    raise self.error(
                        f"{kernel_id!r} is set directly under [kernel]; "
                        "each kernel needs its own [kernel.<id>] table",
                        dotted,
                        f"rename the [kernel] header to [kernel.<id>], e.g. [kernel.{package}]",
                    )
                raise self.error(
                    f"expected a table, got {_describe(section)}",
                    dotted,
                    f"write it as a [{dotted}] table with backend and src",
                )
            if not _KERNEL_ID_RE.fullmatch(kernel_id):
                raise self.error(
                    f"invalid kernel id {kernel_id!r}",
                    dotted,
                    "use ASCII letters, digits, '_' and '-' in the id of [kernel.<id>]",
                )
            kernels.append(self.kernel(kernel_id, section))
        return tuple(kernels)

    def kernel(self, kernel_id: str, section: Mapping[str, Any]) -> KernelSection:
        prefix = f"kernel.{kernel_id}"
        self.check_keys(section, _KERNEL_KEYS, prefix)
        backend = self.required_string(
            section,
            "backend",
            f"{prefix}.backend",
            f'add backend = "<one of {", ".join(BACKENDS)}>" to [{prefix}]',
        )
        self.check_backend(backend, f"{prefix}.backend")
        if "src" not in section:
            raise self.error(
                "missing required key",
                f"{prefix}.src",
                f'add src = ["csrc/<file>.cu", ...] to [{prefix}], listing its sources',
            )
        src = self.paths(section, "src", f"{prefix}.src", files_only=True)
        if not src:
            raise self.error(
                "lists no sources",
                f"{prefix}.src",
                f"list the kernel's source files, or remove the [{prefix}] section",
            )
        return KernelSection(
            id=kernel_id,
            backend=backend,
            src=src,
            depends=self.string_list(section, "depends", f"{prefix}.depends") or (),
            include=self.paths(section, "include", f"{prefix}.include", files_only=False),
            cxx_flags=self.string_list(section, "cxx-flags", f"{prefix}.cxx-flags") or (),
            cuda_flags=self.string_list(section, "cuda-flags", f"{prefix}.cuda-flags") or (),
            cuda_capabilities=self.capabilities(section, f"{prefix}.cuda-capabilities"),
            cuda_minver=self.version(section, "cuda-minver", f"{prefix}.cuda-minver"),
        )

    def capabilities(self, section: Mapping[str, Any], dotted: str) -> tuple[str, ...]:
        raw = self.string_list(section, "cuda-capabilities", dotted)
        if raw is None:
            return ()
        if not raw:
            raise self.error(
                "lists no capabilities",
                dotted,
                "remove the key to build for the default capabilities of the CUDA version, "
                'or list some, e.g. ["8.0", "9.0"]',
            )
        capabilities: list[str] = []
        for entry in raw:
            if not _CAPABILITY_RE.fullmatch(entry):
                digits = _CAPABILITY_DIGITS_RE.fullmatch(entry)
                if digits:
                    hint = f'write it as "{digits[1]}.{digits[2]}{digits[3]}"'
                else:
                    hint = 'write capabilities as "X.Y" (optionally "X.Ya" or "X.Yf"), ' + (
                        'e.g. ["8.0", "9.0a", "12.0"]'
                    )
                raise self.error(f"invalid CUDA capability {entry!r}", dotted, hint)
            if entry not in capabilities:
                capabilities.append(entry)
        return tuple(capabilities)

    def check_package_dir(self, package: str) -> None:
        init = self.root / "torch-ext" / package / "__init__.py"
        if init.is_file():
            return
        rel = f"torch-ext/{package}/__init__.py"
        hint = f"create {rel}: the Python package that exposes the ops"
        # A package under another name usually means general.name has a typo.
        found = sorted(p.parent.name for p in (self.root / "torch-ext").glob("*/__init__.py"))
        if found:
            hint += (
                f", or set general.name to match an existing package "
                f"({', '.join(found)}); the package is general.name with '-' -> '_'"
            )
        raise self.error(f"{rel} does not exist", "general.name", hint)

    # -- typed values -----------------------------------------------------------------------

    def check_keys(self, table: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
        for key in table:
            if key not in known:
                dotted = f"{prefix}.{key}" if prefix else key
                raise self.error(
                    f"unknown key {key!r}", dotted, self.unknown_key_hint(key, known, prefix)
                )

    @staticmethod
    def unknown_key_hint(key: str, known: tuple[str, ...], prefix: str) -> str:
        kebab = key.replace("_", "-").lower()
        if kebab in known:
            return f"did you mean {kebab!r}? build.toml keys are kebab-case"
        close = difflib.get_close_matches(kebab, known, n=1, cutoff=0.8)
        if close:
            return f"did you mean {close[0]!r}?"
        homes = _KEY_HOMES.get(kebab)
        if homes:
            return f"{kebab!r} belongs in {' or '.join(homes)}; move it there"
        close = difflib.get_close_matches(kebab, known, n=1, cutoff=0.6)
        if close:
            return f"did you mean {close[0]!r}?"
        where = f"[{prefix}]" if prefix else "the top level"
        return f"remove it; keys allowed in {where}: {', '.join(known)}"

    def table(self, parent: Mapping[str, Any], key: str, dotted: str) -> Mapping[str, Any]:
        value = parent[key]
        if not isinstance(value, dict):
            raise self.error(
                f"expected a table, got {_describe(value)}",
                dotted,
                f"write it as a [{dotted}] table",
            )
        return value

    def string(self, table: Mapping[str, Any], key: str, dotted: str) -> str | None:
        if key not in table:
            return None
        value = table[key]
        if not isinstance(value, str):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                hint = f'quote it: {key} = "{value}"'
            else:
                hint = f'write it as a string: {key} = "..."'
            raise self.error(f"expected a string, got {_describe(value)}", dotted, hint)
        return value

    def required_string(self, table: Mapping[str, Any], key: str, dotted: str, hint: str) -> str:
        value = self.string(table, key, dotted)
        if value is None:
            raise self.error("missing required key", dotted, hint)
        return value

    def boolean(self, table: Mapping[str, Any], key: str, dotted: str) -> bool | None:
        if key not in table:
            return None
        value = table[key]
        if not isinstance(value, bool):
            raise self.error(
                f"expected a boolean, got {_describe(value)}",
                dotted,
                f"write {key} = true or {key} = false (no quotes)",
            )
        return value

    def string_list(
        self, table: Mapping[str, Any], key: str, dotted: str
    ) -> tuple[str, ...] | None:
        if key not in table:
            return None
        value = table[key]
        if isinstance(value, str):
            raise self.error(
                f"expected an array of strings, got {_describe(value)}",
                dotted,
                f'wrap it in brackets: {key} = ["{value}"]',
            )
        if not isinstance(value, list):
            raise self.error(
                f"expected an array of strings, got {_describe(value)}",
                dotted,
                f'write it as {key} = ["...", "..."]',
            )
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(
                    f"expected an array of strings, but item {index} is {_describe(item)}",
                    dotted,
                    "quote every item",
                )
            if not item.strip():
                raise self.error(
                    f"item {index} is an empty string", dotted, "remove the empty item"
                )
        return tuple(value)

    def paths(
        self, table: Mapping[str, Any], key: str, dotted: str, *, files_only: bool
    ) -> tuple[Path, ...]:
        """Relative, normalized paths that must exist inside the project root."""
        paths: list[Path] = []
        for entry in self.string_list(table, key, dotted) or ():
            # build.toml paths are '/'-separated; '../other' and '/abs' are refused lexically,
            # symlinks (even in a parent folder) by where they resolve: inside the root only.
            if entry.startswith("/") or Path(entry).is_absolute():
                raise self.error(
                    f"{entry!r} is an absolute path",
                    dotted,
                    f"write paths relative to the project root {self.root}",
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
                    self.missing_path_hint(entry, full),
                )
            if files_only and not full.is_file():
                raise self.error(
                    f"{entry!r} is not a file",
                    dotted,
                    "list source files one by one (directories belong in include)",
                )
            path = Path(normalized)
            if path not in paths:
                paths.append(path)
        return tuple(paths)

    def missing_path_hint(self, entry: str, full: Path) -> str:
        if any(c in entry for c in "*?["):
            return "wildcards are not expanded: list each file"
        if full.parent.is_dir():
            # Same suffix (a typo in the stem) or same stem (wrong extension) only, so a
            # not-yet-written foo.cu is not "corrected" to an unrelated foo_cpu.cpp.
            names = [
                p.name
                for p in full.parent.iterdir()
                if p.suffix == full.suffix or p.stem == full.stem
            ]
            close = difflib.get_close_matches(full.name, names, n=1, cutoff=0.6)
            if close:
                return f"did you mean {posixpath.join(posixpath.dirname(entry), close[0])!r}?"
        return "fix the path (relative to the project root) or create the file"

    def version(self, table: Mapping[str, Any], key: str, dotted: str) -> Version | None:
        raw = self.string(table, key, dotted)
        if raw is None:
            return None
        try:
            return Version(raw)
        except InvalidVersion:
            raise self.error(
                f"{raw!r} is not a valid version",
                dotted,
                f'use a version such as {key} = "2.5" or {key} = "12.4"',
            ) from None

    def version_range(
        self, table: Mapping[str, Any], min_dotted: str, max_dotted: str
    ) -> tuple[Version | None, Version | None]:
        low = self.version(table, _leaf(min_dotted), min_dotted)
        high = self.version(table, _leaf(max_dotted), max_dotted)
        if low is not None and high is not None and low > high:
            raise self.error(
                f"minimum {low} is greater than maximum {high} ({max_dotted})",
                min_dotted,
                "swap or correct the bounds (both are inclusive)",
            )
        return low, high
