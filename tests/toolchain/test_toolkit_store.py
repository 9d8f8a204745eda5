"""The CUDA toolchain packages of several environments share one folder (one path per
toolkit, so the compiler cache can share objects across torch versions)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from support.runners import Reply, ScriptedRunner

from kernelwheel.toolchain.envs import locate_cuda_toolkit, shared_toolkit


def env_with_toolkit(root: Path, nvcc_version: str) -> tuple[Path, Path]:
    purelib = root / "site-packages"
    home = purelib / "nvidia" / "cu13"
    (home / "bin").mkdir(parents=True)
    (home / "include").mkdir()
    (home / "bin" / "nvcc").write_text(f"nvcc {nvcc_version}\n")
    (home / "include" / "cuda_runtime.h").write_text("// runtime\n")
    (home / "lib").mkdir()
    (home / "lib" / "libcudart.so.13").write_text("elf")
    (home / "lib" / "libcudart.so").symlink_to("libcudart.so.13")
    dist = purelib / f"nvidia_cuda_nvcc-{nvcc_version}.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text("nvidia/cu13/bin/nvcc,sha256=x,10\n")
    (purelib / "torch-2.14.1.dist-info").mkdir()
    (purelib / "torch-2.14.1.dist-info" / "RECORD").write_text("torch/__init__.py,,\n")
    return home, purelib


def test_equal_toolchain_packages_share_one_folder_of_hard_links(tmp_path: Path) -> None:
    store = tmp_path / "toolkits"
    home_a, purelib_a = env_with_toolkit(tmp_path / "torch213", "13.0.88")
    home_b, purelib_b = env_with_toolkit(tmp_path / "torch214", "13.0.88")
    shared = shared_toolkit(home_a, purelib_a, store)
    assert shared.parent == store and shared != home_a
    assert shared_toolkit(home_b, purelib_b, store) == shared
    nvcc = shared / "bin" / "nvcc"
    assert nvcc.read_text() == "nvcc 13.0.88\n"
    assert nvcc.stat().st_ino == (home_a / "bin" / "nvcc").stat().st_ino  # linked, not copied
    assert (shared / "lib" / "libcudart.so").is_symlink()
    assert [p.name for p in store.iterdir()] == [shared.name]  # no staging folder left


def test_other_toolchain_packages_get_their_own_folder(tmp_path: Path) -> None:
    store = tmp_path / "toolkits"
    home_a, purelib_a = env_with_toolkit(tmp_path / "a", "13.0.88")
    home_b, purelib_b = env_with_toolkit(tmp_path / "b", "13.0.96")
    assert shared_toolkit(home_a, purelib_a, store) != shared_toolkit(home_b, purelib_b, store)


def test_a_toolkit_no_distribution_owns_stays_where_it_is(tmp_path: Path) -> None:
    home, purelib = env_with_toolkit(tmp_path, "13.0.88")
    (purelib / "nvidia_cuda_nvcc-13.0.88.dist-info" / "RECORD").write_text("other/file,,\n")
    assert shared_toolkit(home, purelib, tmp_path / "toolkits") == home


def test_a_toolkit_that_cannot_be_linked_stays_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another file system: no gigabyte copy, the environment's own toolkit, nothing left."""
    home, purelib = env_with_toolkit(tmp_path, "13.0.88")

    def cross_device(src: str, dst: str) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link", src)

    monkeypatch.setattr(os, "link", cross_device)
    store = tmp_path / "toolkits"
    assert shared_toolkit(home, purelib, store) == home
    assert list(store.iterdir()) == []


def test_the_unversioned_cudart_link_is_made_in_the_store_not_the_environment(
    tmp_path: Path,
) -> None:
    """Issue 38, 11: torch links -lcudart; the link it needs is made in kernelwheel's shared
    toolkit folder, so a compile writes nothing into the environment (whose ready marker
    promises what pip installed there)."""
    home, purelib = env_with_toolkit(tmp_path, "13.0.88")
    (home / "lib" / "libcudart.so").unlink()  # as pip installs it: the versioned name only
    store = tmp_path / "toolkits"
    runner = ScriptedRunner(lambda cmd, cwd: Reply(stdout="Cuda compilation tools, release 13.0"))
    toolkit = locate_cuda_toolkit(
        "13.0", purelib, needed_by="torch", hint="", store=store, runner=runner
    )
    assert toolkit.home.parent == store and toolkit.version == "13.0"
    assert os.readlink(toolkit.home / "lib" / "libcudart.so") == "libcudart.so.13"
    assert not (home / "lib" / "libcudart.so").exists()
