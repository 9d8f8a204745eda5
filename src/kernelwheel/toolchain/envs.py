"""Isolated build environments: one venv per recipe, holding the variant's torch and toolchain,
keyed by a digest of what goes into it, made once (under a lock, a ready marker written last) and
reused by later builds; and the CUDA toolkit a build compiles with."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import re
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .._util import RUNNER, Runner, atomic_write, locked, staging_dir
from ..compat import interpreter, probe_cache
from ..compile.capabilities import unsupported
from ..errors import ToolchainError
from ..model.capability import CudaCapability
from ..model.recipes import VariantRecipe
from ..model.sources import PipSources

READY_MARKER = ".kernelwheel-ready"


@contextmanager
def _whole_or_nothing(root: Path) -> Iterator[None]:
    """``root`` made from nothing in the block (one there before, half-made or damaged, removed);
    however the block fails (an error, an interrupt), nothing of it is left."""
    if root.exists():
        shutil.rmtree(root)
    try:
        yield
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def made_once(root: Path, make: Callable[[], None], stamp: str) -> None:
    """``make()`` fills the new folder ``root`` (a tool in the cache) once, under its lock; the
    ready marker, holding ``stamp``, is written last."""
    with locked(root.parent / f"{root.name}.lock"):
        ready = root / READY_MARKER
        if ready.exists():
            return
        with _whole_or_nothing(root):
            root.mkdir(parents=True)
            make()
        ready.write_text(stamp)


# Build tools every environment gets besides torch; pinned so environments are reproducible.
BUILD_TOOLS = ("setuptools>=69,<81", "ninja>=1.11,<1.14", "wheel>=0.43,<0.47", "numpy>=1.26,<3")


@dataclass(frozen=True)
class EnvSpec:
    torch_requirement: str
    packages: tuple[str, ...] = ()  # toolchain pins, e.g. nvidia-cuda-nvcc==13.0.88
    sources: PipSources = PipSources()  # the options' and the recipe's own index

    def digest(self, python: str) -> str:
        fields = {
            **index_fields(self.sources),
            "python": python,
            "torch": self.torch_requirement,
            "packages": sorted(self.packages),
            "tools": BUILD_TOOLS,
        }
        if self.sources.no_index:  # only when set, so existing environments keep their digest
            fields["no_index"] = True
        return cache_key(fields)


def index_fields(sources: PipSources) -> dict[str, object]:
    """Where pip looks, as the environments' and the cross targets' keys hold it."""
    extra, links = list(sources.extra_index_urls), list(sources.find_links)
    return {"index": sources.index_url, "extra": extra, "links": links}


def cache_key(fields: Mapping[str, object]) -> str:
    """A cache folder's key: the sha256 of ``fields`` as sorted JSON, 16 hex digits."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def env_spec_for(recipe: VariantRecipe, sources: PipSources) -> EnvSpec:
    """The environment of ``recipe``, fetched from ``sources``; the recipe's own index (e.g.
    PyTorch's CPU wheels) is its one extra index unless the options name an index or forbid one."""
    assert recipe.torch_requirement is not None
    cuda = recipe.cuda
    packages = cuda.requirements() if cuda is not None and cuda.source == "pypi" else ()
    own_index = recipe.index_url and not sources.index_url and not sources.no_index
    extra = (recipe.index_url,) if own_index and recipe.index_url else ()
    return EnvSpec(recipe.torch_requirement, packages, replace(sources, extra_index_urls=extra))


@dataclass(frozen=True)
class EnvInfo:
    python: Path
    python_version: str
    machine: str
    purelib: Path
    torch: str
    cuda: str | None
    hip: str | None
    cxx11_abi: bool
    reused: bool = False
    notes: tuple[str, ...] = ()  # what making it found and repaired (a dead run's, damage)

    @property
    def torch_minor(self) -> tuple[int, int]:
        major, minor = self.torch.split("+")[0].split(".")[:2]
        return int(major), int(minor)


