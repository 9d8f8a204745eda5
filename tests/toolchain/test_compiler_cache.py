"""ccache routing and its per-build statistics."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.builds import system_nvcc

from kernelwheel.toolchain.compiler_cache import ccache_env, read_stats

CCACHE = Path(shutil.which("ccache") or "ccache")  # the host's, where the tests that run it run

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
# ccache's record of a compile whose redis storage was down (ccache 4.7)
DOWN = "# /src/e.cpp\ncache_miss\nlocal_storage_write\nremote_storage_error\n"


def test_stats_count_each_compile_once(tmp_path: Path) -> None:
    log = tmp_path / "stats.log"
    log.write_text(LOG)
    stats = read_stats(log)
    assert stats is not None
    assert (stats.hits, stats.misses, stats.uncacheable) == (2, 1, 1)
    assert stats.describe() == "ccache 2/4 hit, 1 uncacheable"
    assert read_stats(tmp_path / "missing.log") is None
    log.write_text(LOG + DOWN)
    down = read_stats(log)
    assert down is not None and (down.misses, down.remote_errors) == (2, 1)
    assert down.describe().endswith(", the remote storage failed for 1 (down or timed out)")


def test_a_compile_counts_its_own_calls_not_the_last_compiles(tmp_path: Path) -> None:
    """A dev build's folder is kept between compiles: ccache appends to the stats log it names,
    so an edit that compiled one unit (a miss) was shown as the last runs' "ccache 3/4 hit"."""
    log = tmp_path / "stats.log"
    log.write_text(LOG)  # the last compile's calls
    ccache_env(tmp_path / "cache", log, None, {}, tmp_path / "ccache")
    assert read_stats(log) is None


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
    env = ccache_env(tmp_path / "cache", tmp_path / "s.log", nvcc, {}, bin_dir / "ccache")
    links = tmp_path / "cache" / "ccache-bin"
    for name in ("g++", "c++", "gcc", "cc", "nvcc"):
        assert (links / name).resolve() == (bin_dir / "ccache").resolve()
    assert env["PATH"].split(":")[:2] == [str(links), str(nvcc.parent)]
    assert env["PYTORCH_NVCC"] == str(links / "nvcc")
    assert env["TORCH_NO_COMPILER_WRAPPER"] == "1"  # never wrapped twice


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_a_source_without_torch_hits_across_variant_folders_and_include_paths(
    tmp_path: Path,
) -> None:
    """Two variants of one toolchain: own stage folder (the working directory, the prefix map),
    own torch include folder and defines. Compiled as kernelwheel compiles a torch-free source
    (depend mode off: ``CCACHE_NODEPEND=1`` in its ninja statement), the second variant hits
    the first's object; a flag that changes the code still misses; in the default depend mode
    (every other source) the variants' folders keep them apart."""
    src = tmp_path / "kernel.cpp"
    src.write_text('#include "scale.h"\nint scale(int x) { return x * FACTOR; }\n')
    (tmp_path / "scale.h").write_text("#define FACTOR 3\n")

    envs: dict[Path, dict[str, str]] = {}  # one per log: ccache_env begins its log anew

    def compile_in(variant: str, stats_log: Path, *extra: str, mode: str = "1") -> None:
        stage = tmp_path / variant / "obj"
        stage.mkdir(parents=True, exist_ok=True)
        (tmp_path / variant / "torch-include").mkdir(exist_ok=True)
        if stats_log not in envs:
            envs[stats_log] = ccache_env(
                tmp_path / "cache", stats_log, None, dict(os.environ), CCACHE
            )
        env = envs[stats_log]
        assert env["CCACHE_DEPEND"] == "true"
        cmd = ["g++", "-O2", "-c", str(src), "-o", "kernel.o", f"-I{tmp_path / variant}",
               f"-I{tmp_path / variant / 'torch-include'}", f"-DTORCH_EXTENSION_NAME={variant}",
               f"-ffile-prefix-map={tmp_path / variant}=/kernelwheel/build", *extra,
               "-MD", "-MF", "kernel.d"]  # fmt: skip
        nodepend = {"CCACHE_NODEPEND": "1"} if mode == "1" else {}
        subprocess.run(cmd, cwd=stage, env={**os.environ, **env, **nodepend}, check=True)

    shared = tmp_path / "shared.log"
    compile_in("torch213", shared)
    compile_in("torch214", shared)
    compile_in("torch214-O3", shared, "-O3")  # a flag that changes the object: compiled again
    stats = read_stats(shared)
    assert stats is not None and (stats.hits, stats.misses) == (1, 2)
    objects = [(tmp_path / v / "obj" / "kernel.o").read_bytes() for v in ("torch213", "torch214")]
    assert objects[0] == objects[1]

    kept_apart = tmp_path / "depend.log"
    compile_in("depend-torch213", kept_apart, mode="depend")
    compile_in("depend-torch214", kept_apart, mode="depend")
    stats = read_stats(kept_apart)
    assert stats is not None and (stats.hits, stats.misses) == (0, 2)


