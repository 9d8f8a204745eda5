"""ccache routing and its per-build statistics."""

from __future__ import annotations

from pathlib import Path

from kernelwheel.builder.compiler_cache import ccache_env, read_stats

LOG = """\
#
no_input_file
# /src/a.cpp
cache_miss
direct_cache_miss
local_storage_miss
local_storage_write
# /src/b.cu
direct_cache_hit
local_storage_hit
# /src/c.cpp
preprocessed_cache_hit
# /src/d.cpp
unsupported_compiler_option
# /obj/a.o
called_for_link
"""


def test_stats_count_each_compile_once(tmp_path: Path) -> None:
    log = tmp_path / "stats.log"
    log.write_text(LOG)
    stats = read_stats(log)
    assert stats is not None
    assert (stats.hits, stats.misses, stats.uncacheable) == (2, 1, 1)
    assert stats.describe() == "ccache 2/4 hit, 1 uncacheable"
    assert read_stats(tmp_path / "missing.log") is None


def _fake_ccache(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ccache = bin_dir / "ccache"
    ccache.write_text("#!/bin/sh\n")
    ccache.chmod(0o755)
    return bin_dir


def test_env_routes_host_compilers_and_nvcc(tmp_path: Path) -> None:
    bin_dir = _fake_ccache(tmp_path)
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    env = ccache_env(tmp_path / "cache", tmp_path / "s.log", nvcc, {"PATH": str(bin_dir)})
    assert env is not None
    links = tmp_path / "cache" / "ccache-bin"
    for name in ("g++", "c++", "gcc", "cc", "nvcc"):
        assert (links / name).resolve() == (bin_dir / "ccache").resolve()
    assert env["PATH"].split(":")[:2] == [str(links), str(nvcc.parent)]
    assert env["PYTORCH_NVCC"] == str(links / "nvcc")
    assert env["TORCH_NO_COMPILER_WRAPPER"] == "1"  # never wrapped twice


def test_env_is_off_without_ccache(tmp_path: Path) -> None:
    """(Off by choice is the no-ccache option, carried by the build request: test_pipeline.)"""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ccache_env(tmp_path, tmp_path / "s.log", None, {"PATH": str(empty)}) is None
