"""The C++ headers a kernel's ``depends`` asks for (docs/dependencies.md): :func:`plan_headers`
decides where each comes from when the request is made, :func:`provide_headers` gives a local
checkout or a PyPI wheel's header folders."""

from __future__ import annotations

import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .._util import RUNNER, Runner, locked, publish, sha256_file, staging_dir
from ..errors import KernelwheelError, ProjectError, ToolchainError, UsageError
from ..model.deps import VERSION_HEADER, Dependency, DependencyTable, HeaderWheel, Provider
from ..model.project import KernelProject
from ..model.sources import PipSources
from ..model.variant import BackendKind, Variant
from ..plan.options import Options

OPTION = "cutlass-path"
_DEFINE_RE = re.compile(r"^\s*#\s*define\s+CUTLASS_(MAJOR|MINOR|PATCH)\s+(\d+)\b", re.M)


@dataclass(frozen=True)
class HeaderSource:
    """Where one dependency's headers come from in a build: a pinned PyPI wheel, or a local
    checkout (``local``). ``kernels`` are the kernels that need it."""

    dependency: Dependency
    kernels: tuple[str, ...]
    wheel: HeaderWheel | None = None
    local: Path | None = None

    def describe(self) -> str:
        where = f"local checkout {self.local}" if self.local else None
        if where is None and self.wheel is not None:
            where = f"{self.wheel.describe()} (sha256 {self.wheel.sha256[:12]}…)"
        return f"{self.dependency.describe()} from {where}"


@dataclass(frozen=True)
class HeaderPlan:
    """The header dependencies of one variant's compile, and where pip looks for wheels."""

    sources: tuple[HeaderSource, ...] = ()
    index: PipSources = PipSources()


def depends_refusals(
    project: KernelProject, variants: Sequence[Variant], table: DependencyTable, options: Options
) -> dict[str, KernelwheelError]:
    """For the dry runs (``matrix``, ``--print-build-identifiers``): each variant's refusal of
    :func:`plan_headers` by name; one about the project or the options is raised."""
    refusals: dict[str, KernelwheelError] = {}
    for variant in variants:
        try:
            plan_headers(project, variant, table, options)
        except (ProjectError, UsageError):
            raise  # about the project or the options: no variant of it builds
        except KernelwheelError as exc:
            refusals[variant.name] = exc
    return refusals


def plan_headers(
    project: KernelProject, variant: Variant, table: DependencyTable, options: Options
) -> HeaderPlan:
    """Where the headers of the kernels' dependencies come from. Every kernel's names are checked
    (kernel-builder knows them whatever the backend); only the compiled ones must be available."""
    for kernel in project.kernels:
        for name in kernel.depends:
            if table.get(name) is None:
                raise ProjectError(
                    f"unknown dependency {name!r}",
                    file=project.build_toml,
                    key=f"kernel.{kernel.id}.depends",
                    hint=table.suggest(name),
                )
    needed: dict[str, list[str]] = {}
    # the kernel backends the variant compiles: CPU, and CUDA for a CUDA variant
    cuda = variant.backend is not None and variant.backend.kind is BackendKind.CUDA
    for kernel in project.kernels_for(("cpu", "cuda") if cuda else ("cpu",)):
        for name in kernel.depends:
            needed.setdefault(name, []).append(kernel.id)
    _check_named_checkouts(table, options)
    sources: list[HeaderSource] = []
    for name, kernels in needed.items():
        dep = table.get(name)
        assert dep is not None
        if dep.provider is Provider.ENVIRONMENT:
            continue
        if dep.provider is Provider.UNSUPPORTED:
            raise ToolchainError(
                f"kernel.{kernels[0]} of {project.build_toml} depends on {name}, which "
                f"kernelwheel cannot provide for {variant.name}: {dep.reason}",
                hint=f"build that kernel with kernel-builder, or remove {name} from its depends "
                "if it does not include those headers",
            )
        sources.append(_source(dep, tuple(kernels), project, options))
    return HeaderPlan(tuple(sources), options.pip_sources)