def probe(python: Path, cache_dir: Path | None = None, runner: Runner = RUNNER) -> EnvInfo:
    """Run ``python`` once (kernelwheel.compat.interpreter) and keep what a build needs of it;
    with ``cache_dir``, an unchanged interpreter's report is reused (compat.probe_cache)."""
    try:
        if cache_dir is None:
            found, kept = interpreter.run(python, runner=runner), False
        else:
            found, kept = probe_cache.run_cached(python, cache_dir, runner)
    except interpreter.ProbeFailed as exc:
        if not exc.started:
            raise ToolchainError(
                f"cannot run the interpreter {python}: {exc}", hint="pass an existing python"
            ) from None
        raise ToolchainError(
            f"{python} failed to start:\n{exc}",
            hint="pass a working Python 3 interpreter with --python, or omit --python so "
            "kernelwheel creates a build environment",
        ) from None
    if found.torch is None:
        raise ToolchainError(
            f"{python} has no usable torch ({found.torch_error})",
            hint="install the variant's torch into that interpreter, or omit --python so "
            "kernelwheel creates a build environment",
        )
    return EnvInfo(
        python=found.executable,
        python_version=found.python_version,
        machine=found.machine,
        purelib=found.purelib,
        torch=found.torch.version,
        cuda=found.torch_cuda,
        hip=found.torch_hip,
        cxx11_abi=found.torch.cxx11,
        reused=kept,
    )


@dataclass(frozen=True)
class PipStep:
    """One ``pip install`` into a new environment: ``args``, or ``requirements`` written to
    ``file``; ``explain`` may replace the failure that ``what`` and ``hint`` word."""

    args: tuple[str, ...] = ()
    what: str = ""
    hint: str | None = None
    requirements: tuple[str, ...] = ()
    file: str = ""
    explain: Callable[[ToolchainError], ToolchainError] | None = None


def toolchain_step(packages: Sequence[str]) -> PipStep:
    """The pinned CUDA toolchain packages of a recipe (recipes/cuda.toml), installed alone: the
    set is closed under its dependencies and pinned with hashes (hash-checking mode if any)."""
    return PipStep(
        what="install the pinned CUDA toolchain",
        hint="the recipe's pins or hashes do not match what the index serves: check "
        "recipes/cuda.toml",
        requirements=tuple(packages),
        file="toolchain-requirements.txt",
    )


def make_env(
    root: Path,
    base: Path,
    sources: PipSources,
    steps: Sequence[PipStep],
    log: Path | None,
    runner: Runner,
) -> Path:
    """The one way a build environment is made: ``base``'s venv at ``root``, then ``steps`` from
    ``sources``; its python. The caller holds the lock and writes the ready marker."""
    with _whole_or_nothing(root):
        runner.checked([str(base), "-m", "venv", str(root)], log, "create the build venv")
        py = root / "bin" / "python"
        pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        pip += sources.pip_args()
        for step in steps:
            args = list(step.args)
            if step.requirements:
                reqs = root / step.file
                reqs.write_text("\n".join(step.requirements) + "\n")
                hashed = any("--hash=" in r for r in step.requirements)
                args += ["--no-deps", *(["--require-hashes"] if hashed else []), "-r", str(reqs)]
            try:
                runner.checked([*pip, *args], log, step.what, hint=step.hint)
            except ToolchainError as exc:
                if step.explain is None:
                    raise
                raise step.explain(exc) from None
        return py


def env_root(spec: EnvSpec, cache_dir: Path) -> Path:
    py_version = "{}.{}".format(*sys.version_info)
    return cache_dir / "envs" / f"py{py_version}-{spec.digest(py_version)}"


def env_ready(spec: EnvSpec, cache_dir: Path) -> bool:
    """Whether the environment of ``spec`` is made (:func:`provision` checks it is whole)."""
    return (env_root(spec, cache_dir) / READY_MARKER).is_file()


