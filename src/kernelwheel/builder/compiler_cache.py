"""Compiler caching with ccache: an unchanged variant recompiles from the cache.

ccache keys each object on the compiler, its flags and the source with every header it includes,
so a hit is exact. By default in depend mode (from the compiler's own -MD output: a miss costs
no extra preprocessing pass over torch's headers); a source that reaches no torch header
(builder.torch_free) runs with depend mode off, so a miss there preprocesses and keys on the
preprocessed text and the flags that do not only steer the preprocessor (-I/-D left out), and
another torch's variant of the same toolkit hits it (docs/build-corpus.md). The build's own
folders are kept out of the key: its working directory (objects map it away with
-ffile-prefix-map, which is left out too) and nvcc's --keep-dir. kernelwheel puts
masquerade links (``g++``, ``nvcc``, ... -> ccache) first on PATH, points torch at the nvcc
link through PYTORCH_NVCC, and turns off torch's own wrapper detection
(torch >= 2.14 prepends ccache by itself) so nothing is wrapped twice. A stats log per build
tells how many objects came from the cache.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

_HOST_COMPILERS = ("c++", "g++", "gcc", "cc")
# Options that name the build's own folders (ccache's ignore_options patterns).
_FOLDER_OPTIONS = ("-ffile-prefix-map=*", "-Xcompiler=-ffile-prefix-map=*", "--keep-dir=*")


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    uncacheable: int

    def describe(self) -> str:
        total = self.hits + self.misses + self.uncacheable
        text = f"ccache {self.hits}/{total} hit"
        if self.uncacheable:
            text += f", {self.uncacheable} uncacheable"
        return text


def ccache_env(
    cache_dir: Path, stats_log: Path, nvcc: Path | None, base_env: dict[str, str]
) -> dict[str, str] | None:
    """Environment variables that route compiles through ccache; None when ccache is absent.
    (The ``no-ccache`` option is the caller's: with it, this is not called.)"""
    ccache = shutil.which("ccache", path=base_env.get("PATH"))
    if ccache is None:
        return None
    links = cache_dir / "ccache-bin"
    links.mkdir(parents=True, exist_ok=True)
    names = _HOST_COMPILERS + (("nvcc",) if nvcc is not None else ())
    for name in names:
        link = links / name
        if not link.is_symlink() or os.readlink(link) != ccache:
            link.unlink(missing_ok=True)
            link.symlink_to(ccache)
    env = {
        "PATH": f"{links}{os.pathsep}{base_env.get('PATH', '')}",
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
        "CCACHE_IGNOREOPTIONS": " ".join(_FOLDER_OPTIONS),
        "TORCH_NO_COMPILER_WRAPPER": "1",
    }
    if nvcc is not None:
        # nvcc is found through PATH behind the link; torch calls PYTORCH_NVCC instead of
        # CUDA_HOME/bin/nvcc when it is set.
        env["PATH"] = f"{links}{os.pathsep}{nvcc.parent}{os.pathsep}{base_env.get('PATH', '')}"
        env["PYTORCH_NVCC"] = str(links / "nvcc")
    return env


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
    hits = misses = uncacheable = 0
    for results in blocks:
        if results & {"no_input_file", "called_for_link", "called_for_preprocessing"}:
            continue  # link or preprocessing steps: nothing to cache
        if results & {"direct_cache_hit", "preprocessed_cache_hit"}:
            hits += 1
        elif "cache_miss" in results:
            misses += 1
        else:
            uncacheable += 1
    return CacheStats(hits, misses, uncacheable)