def _check_named_checkouts(table: DependencyTable, options: Options) -> None:
    """Each ``NAME=DIR`` of cutlass-path names a CUTLASS dependency."""
    for entry in options.cutlass_path:
        if entry.dependency is None:
            continue
        if (dep := table.get(entry.dependency)) is None or dep.library != "cutlass":
            cutlass = [d.name for d in table.deps if d.library == "cutlass"]
            raise UsageError(
                f"{options.source('cutlass_path')} {entry.describe()}: "
                f"{entry.dependency!r} is not a CUTLASS dependency",
                hint=f"name one of: {', '.join(cutlass)}",
            )


def _source(
    dep: Dependency, kernels: tuple[str, ...], project: KernelProject, options: Options
) -> HeaderSource:
    assert dep.version is not None and dep.library is not None
    # the entry naming dep, else the unnamed one (every CUTLASS dependency)
    named = (e for want in (dep.name, None) for e in options.cutlass_path if e.dependency == want)
    checkout = next(named, None)
    label = options.source("cutlass_path")
    if checkout is not None:
        found = checkout_version(checkout.path, dep.library)
        if found is not None and found != dep.version:
            header = VERSION_HEADER[dep.library]
            raise UsageError(
                f"{label} {checkout.describe()} holds CUTLASS {found} ({header}), but "
                f"kernel.{kernels[0]} of {project.build_toml} depends on {dep.describe()}",
                hint=f"check out v{dep.version} there (git -C {checkout.path} checkout "
                f"v{dep.version}), or give each release its own checkout: "
                f"{dep.name}=DIR",
            )
        return HeaderSource(dep, kernels, local=checkout.path)
    if dep.wheel is None:
        raise ToolchainError(
            f"kernel.{kernels[0]} of {project.build_toml} depends on {dep.describe()}, and no "
            f"PyPI wheel carries CUTLASS {dep.version}",
            hint=f"clone that release (git clone --depth 1 --branch v{dep.version} "
            f"https://github.com/NVIDIA/cutlass DIR) and pass --cutlass-path DIR (or "
            f'KERNELWHEEL_CUTLASS_PATH=DIR, or {OPTION} = "DIR" in [tool.kernelwheel]); '
            f"for one release among several: {dep.name}=DIR",
        )
    return HeaderSource(dep, kernels, wheel=dep.wheel)


def checkout_version(path: Path, library: str) -> str | None:
    """The release a checkout's version header names; None without one (CUTLASS before 2.11)
    or when it does not say."""
    try:
        text = (path / VERSION_HEADER[library]).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    parts = dict(_DEFINE_RE.findall(text))
    if not all(k in parts for k in ("MAJOR", "MINOR", "PATCH")):
        return None
    return f"{int(parts['MAJOR'])}.{int(parts['MINOR'])}.{int(parts['PATCH'])}"


# --- the compile step's half ------------------------------------------------------------------


def provide_headers(
    plan: HeaderPlan, cache_dir: Path, python: Path | None, log: Path, runner: Runner = RUNNER
) -> tuple[Path, ...]:
    """The include folders of ``plan``, PyPI headers unpacked into ``cache_dir`` on first use
    with ``python``'s pip (None: kernelwheel's own)."""
    out: list[Path] = []
    for source in plan.sources:
        if source.local is not None:
            folders = [source.local / "include"]
            util = source.local / "tools" / "util" / "include"  # a source checkout's utilities
            folders += [util] if util.is_dir() else []
        else:
            assert source.wheel is not None
            root = unpack_headers(source.wheel, cache_dir, python, plan.index, log, runner)
            folders = [root / folder for folder in source.wheel.include]
        with open(log, "a") as fh:
            fh.write(f"headers: {source.describe()}: {', '.join(map(str, folders))}\n")
        out += [f for f in folders if f not in out]
    return tuple(out)