def provision(
    spec: EnvSpec, cache_dir: Path, *, log: Path | None = None, runner: Runner = RUNNER
) -> EnvInfo:
    """Create (or reuse) the environment for spec and return its probe."""
    root = env_root(spec, cache_dir)
    marker = root / READY_MARKER
    notes: list[str] = []
    with locked(root.parent / f"{root.name}.lock") as dead:
        if dead is not None and not marker.exists():
            notes.append(f"build environment {root}: {dead.describe()}; it is made again")
        if marker.exists():
            # The environment is immutable once marked ready, so its probe is too; a marker
            # from an older kernelwheel, without the probe, is upgraded once, and so is one of
            # a cache copied or moved here, whose probe names where it was made.
            cached = _read_marker(marker)
            if cached is None:
                _write_marker(marker, probe(root / "bin" / "python", runner=runner))
                cached = _read_marker(marker)
            assert cached is not None
            if (damage := _damage(marker, cached)) is None:
                return cached
            # Files the marker promised are gone (a cleaner, a disk error, a hand): trusting
            # it would report the missing headers as the user's compile error.
            notes.append(f"build environment {root} is damaged ({damage}): it is made again")

        def explain(exc: ToolchainError) -> ToolchainError:
            tail = log.read_text(errors="replace")[-20000:] if log and log.is_file() else ""
            # pip names an index it cannot reach only in its verbose output: ask each one
            down = {url: why for url in spec.sources.asked if (why := unreachable(url)) is not None}
            return torch_install_error(spec, exc.message, tail, down)

        torch = spec.torch_requirement
        steps = [PipStep((torch, *BUILD_TOOLS), f"install {torch}", explain=explain)]
        steps += [toolchain_step(spec.packages)] if spec.packages else []
        py = make_env(root, Path(sys.executable), spec.sources, steps, log, runner)
        info = probe(py, runner=runner)
        _write_marker(marker, info)
        return dataclasses.replace(info, notes=tuple(notes))


# pip's words for an index it could not reach (urllib3 and pip's own)
_UNREACHABLE = (
    "Could not fetch URL",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Max retries exceeded",
    "ConnectTimeoutError",
    "ProxyError",
)