@pytest.mark.integration
@pytest.mark.skipif(not shutil.which("ccache") or not system_nvcc(), reason="needs ccache and nvcc")
def test_another_nvcc_thread_count_hits_the_same_object(tmp_path: Path) -> None:
    """The memory fit changes nvcc's --threads from build to build (compile/memory); with
    --keep, as kernelwheel compiles, the object is the same bytes whatever the count, so the
    count is no part of ccache's key: a second build with other threads hits."""
    nvcc = system_nvcc()
    assert nvcc is not None
    (tmp_path / "k.cu").write_text("__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n")
    targets = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]

    def compile_with(threads: int, out: str, env: dict[str, str]) -> bytes:
        keep = tmp_path / f"keep-{out}"
        keep.mkdir()
        cmd = [env.get("PYTORCH_NVCC", str(nvcc)), "-c", "k.cu", "-o", out, *targets,
               f"--threads={threads}", "--keep", f"--keep-dir={keep}"]  # fmt: skip
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True)
        return (tmp_path / out).read_bytes()

    stats_log = tmp_path / "stats.log"
    env = ccache_env(tmp_path / "cache", stats_log, nvcc, dict(os.environ), CCACHE)
    env = {**os.environ, **env}
    compile_with(1, "one.o", env)
    cached = compile_with(2, "two.o", env)
    stats = read_stats(stats_log)
    assert stats is not None and (stats.hits, stats.misses) == (1, 1)
    assert cached == compile_with(2, "plain.o", dict(os.environ))  # what nvcc itself makes


def test_the_project_census_names_files_not_their_contents(tmp_path: Path) -> None:
    """Hashed into every ccache key of a build: a header added in front of another on the include
    path must miss (ccache remembers only the headers an object did include), an edit must not."""
    from kernelwheel.toolchain.compiler_cache import project_census

    root = tmp_path / "p"
    for rel in ("inc2/cfg.h", "csrc/k.cpp", ".git/HEAD", "torch-ext/p/__pycache__/x.pyc"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("v1\n")
    (root / "out" / "logs").mkdir(parents=True)
    (root / "out" / "logs" / "v.log").write_text("a build's log\n")
    for noise in (".k.cpp.swp", "#k.cpp#", "k.cpp~", "k.cpp___jb_tmp___", "4913"):
        (root / "csrc" / noise).write_text("an editor's\n")  # a build while k.cpp is open: hits
    before = project_census(root, leave_out=(root / "out",))
    assert before == "csrc/k.cpp\ninc2/cfg.h\n"  # no hidden, cache, output or editor's file
    (root / "csrc" / "k.cpp").write_text("v2\n")
    assert project_census(root, leave_out=(root / "out",)) == before
    (root / "inc1").mkdir()
    (root / "inc1" / "cfg.h").write_text("v1\n")
    assert project_census(root, leave_out=(root / "out",)) == "csrc/k.cpp\ninc1/cfg.h\ninc2/cfg.h\n"
    elsewhere = tmp_path / "copy"
    shutil.copytree(root, elsewhere)
    assert project_census(elsewhere, (elsewhere / "out",)) == project_census(root, (root / "out",))


def test_the_census_leaves_out_files_no_compile_includes(tmp_path: Path) -> None:
    # a test added to a CUDA project (tests/test_gpu.py) changed the census: every unit of the
    # next dev and build missed the compiler cache, minutes of nvcc for a file no unit reads
    from kernelwheel.toolchain.compiler_cache import project_census

    root = tmp_path / "p"
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "k.cu").write_text("v1\n")
    before = project_census(root)
    for rel in ("tests/test_gpu.py", "torch-ext/p/extra.py", "NOTES.md", "pyproject.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("not a header\n")
    assert project_census(root) == before
    for rel in ("csrc/k.cuh", "inc/table.inc", "csrc/cfg.h"):  # what an #include may name
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("a header\n")
    assert before == "csrc/k.cu\n"
    assert project_census(root) == "csrc/cfg.h\ncsrc/k.cu\ncsrc/k.cuh\ninc/table.inc\n"


def test_the_census_of_a_dev_build_leaves_out_the_wheels_a_release_build_wrote(
    tmp_path: Path,
) -> None:
    # `kernelwheel build -o wheelhouse` (init's README), then `kernelwheel test`: dev's output
    # is in the cache, so wheelhouse/ was counted, and every unit of the next dev compile missed
    from kernelwheel.toolchain.compiler_cache import project_census

    root = tmp_path / "p"
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "k.cpp").write_text("v1\n")
    before = project_census(root)
    for rel in ("wheelhouse/logs/v.log", "wheelhouse/k-0.0.0-cp310-abi3.whl", "hub/build/x.so"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("output\n")
    (root / "build" / "x.o").parent.mkdir()
    (root / "build" / "x.o").write_text("output\n")
    (root / "csrc" / "wheelhouse").mkdir()  # only the project's own top-level folders
    (root / "csrc" / "wheelhouse" / "w.h").write_text("a header\n")
    assert project_census(root) == before + "csrc/wheelhouse/w.h\n"