def unpack_headers(
    wheel: HeaderWheel,
    cache_dir: Path,
    python: Path | None,
    index: PipSources,
    log: Path,
    runner: Runner = RUNNER,
) -> Path:
    """``<cache>/deps/<name>-<version>-<sha256 prefix>``, holding ``wheel``'s include folders at
    their paths in the wheel; made once and published by one rename."""
    parent = cache_dir / "deps"
    final = parent / f"{wheel.name}-{wheel.version}-{wheel.sha256[:16]}"
    if final.is_dir():
        return final
    with locked(parent / f"{final.name}.lock"):
        if final.is_dir():  # another build made it while this one waited
            return final
        with staging_dir(parent, "headers") as tmp:
            downloaded = _download(wheel, tmp / "download", python, index, log, runner)
            tree = tmp / "tree"
            _extract(downloaded, wheel, tree)
            publish(tree, final)
    return final


def _download(
    wheel: HeaderWheel,
    dest: Path,
    python: Path | None,
    index: PipSources,
    log: Path,
    runner: Runner,
) -> Path:
    dest.mkdir(parents=True)
    requirements = dest.parent / "requirements.txt"
    requirements.write_text(wheel.requirement_line + "\n")
    cmd = [str(python or sys.executable), "-m", "pip", "download", "--disable-pip-version-check"]
    cmd += ["--no-input", "--no-deps", "--only-binary=:all:", "--require-hashes"]
    cmd += index.pip_args()
    runner.checked(
        [*cmd, "--dest", str(dest), "-r", str(requirements)],
        log,
        f"download {wheel.name}=={wheel.version} (for its C++ headers)",
        hint=f"the pinned sha256 is in recipes/deps.toml; offline, put the wheel in a "
        f"--find-links folder, or pass --{OPTION} DIR with a checkout of that release",
    )
    found = sorted(dest.glob("*.whl"))
    if len(found) != 1 or sha256_file(found[0]) != wheel.sha256:
        raise ToolchainError(
            f"pip download of {wheel.name}=={wheel.version} gave "
            f"{', '.join(p.name for p in found) or 'no wheel'}, not the wheel with sha256 "
            f"{wheel.sha256}",
            hint="check the pin in recipes/deps.toml against what the index serves",
        )
    return found[0]


def _extract(path: Path, wheel: HeaderWheel, tree: Path) -> None:
    """Unpack the files under ``wheel.include`` from the wheel at ``path`` into ``tree``."""
    prefixes = tuple(folder.rstrip("/") + "/" for folder in wheel.include)
    try:
        names = unzip(
            path, tree, lambda name: name.startswith(prefixes), "unsafe path {} in the wheel"
        )
    except (zipfile.BadZipFile, OSError) as exc:
        raise ToolchainError(f"cannot unpack {path}: {exc}") from None
    found = {next(p for p in prefixes if name.startswith(p)) for name in names}
    if empty := [p.rstrip("/") for p in prefixes if p not in found]:
        raise ToolchainError(
            f"{path.name} has no files under {', '.join(empty)}",
            hint=f"fix the include folders of {wheel.name} {wheel.version} in recipes/deps.toml",
        )


def unzip(
    path: Path, tree: Path, keep: Callable[[str], object], unsafe: str, skip: Set[str] = frozenset()
) -> list[str]:
    """The files of the zip ``path`` that ``keep`` names, but those ``skip`` names, written under
    ``tree`` at their paths; their names. One leading out of it is refused, ``unsafe`` saying so."""
    written: list[str] = []
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename
            if info.is_dir() or not keep(name):
                continue
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts:
                raise ToolchainError(f"{path.name}: " + unsafe.format(repr(name)))
            if rel.name in skip:
                continue
            target = tree.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            written.append(name)
    return written