def unreachable(url: str, timeout: float = 10) -> str | None:
    """Why the index ``url`` cannot be reached (one line), or None when it answers: a client
    error (404...) is an answer, a server error (5xx) is not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        return None if exc.code < 500 else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return str(reason) or type(exc).__name__


def torch_install_error(
    spec: EnvSpec, failed: str, log_tail: str, down: Mapping[str, str]
) -> ToolchainError:
    """A failed ``pip install <torch>``: where pip looked, those ``down`` (URL -> why), pip's
    reason, how to provide the wheel (``torch==X+cpu`` only from PyTorch's index)."""
    sources = spec.sources
    places = list(sources.asked)
    places += [f"--find-links {link}" for link in sources.find_links]
    lines = log_tail.splitlines()
    fetch = next((ln.strip() for ln in lines if any(w in ln for w in _UNREACHABLE)), None)
    errors = [ln.strip() for ln in lines if ln.startswith("ERROR:")]
    cause = "; ".join(c[:300] for c in (fetch, errors[-1] if errors else None) if c)
    message = (
        f"{failed}: pip found no {spec.torch_requirement} in "
        + (", ".join(places) or "nothing (--no-index without --find-links)")
        + "".join(f"\n  {url} is unreachable: {why}" for url, why in down.items())
        + (f"\n  pip: {cause}" if cause else "")
    )
    own = sources.extra_index_urls[0] if sources.extra_index_urls else None
    if own is not None and "+" in spec.torch_requirement:
        reach = "this machine cannot reach" if own in down else "let this machine reach"
        hint = (
            f"{spec.torch_requirement} is published on PyTorch's index {own}, not on PyPI: "
            f"{reach} {own}; or download the wheel where it can (pip download "
            f"'{spec.torch_requirement}' --index-url {own} --no-deps) and pass --find-links DIR"
        )
    elif down or fetch:
        hint = (
            f"let this machine reach {' and '.join(places) or 'the index'}, or pass --find-links "
            "DIR with the wheels (--no-index for a fully offline build)"
        )
    else:
        hint = (
            "check the --index-url/--find-links options and the recipe's torch pin "
            "(recipes/torch.toml); the log has pip's full output"
        )
    return ToolchainError(message, hint=hint)


# What the ready marker promises, relative to the environment's purelib: the files the
# install wrote under these folders (torch's headers and libraries, the CUDA packages), as the
# RECORDs of their distributions list them, each there with its recorded size on every reuse.
# A file a build adds there (nvcc's, a link) is in no RECORD, so it never marks the environment
# damaged; contents are not hashed (gigabytes on every build), a size catches a truncation.
_MANIFEST_DIRS = ("torch/include/", "torch/lib/", "torch/share/cmake/", "nvidia/")


def _recorded(record: Path) -> list[tuple[str, int | None]]:
    """The rows of a RECORD under the manifest's folders: path and size (None: unrecorded)."""
    rows = csv.reader(record.read_text(errors="replace").splitlines())
    return [
        (row[0], int(row[2]) if row[2].isdigit() else None)
        for row in rows
        if len(row) >= 3 and row[0].startswith(_MANIFEST_DIRS)
    ]


def _manifest(purelib: Path) -> dict[str, int]:
    """Each distribution with files under the manifest's folders: how many its RECORD lists."""
    counts: dict[str, int] = {}
    for record in sorted(purelib.glob("*.dist-info/RECORD")):
        with suppress(OSError):  # an unreadable RECORD promises nothing
            if rows := _recorded(record):
                counts[record.parent.name] = len(rows)
    return counts


def _counts(purelib: Path) -> dict[str, int]:
    return {
        rel.rstrip("/"): sum(len(files) for _, _, files in os.walk(purelib / rel))
        for rel in _MANIFEST_DIRS
        if (purelib / rel).is_dir()
    }


def _damage(marker: Path, info: EnvInfo) -> str | None:
    """What of the marker's promise no longer holds, in words; None when all of it holds (or an
    older kernelwheel's marker promises nothing checkable: it gets a promise now)."""
    try:
        promised = json.loads(marker.read_text()).get("installed")
    except (OSError, ValueError, AttributeError):
        promised = None
    if not isinstance(promised, dict):
        _write_marker(marker, info)
        return None
    for dist, count in sorted(promised.items()):
        try:
            rows = _recorded(info.purelib / dist / "RECORD")
        except OSError:
            return f"{dist}/RECORD is gone"
        if len(rows) != count:
            return f"{dist}/RECORD lists {len(rows)} of the {count} files the ready marker counts"
        for rel, size in rows:
            try:  # os.stat on a str: ~12k files, a tenth of a second on every reuse
                found = os.stat(os.path.join(info.purelib, rel)).st_size
            except OSError:
                return f"{rel} is missing"
            if size is not None and found != size:
                return f"{rel} has {found} of the {size} bytes {dist} installed"
    return None


def _write_marker(path: Path, info: EnvInfo) -> None:
    data: dict[str, Any] = {
        k: str(v) if isinstance(v, Path) else v
        for k, v in asdict(info).items()
        if k not in ("notes", "reused")
    }
    # "manifest": the file counts an older kernelwheel checks instead: one sharing this cache
    # finds its promise there, and neither rewrites the marker nor (a build adding nothing)
    # remakes it.
    data.update(installed=_manifest(info.purelib), manifest=_counts(info.purelib))
    # Written last, atomically: the environment is complete.
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def made_here(python: Path, root: Path) -> bool:
    """Whether ``python``, a ready marker's probe, is the interpreter at ``root``: a cache copied
    or moved keeps the probe of where it was made."""
    here = os.path.realpath(root / "bin")
    return python.exists() and os.path.realpath(python.parent) == here


def _read_marker(path: Path) -> EnvInfo | None:
    """The probe the ready marker ``path`` holds of this environment, else None."""
    plain = ("python_version", "machine", "torch", "cuda", "hip", "cxx11_abi")  # and two paths
    try:
        data = json.loads(path.read_text())
        values = {key: data[key] for key in plain}
        info = EnvInfo(Path(data["python"]), purelib=Path(data["purelib"]), **values, reused=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if made_here(info.python, path.parent) else None


# --- CUDA toolkits ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaToolkit:
    home: Path
    version: str  # "13.0"
    extra_includes: tuple[Path, ...] = ()  # e.g. cuBLAS headers from torch's nvidia packages

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def nvcc_version(home: Path, runner: Runner = RUNNER) -> str:
    nvcc = home / "bin" / "nvcc"
    if not nvcc.exists():
        raise ToolchainError(f"no nvcc at {nvcc}", hint="point --cuda-home at a CUDA toolkit")
    proc = runner.captured([nvcc, "--version"])
    m = re.search(r"release (\d+\.\d+)", proc.stdout)
    if proc.returncode != 0 or m is None:
        raise ToolchainError(f"{nvcc} --version failed: {proc.stderr.strip() or proc.stdout}")
    return m.group(1)


def supported_capabilities(home: Path, runner: Runner = RUNNER) -> tuple[str, ...] | None:
    """The compute capabilities the toolkit's nvcc compiles for, as ``"8.0"``, from
    ``nvcc --list-gpu-arch``; None when this nvcc cannot say (then nothing is checked)."""
    try:
        proc = runner.captured([home / "bin" / "nvcc", "--list-gpu-arch"])
    except OSError:
        return None
    found = re.findall(r"\bcompute_([1-9][0-9]?)([0-9])\b", proc.stdout)
    if proc.returncode != 0 or not found:
        return None
    return tuple(f"{major}.{minor}" for major, minor in found)


def refuse_unsupported(
    capabilities: Sequence[CudaCapability],
    supported: Sequence[str],
    toolkit: CudaToolkit,
    *,
    where: str,
    hint_key: str,
) -> None:
    """Refuse, before compiling, capabilities not among the nvcc's ``supported`` ones (``9.9``,
    ``99.9f``); ``where`` names the list's file, ``hint_key`` the key to edit."""
    if unknown := unsupported(capabilities, supported):
        raise ToolchainError(
            f"{where}: CUDA {toolkit.version}'s nvcc ({toolkit.home / 'bin' / 'nvcc'}) cannot "
            f"compile for {', '.join(repr(str(c)) for c in unknown)}; it supports "
            f"{', '.join(supported)}",
            hint=f"list only supported capabilities in {hint_key} (an 'a' or 'f' suffix is "
            "allowed where nvcc has one), or build this variant with a CUDA that has them",
        )


def _link_cudart(home: Path) -> None:
    """torch links -lcudart, which needs the unversioned name beside libcudart.so.<major>."""
    lib = home / "lib"
    versioned = sorted(lib.glob("libcudart.so.*"))
    if versioned and not (lib / "libcudart.so").exists():
        with suppress(FileExistsError):  # a concurrent build made it
            (lib / "libcudart.so").symlink_to(versioned[0].name)


def find_cuda_toolkit(
    env: EnvInfo, explicit: Path | None, system_paths: Sequence[Path], store: Path, runner: Runner
) -> CudaToolkit:
    """Find a toolkit whose major version matches the environment's torch; toolchain packages
    of the environment are used from their shared copy in ``store`` (:func:`shared_toolkit`)."""
    if env.cuda is None:
        raise ToolchainError(
            f"torch {env.torch} in {env.python} is a CPU-only build: it cannot compile "
            "CUDA sources",
            hint="build a CPU variant, or use a CUDA build of torch",
        )
    return locate_cuda_toolkit(
        env.cuda,
        env.purelib,
        explicit,
        system_paths,
        needed_by=f"torch {env.torch}",
        hint=f"install CUDA {env.cuda} (or pass --cuda-home DIR); torch refuses to build "
        "with a toolkit of another major version",
        store=store,
        runner=runner,
    )


def shared_toolkit(home: Path, purelib: Path, store: Path) -> Path:
    """The toolkit at ``home`` hard-linked once into ``<store>/<name>-<key>``, the key naming the
    distributions that installed it: its path reaches the preprocessed text, so one path per
    environment would keep the compiler cache from sharing torch-free objects between torch
    variants. ``home`` itself when no distribution owns it or it cannot be hard-linked (a copy
    would cost gigabytes)."""
    if (key := _toolkit_key(home, purelib)) is None:
        return home
    final = store / f"{home.name}-{key}"
    if (final / "bin" / "nvcc").exists():
        return final
    with staging_dir(store, "toolkit") as tmp:
        try:
            shutil.copytree(home, tmp / "toolkit", symlinks=True, copy_function=os.link)
        except (OSError, shutil.Error):
            return home
        try:
            os.rename(tmp / "toolkit", final)
        except OSError:
            if not (final / "bin" / "nvcc").exists():  # not a concurrent build that won
                raise
    return final


def _toolkit_key(home: Path, purelib: Path) -> str | None:
    """The distributions (name-version) whose RECORD lists files of ``home``: the same ones
    install the same files."""
    try:
        prefix = home.relative_to(purelib).as_posix() + "/"
    except ValueError:
        return None
    owners = sorted(
        record.parent.name
        for record in purelib.glob("*.dist-info/RECORD")
        if prefix in record.read_text(errors="replace")
    )
    return hashlib.sha256("\n".join(owners).encode()).hexdigest()[:16] if owners else None


def installed_toolkits(cuda: str, system_paths: Sequence[Path] = ()) -> list[tuple[str, Path]]:
    """Where a CUDA ``cuda`` toolkit may be installed here, in the order tried, each with its
    origin (the one search of builds and of preflight)."""
    found: list[tuple[str, Path]] = []
    if home := os.environ.get("CUDA_HOME"):
        found.append(("CUDA_HOME", Path(home)))
    found += [("recipe system-paths", Path(p)) for p in system_paths]
    found += [("system", Path(f"/usr/local/cuda-{cuda}")), ("system", Path("/usr/local/cuda"))]
    if nvcc := shutil.which("nvcc"):
        found.append(("PATH", Path(nvcc).resolve().parent.parent))
    return found


def locate_cuda_toolkit(
    cuda: str,
    purelib: Path,
    explicit: Path | None = None,
    system_paths: Sequence[Path] = (),
    *,
    needed_by: str,
    hint: str,
    store: Path,
    runner: Runner = RUNNER,
) -> CudaToolkit:
    """A toolkit of CUDA ``cuda``'s major version: ``explicit`` (--cuda-home) only, else the
    toolchain packages in ``purelib``, then :func:`installed_toolkits`."""
    want_major = int(cuda.split(".")[0])
    candidates: list[tuple[str, Path]] = []
    if explicit is not None:
        candidates.append(("--cuda-home", explicit))
    else:
        # CUDA_HOME assembled from PyPI's nvidia-cuda-* packages inside the environment
        pip_home = purelib / "nvidia" / f"cu{want_major}"
        if (pip_home / "bin" / "nvcc").exists():
            pip_home = shared_toolkit(pip_home, purelib, store)
            _link_cudart(pip_home)
            candidates.append(("toolchain packages", pip_home))
        candidates += installed_toolkits(cuda, system_paths)
    seen: list[str] = []
    for source, home in candidates:
        if not (home / "bin" / "nvcc").exists():
            continue
        version = nvcc_version(home, runner)
        if int(version.split(".")[0]) != want_major:
            seen.append(f"{home} ({source}) is CUDA {version}")
            continue
        torch_includes = purelib / "nvidia" / f"cu{want_major}" / "include"
        return CudaToolkit(home, version, (torch_includes,) if torch_includes.is_dir() else ())
    found = "; ".join(seen) if seen else "no nvcc found"
    raise ToolchainError(f"{needed_by} needs a CUDA {want_major}.x toolkit: {found}", hint=hint)
