"""The pure parts of `kernelwheel dev` and `test`: what --watch sees change, which pytest
configuration a project's tests run under, and the dev ops namespace."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.kinds import NOARCH_INIT, write_noarch_project
from support.tinykernel import PACKAGE, write_tiny_kernel
from support.venvs import QuickVenv, fake_torch

from kernelwheel._util import Runner
from kernelwheel.builder.codegen import ops_py
from kernelwheel.builder.dev import Linked, link_dev_build, pytest_arguments
from kernelwheel.builder.dev_layout import (
    DevBuild,
    Shared,
    dev_folder,
    dev_namespace,
    dev_site,
    lay_out_site,
)
from kernelwheel.builder.steps import left_out_note
from kernelwheel.cli import dev, main
from kernelwheel.cli import test as test_cli
from kernelwheel.cli.dev import _snapshot, next_change
from kernelwheel.cli.test import dev_environment, gpu_note, has_pytest, pytest_exit
from kernelwheel.cli.ui import ConsoleUI
from kernelwheel.compat.guard import BuildStamp
from kernelwheel.errors import BuildError, UsageError
from kernelwheel.hub.upload import read_layout
from kernelwheel.model.project import load_project
from kernelwheel.model.variant import Arch, Variant

CPU = Variant.parse("torch213-cxx11-cpu-x86_64-linux")


def test_watch_sees_the_projects_files_not_caches_hidden_folders_or_editors_files(
    tmp_path: Path,
) -> None:
    root = write_tiny_kernel(tmp_path / "p")
    before = _snapshot(root)
    editors = ("csrc/.add_one.cpp.swp", "csrc/4913", "csrc/#add_one.cpp#", "csrc/add_one.cpp~")
    editors += ("torch-ext/tiny_add/__init__.py___jb_tmp___", "torch-ext/.x.py.kate-swp")
    # wheelhouse/: what `kernelwheel build` in another terminal writes (it started a build)
    editors += ("wheelhouse/logs/torch213-cxx11-cpu-x86_64-linux.log", "wheelhouse/x.whl")
    for noise in (".git/index", "torch-ext/tiny_add/__pycache__/x.pyc", ".venv/x", *editors):
        (root / noise).parent.mkdir(parents=True, exist_ok=True)
        (root / noise).write_text("noise")
    assert _snapshot(root) == before
    (root / "csrc" / "add_one.cpp").write_text("// edited\n")
    after = _snapshot(root)
    assert after != before and set(after) == set(before)
    (root / "csrc" / "new.cu").write_text("")
    assert set(_snapshot(root)) - set(after) == {str(root / "csrc" / "new.cu")}


def test_watch_builds_once_a_checkout_has_written_all_its_files(tmp_path: Path) -> None:
    """A branch switch writes its files one after another: a build from the first alone would
    show a compile error the next file fixes."""
    root = write_tiny_kernel(tmp_path / "p")
    seen = _snapshot(root)

    def checkout() -> None:  # a slow checkout: the header, then the source that needs it
        (root / "csrc" / "new.h").write_text("int f();\n")
        time.sleep(0.25)
        (root / "csrc" / "add_one.cpp").write_text('#include "new.h"\n')

    writer = threading.Thread(target=checkout)
    writer.start()
    changed = next_change(root, seen, poll=0.05)
    writer.join()
    assert changed == _snapshot(root)  # both files, not the header alone


def test_watch_builds_a_save_beside_a_file_that_never_stops_changing(tmp_path: Path) -> None:
    # a log the author's training run appends to in the project: --watch waited for it to
    # settle, and never built the source saved beside it
    root = write_tiny_kernel(tmp_path / "p")
    seen = _snapshot(root)
    stop = threading.Event()

    def logging() -> None:
        with (root / "train.log").open("a") as fh:
            while not stop.is_set():
                fh.write("step\n")
                fh.flush()
                time.sleep(0.01)

    writer = threading.Thread(target=logging)
    writer.start()
    (root / "csrc" / "add_one.cpp").write_text("// edited\n")
    result: list[dict[str, tuple[int, int]]] = []
    watcher = threading.Thread(
        target=lambda: result.append(next_change(root, seen, poll=0.01, settle=0.05, patience=1))
    )
    watcher.start()
    watcher.join(timeout=20)
    stop.set()
    writer.join()
    assert result, "next_change still waiting"
    source = str(root / "csrc" / "add_one.cpp")
    assert result[0][source] == _snapshot(root)[source] != seen[source]  # the save is in it


def _build(folder: Path) -> DevBuild:
    return DevBuild(CPU, folder, folder / "site", folder / "hub", Path("py"))


def test_the_tests_run_under_the_projects_own_pytest_configuration(tmp_path: Path) -> None:
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    dev = tmp_path / "dev"
    dev.mkdir()
    cmd = pytest_arguments(project, _build(dev))
    # none of its own: an empty one, so a configuration around the project never applies
    assert cmd[cmd.index("-c") + 1] == str(dev / "pytest.ini")
    assert (dev / "pytest.ini").read_text().startswith("[pytest]\n")
    assert cmd[cmd.index("--rootdir") + 1] == str(project.root)
    assert cmd[-1] == str(project.root / "tests")
    # a pyproject.toml that does not configure pytest is not pytest's configuration
    (project.root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    cmd = pytest_arguments(project, _build(dev))
    assert cmd[cmd.index("-c") + 1] == str(dev / "pytest.ini")
    (project.root / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    cmd = pytest_arguments(project, _build(dev))
    assert cmd[cmd.index("-c") + 1] == str(project.root / "pyproject.toml")
    (project.root / "pytest.ini").write_text("[pytest]\n")  # pytest's first choice
    cmd = pytest_arguments(project, _build(dev))
    assert cmd[cmd.index("-c") + 1] == str(project.root / "pytest.ini")


def test_a_conftest_of_the_checkout_around_the_project_never_applies(tmp_path: Path) -> None:
    # a kernel in a monorepo's kernels/ folder: the checkout's conftest.py (its fixtures,
    # hooks, an import of what the tests' venv lacks) was loaded by `kernelwheel test`
    (tmp_path / "conftest.py").write_text("raise RuntimeError('the monorepo conftest')\n")
    project = load_project(write_tiny_kernel(tmp_path / "kernels" / "p"))
    (tmp_path / "kernels" / "conftest.py").write_text("raise RuntimeError('kernels/ conftest')\n")
    tests = project.root / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_one.py").write_text("def test_one(own):\n    assert own == 1\n")
    (project.root / "conftest.py").write_text(  # the project's own still applies
        "import pytest\n\n@pytest.fixture\ndef own():\n    return 1\n"
    )
    dev = tmp_path / "dev"
    dev.mkdir()
    cmd = pytest_arguments(project, _build(dev), ["-q"], project.root)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *cmd],
        cwd=project.root, capture_output=True, text=True,
    )  # fmt: skip
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr


def test_a_test_id_after_the_dashes_runs_alone_from_the_project_or_its_tests_folder(
    tmp_path: Path,
) -> None:
    # `kernelwheel test -- tests/test_two.py::test_one` ran every test of tests/ (the folder
    # was passed too), and `-- test_two.py::test_one` from tests/ was not found
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    tests = project.root / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_two.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    (tests / "test_three.py").write_text("def test_three():\n    pass\n")
    dev = tmp_path / "dev"
    dev.mkdir()

    def passed(given: list[str], cwd: Path) -> str:
        cmd = pytest_arguments(project, _build(dev), given, cwd)
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *cmd],
            cwd=project.root, capture_output=True, text=True,
        )  # fmt: skip
        return ran.stdout.strip().splitlines()[-1]

    assert " 1 passed" in passed(["tests/test_two.py::test_one"], project.root)
    assert " 1 passed" in passed(["test_two.py::test_two"], tests)
    assert " 2 passed" in passed([str(tests / "test_two.py")], tmp_path)
    # an option's value is no test path, even one naming a folder: all of tests/ still runs
    assert " 3 passed" in passed(["-x"], project.root)
    assert " 2 passed" in passed(["-k", "test_three or test_one", "--tb", "short"], tests)
    assert " 2 passed" in passed(["--ignore", "tests/test_three.py"], project.root)
    assert " 2 passed" in passed(["--deselect", "tests/test_two.py::test_one"], project.root)


def test_kernel_builders_kernels_ci_marker_is_known_without_a_configuration(
    tmp_path: Path,
) -> None:
    """kernel-builder's generated pyproject.toml registers ``kernels_ci`` (its CI runs
    ``pytest -m kernels_ci``): kernels-community's tests, marked so, warned of an unknown mark
    under kernelwheel test's empty configuration, and failed under ``--strict-markers``."""
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    (project.root / "tests").mkdir(exist_ok=True)
    (project.root / "tests" / "test_marked.py").write_text(
        "import pytest\n\n@pytest.mark.kernels_ci\ndef test_marked():\n    pass\n"
    )
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "pytest.ini").write_text("[pytest]\n")  # an older kernelwheel's, kept in the folder
    cmd = pytest_arguments(project, _build(dev))
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers",
         "-m", "kernels_ci", *cmd[:-1], str(project.root / "tests" / "test_marked.py")],
        cwd=project.root, capture_output=True, text=True,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout and "Unknown pytest.mark" not in ran.stdout


def test_the_dev_namespace_is_fixed_per_project_and_variant(tmp_path: Path) -> None:
    a = load_project(write_tiny_kernel(tmp_path / "a"))
    b = load_project(write_tiny_kernel(tmp_path / "b"))
    ns = dev_namespace(a, CPU)
    assert ns.startswith("_tiny_add_dev") and ns.isidentifier()
    (a.root / "csrc" / "add_one.cpp").write_text("// any edit\n")
    assert dev_namespace(load_project(a.root), CPU) == ns  # edits never change it
    assert dev_namespace(b, CPU) != ns  # another checkout of the project: its own
    assert dev_namespace(a, Variant.parse("torch214-cxx11-cpu-x86_64-linux")) != ns


def test_the_dev_site_changes_only_what_the_project_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    so = tmp_path / "x.so"
    so.write_bytes(b"\x7fELF one")
    stamp = BuildStamp("tiny-add", "0.0.0", CPU)
    site = tmp_path / "dev" / "site"

    def lay_out() -> Path:
        return lay_out_site(site, project, ops_py("_ns", stamp), Shared(so, "_ns.abi3.so", "d1"))

    lay_out()
    package = site / project.package
    links = [p for p in package.rglob("*") if p.is_symlink()]
    assert links and all(p.resolve().is_relative_to(project.package_dir) for p in links)
    (package / "stray.txt").write_text("left by an older build")
    made: list[Path] = []
    real = Path.symlink_to
    monkeypatch.setattr(
        Path, "symlink_to", lambda self, *a, **k: (made.append(self), real(self, *a, **k))
    )
    lay_out()
    assert made == []  # the links the project still has are left as they are
    assert all(p.is_symlink() for p in links) and not (package / "stray.txt").exists()
    assert (package / "_ops.py").is_file()
    assert (package / "_ns.abi3.so").read_bytes() == so.read_bytes()
    links[0].resolve().unlink()  # the project drops a file: its link goes
    lay_out()
    assert not links[0].is_symlink() and made == []
    # a subpackage, imported once (its __pycache__), then moved away: its folder goes too, or
    # `import tiny_add.sub` still worked against the dev build, and failed from the wheel
    sub = project.package_dir / "sub" / "deep"
    sub.mkdir(parents=True)
    (sub / "__init__.py").write_text("")
    lay_out()
    assert (package / "sub" / "deep" / "__init__.py").is_symlink()
    assert (package / "sub" / "deep" / "__pycache__").is_file()  # no bytecode written there
    shutil.rmtree(project.package_dir / "sub")
    lay_out()
    assert not (package / "sub").exists()


def test_a_subpackage_the_project_drops_leaves_nothing_in_the_dev_site_that_imports(
    tmp_path: Path,
) -> None:
    # left behind, even empty but for its __pycache__, the folder imports as a namespace
    # package: the author's tests of the removed subpackage would still pass its import
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    sub = project.package_dir / "sub" / "inner"
    sub.mkdir(parents=True)
    (sub / "__init__.py").write_text("VALUE = 7\n")
    site = tmp_path / "dev" / "site"
    package = lay_out_site(site, project, "ops = None\n", None) / project.package
    assert (package / "sub" / "inner" / "__pycache__").is_file()
    shutil.rmtree(project.package_dir / "sub")
    lay_out_site(site, project, "ops = None\n", None)
    assert not (package / "sub").exists()
    assert (package / "__pycache__").is_file()  # the package's own
    assert (package / "__init__.py").is_symlink()


def test_a_python_file_saved_twice_in_one_second_imports_its_last_save_with_no_dev_between(
    tmp_path: Path,
) -> None:
    # a .pyc records its source's mtime in seconds and its size: SCALE = 4 imported, then
    # SCALE = 5 saved in that second, imported SCALE = 4 again from the dev site's __pycache__
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    helper = project.package_dir / "sub" / "helper.py"
    helper.parent.mkdir()
    helper.write_text("SCALE = 4\n")
    site = tmp_path / "dev" / "site"
    (site / project.package / "sub" / "__pycache__").mkdir(parents=True)  # an older run's
    package = lay_out_site(site, project, "ops = None\n", None) / project.package
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run = [sys.executable, "-c", "from sub import helper; print(helper.SCALE)"]  # torch-free
    stamp = (int(time.time()) + 5) * 10**9  # the saves and the imports within one second
    for scale in ("4", "5", "2"):
        helper.write_text(f"SCALE = {scale}\n")
        os.utime(helper, ns=(stamp, stamp))
        done = subprocess.run(run, cwd=package, env=env, capture_output=True, text=True)
        assert done.stdout == f"{scale}\n", done.stderr


def test_a_projects_own_ops_py_is_never_written_through_its_link(tmp_path: Path) -> None:
    # kernel-builder writes _ops.py into torch-ext/<package>/: the dev site linked it, then
    # wrote the generated _ops.py through that link, over the author's file
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    own = project.package_dir / "_ops.py"
    own.write_text("# the author's\n")
    so = tmp_path / "x.so"
    so.write_bytes(b"\x7fELF one")
    site = tmp_path / "dev" / "site"
    (site / project.package).mkdir(parents=True)
    (site / project.package / "_ops.py").symlink_to(own)  # an earlier run's link
    for _ in range(2):
        package = (
            lay_out_site(site, project, "ops = 1\n", Shared(so, "_ns.so", "d")) / project.package
        )
        assert own.read_text() == "# the author's\n"
        assert not (package / "_ops.py").is_symlink()
        assert (package / "_ops.py").read_text() == "ops = 1\n"


def test_the_tests_import_the_dev_build_not_a_pip_installed_copy(tmp_path: Path) -> None:
    # `kernelwheel install` put a release of the package into the venv the dev build is linked
    # into: the tests must still see the author's edit, not that copy
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    venv = QuickVenv(tmp_path / "venv")
    build = _build(tmp_path / "dev")
    for site, where in ((venv.purelib, "installed"), (build.site, "dev")):
        (site / PACKAGE).mkdir(parents=True)
        (site / PACKAGE / "__init__.py").write_text(f"WHERE = {where!r}\n")
    (venv.purelib / f"kernelwheel-dev-{PACKAGE}.pth").write_text(f"{build.site}\n")
    env = dev_environment(project, build, {"PYTHONPATH": "/elsewhere"})
    ran = subprocess.run(
        [venv.python, "-c", f"import {PACKAGE}; print({PACKAGE}.WHERE)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.strip() == "dev"
    assert env["PYTHONPATH"] == f"{build.site}:/elsewhere"
    assert env["LOCAL_KERNELS"] == f"local/tiny-add={build.hub}"


def test_a_dev_build_of_another_variant_leaves_the_linked_one_alone(tmp_path: Path) -> None:
    # `kernelwheel test --variant <cu130>` after the CPU venv was linked to the CPU dev build:
    # the CPU build's package must stay what that venv's .pth names
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    cuda = Variant.parse("torch214-cxx11-cu130-x86_64-linux")
    folder = tmp_path / "dev"
    laid: dict[Variant, Path] = {}
    for variant, data in ((CPU, b"\x7fELF cpu"), (cuda, b"\x7fELF cuda")):
        so = tmp_path / f"{variant.name}.so"
        so.write_bytes(data)
        stamp = BuildStamp("tiny-add", "0.0.0", variant)
        ns = dev_namespace(project, variant)
        shared = Shared(so, f"{ns}.abi3.so", variant.name)
        laid[variant] = lay_out_site(dev_site(folder, variant), project, ops_py(ns, stamp), shared)
    assert laid[CPU] != laid[cuda]
    package = laid[CPU] / project.package
    assert (package / f"{dev_namespace(project, CPU)}.abi3.so").read_bytes() == b"\x7fELF cpu"
    assert dev_namespace(project, CPU) in (package / "_ops.py").read_text()


def test_a_stable_abi_dev_build_links_into_any_newer_torch(tmp_path: Path) -> None:
    # torch-stable-abi210-cpu loads under torch 2.14 (the import guard admits it): `dev --python`
    # with that torch linked it nowhere, saying the variant is for torch 2.10
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    stable = Variant.parse("torch-stable-abi210-cpu-x86_64-linux")
    build = DevBuild(stable, tmp_path, tmp_path / "site", tmp_path / "hub", Path("py"))
    python = tmp_path / "python"
    for torch, linked in (("2.14.1+cu130", True), ("2.9.1+cpu", False), ("", False)):
        python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "{torch}", ""]\'\n')
        python.chmod(0o755)
        got = link_dev_build(build, project, python, tmp_path / "cache", Runner())
        assert (got.pth is not None) is linked, got.skipped
    assert got.skipped == "it has no torch, the variant is for torch >= 2.10"
    same = _build(tmp_path)
    python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "2.14.1+cu130", ""]\'\n')
    assert link_dev_build(same, project, python, tmp_path / "cache", Runner()).skipped == (
        "it has torch 2.14.1+cu130, the variant is for torch 2.13"
    )


def test_a_link_the_environments_new_torch_refuses_is_named(tmp_path: Path) -> None:
    # the venv linked under torch 2.13, its torch then changed to 2.14.1: dev said "not
    # linked into an interpreter", while the old .pth still made `import` there fail
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    site = tmp_path / "site" / CPU.name  # torch 2.13
    build = DevBuild(CPU, tmp_path, site, tmp_path / "hub", Path("py"))
    python = tmp_path / "python"
    for torch in ("2.13.0+cpu", "2.14.1+cu130"):
        python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "{torch}", ""]\'\n')
        python.chmod(0o755)
        got = link_dev_build(build, project, python, tmp_path / "cache", Runner())
    pth = tmp_path / f"kernelwheel-dev-{project.package}.pth"
    assert got.pth is None and pth.read_text() == f"{build.site}\n"
    assert got.stale == f"{pth} links the dev build for torch 2.13 ({CPU.name})"
    # a link the torch still imports (a stable-ABI build), or none: nothing to say
    pth.write_text(f"{tmp_path}/site/torch-stable-abi210-cpu-x86_64-linux\n")
    assert link_dev_build(build, project, python, tmp_path / "cache", Runner()).stale is None
    pth.unlink()
    assert link_dev_build(build, project, python, tmp_path / "cache", Runner()).stale is None


def test_a_renamed_projects_old_link_is_removed_and_said(tmp_path: Path) -> None:
    # `name = "ren-a"` renamed "ren-b" (its package folder moved): kernelwheel-dev-ren_a.pth
    # stayed, and `import ren_a` still succeeded, an empty namespace package of broken links
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "2.13.0+cpu", ""]\'\n')
    python.chmod(0o755)
    dev_dir = tmp_path / "cache" / "dev"
    old = tmp_path / "kernelwheel-dev-ren_a.pth"
    old.write_text(f"{dev_site(dev_dir / 'ren_a-aaaa', CPU)}\n")
    kept = {  # another folder's build of that package, another project, a file of the user's
        tmp_path / "kernelwheel-dev-ren_c.pth": f"{dev_site(dev_dir / 'ren_a-bbbb', CPU)}\n",
        tmp_path / "kernelwheel-dev-other.pth": f"{dev_site(dev_dir / 'other-cccc', CPU)}\n",
        tmp_path / "kernelwheel-dev-mine.pth": "/somewhere/of/mine\n",
    }
    for path, text in kept.items():
        path.write_text(text)
    folder = dev_dir / "tiny_add-aaaa"
    build = DevBuild(CPU, folder, dev_site(folder, CPU), folder / "hub", Path("py"))
    got = link_dev_build(build, project, python, tmp_path / "cache", Runner())
    assert got.renamed == ("kernelwheel-dev-ren_a.pth",) and not old.exists()
    assert all(path.read_text() == text for path, text in kept.items())
    assert link_dev_build(build, project, python, tmp_path / "cache", Runner()).renamed == ()
    out = io.StringIO()
    dev._report(ConsoleUI(out=out, err=io.StringIO()), project, build, got)
    assert "removed kernelwheel-dev-ren_a.pth from that environment" in out.getvalue()
    assert "its old package name (now tiny_add)" in out.getvalue()


def test_linking_a_second_checkout_of_the_same_package_says_which_link_it_replaced(
    tmp_path: Path,
) -> None:
    # two clones of one kernel (a fork beside upstream), each run through dev in one venv:
    # the .pth of the package silently switched to the last one run
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "2.13.0+cpu", ""]\'\n')
    python.chmod(0o755)

    def build(folder: str) -> DevBuild:
        dev_dir = tmp_path / "cache" / "dev" / folder
        return DevBuild(CPU, dev_dir, dev_site(dev_dir, CPU), dev_dir / "hub", Path("py"))

    def link(b: DevBuild) -> Linked:
        return link_dev_build(b, project, python, tmp_path / "cache", Runner())

    first, second = build("tiny_add-aaaa"), build("tiny_add-bbbb")
    assert link(first).replaced is None
    assert link(first).replaced is None  # the same build again
    other = replace(
        first, site=dev_site(first.folder, Variant.parse("torch214-cxx11-cpu-x86_64-linux"))
    )
    assert link(other).replaced is None  # the same folder's build of another variant
    got = link(second)
    assert got.replaced == str(other.site)
    out, err = io.StringIO(), io.StringIO()
    dev._report(ConsoleUI(out=out, err=err), project, second, got)
    assert f"another folder's dev build of tiny_add until now ({other.site})" in err.getvalue()


def test_the_replaced_link_names_the_other_checkouts_project_folder(tmp_path: Path) -> None:
    # the warning named the other checkout's dev folder in the cache and told to run
    # "kernelwheel dev in that folder" (the cache's), not the project folder to run it in
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    fork = write_tiny_kernel(tmp_path / "my fork é")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "2.13.0+cpu", ""]\'\n')
    python.chmod(0o755)
    builds = []
    for name in ("tiny_add-aaaa", "tiny_add-bbbb"):
        dev_dir = tmp_path / "cache" / "dev" / name
        builds.append(DevBuild(CPU, dev_dir, dev_site(dev_dir, CPU), dev_dir / "hub", Path("py")))
    package = builds[0].site / "tiny_add"
    package.mkdir(parents=True)
    (package / "__init__.py").symlink_to(fork / "torch-ext" / "tiny_add" / "__init__.py")
    link_dev_build(builds[0], project, python, tmp_path / "cache", Runner())
    got = link_dev_build(builds[1], project, python, tmp_path / "cache", Runner())
    assert got.replaced_project == fork
    out, err = io.StringIO(), io.StringIO()
    dev._report(ConsoleUI(out=out, err=err), project, builds[1], got)
    said = " ".join(err.getvalue().split())
    assert f"until now ({fork}, built in {builds[0].site})" in said, said
    assert f"a kernelwheel dev in {fork} links it back" in said


def test_a_python_depends_the_linked_interpreter_lacks_is_named(tmp_path: Path) -> None:
    # python-depends = ["einops"], a venv without it: dev linked the build and said nothing,
    # and the tests failed at collection with ModuleNotFoundError
    root = write_tiny_kernel(tmp_path / "p")
    toml = (root / "build.toml").read_text()
    general = '[general]\npython-depends = ["einops", "numpy>=1.26"]\n'
    (root / "build.toml").write_text(toml.replace("[general]\n", general, 1))
    project = load_project(root)
    python = tmp_path / "python"
    for found, missing in (
        ('["", "1.25.0"]', ("einops", "numpy>=1.26")),
        ('["0.8.1", "2.1.0"]', ()),
    ):
        python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "2.13.0+cpu", "", {found}]\'\n')
        python.chmod(0o755)
        got = link_dev_build(_build(tmp_path), project, python, tmp_path / "cache", Runner())
        assert got.pth is not None and got.missing == missing


def test_the_build_environments_lack_of_a_python_depends_is_found(tmp_path: Path) -> None:
    # no venv: the tests ran in the build environment, which never has python-depends, and
    # failed with ModuleNotFoundError, nothing saying why or what to do
    from kernelwheel.builder.dev import lacking

    root = write_tiny_kernel(tmp_path / "p")
    toml = (root / "build.toml").read_text()
    (root / "build.toml").write_text(
        toml.replace("[general]\n", '[general]\npython-depends = ["einops"]\n', 1)
    )
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "2.13.0+cpu", "", [""]]\'\n')
    python.chmod(0o755)
    assert lacking(python, load_project(root), CPU, Runner()) == ("einops",)
    plain = load_project(write_tiny_kernel(tmp_path / "q"))  # nothing required: not asked
    assert lacking(tmp_path / "absent", plain, CPU, Runner()) == ()


def test_dev_links_by_the_import_guards_rule_not_a_restatement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dev decided where to link with its own copy of compat/rules.py's torch-version rule; it
    asks that rule (the one every wheel's import guard embeds) now: what it says, dev does."""
    from kernelwheel.compat import rules

    project = load_project(write_tiny_kernel(tmp_path / "p"))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho \'["{tmp_path}", "2.14.1+cu130", ""]\'\n')
    python.chmod(0o755)
    build = _build(tmp_path)  # torch 2.13: not linked under torch 2.14 by the rule as it is
    assert link_dev_build(build, project, python, tmp_path / "cache", Runner()).pth is None
    seen: list[tuple[rules.Build, rules.Torch]] = []

    def admits_all(build: rules.Build, torch: rules.Torch) -> list[str]:
        seen.append((build, torch))
        return []

    monkeypatch.setattr(rules, "problems", admits_all)
    assert link_dev_build(build, project, python, tmp_path / "cache", Runner()).pth is not None
    ((asked, running),) = seen
    assert asked.torch == (2, 13) and not asked.stable_abi and running.release == (2, 14)


def test_watch_shows_a_failed_builds_fix_once_and_keeps_watching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_tiny_kernel(tmp_path / "p")
    runs: list[int] = []

    def dev_once(args: object, ui: object, before_build: Any = None) -> object:
        runs.append(1)
        if before_build is not None:
            before_build(load_project(root))
        if len(runs) == 2:  # the save after the first build does not compile
            raise BuildError("compiling csrc/add_one.cpp failed", hint="read the error above")
        return argparse.Namespace(planned=argparse.Namespace(project=load_project(root)))

    saves = iter(range(3))

    def sleep(seconds: float) -> None:
        if seconds != 0.5:  # the wait for a save to settle: nothing more is written
            return
        if next(saves, None) is None:
            raise KeyboardInterrupt  # Ctrl-C
        (root / "csrc" / "add_one.cpp").write_text(f"// save {len(runs)}\n")

    monkeypatch.setattr(dev, "dev_once", dev_once)
    monkeypatch.setattr(dev.time, "sleep", sleep)
    err = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        dev.run(argparse.Namespace(watch=True), ConsoleUI(out=io.StringIO(), err=err))
    assert len(runs) == 4  # the failed build did not end the watch
    assert err.getvalue().count("fix: read the error above") == 1


def _watch_runs(
    root: Path, monkeypatch: pytest.MonkeyPatch, build: Callable[[int], None], polls: int = 3
) -> tuple[int, str]:
    """``dev --watch`` of ``root`` whose builds run ``build(n)`` (n: 1 for the first) after
    reading the project, ended (Ctrl-C) at the fourth build or after ``polls`` idle polls: the
    builds made and the error output."""
    runs: list[int] = []

    def dev_once(args: object, ui: object, before_build: Any = None) -> object:
        runs.append(1)
        if len(runs) == 4:
            raise KeyboardInterrupt
        project = load_project(root)
        if before_build is not None:
            before_build(project)
        build(len(runs))
        return argparse.Namespace(planned=argparse.Namespace(project=project))

    idle = iter(range(polls))

    def sleep(seconds: float) -> None:
        if seconds == 0.5 and next(idle, None) is None:  # nothing changed: Ctrl-C
            raise KeyboardInterrupt

    monkeypatch.setattr(dev, "dev_once", dev_once)
    monkeypatch.setattr(dev.time, "sleep", sleep)
    err = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        dev.run(argparse.Namespace(watch=True), ConsoleUI(out=io.StringIO(), err=err))
    return len(runs), err.getvalue()


def test_watch_builds_a_save_made_while_its_first_build_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the header saved while the first build compiled: that build read the old one, and the
    # watch, looking only from then on, sat idle on a stale build
    root = write_tiny_kernel(tmp_path / "p")

    def build(n: int) -> None:
        if n == 1:
            (root / "csrc" / "add_one.cpp").write_text("// saved during the first build\n")

    runs, _ = _watch_runs(root, monkeypatch, build)
    assert runs == 2


def test_watch_keeps_watching_when_its_first_build_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # started on a kernel that does not compile yet: the watch ended (exit 6) before watching
    root = write_tiny_kernel(tmp_path / "p")

    def build(n: int) -> None:
        if n == 1:
            (root / "csrc" / "add_one.cpp").write_text("// the fix, saved\n")
            raise BuildError("compiling csrc/add_one.cpp failed", hint="read the error above")

    runs, err = _watch_runs(root, monkeypatch, build)
    assert runs == 2
    assert err.count("fix: read the error above") == 1


def test_watch_started_on_a_build_toml_that_does_not_parse_yet_keeps_watching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # build.toml half-written when the watch starts: it ended (exit 3) instead of building the
    # save that completes it
    root = write_tiny_kernel(tmp_path / "p")
    toml = root / "build.toml"
    good = toml.read_text()
    toml.write_text(good + "[kernel.broken\n")
    monkeypatch.chdir(root)
    builds: list[int] = []
    real = dev.dev_once

    def dev_once(args: argparse.Namespace, ui: ConsoleUI, **kwargs: Any) -> object:
        builds.append(1)
        if len(builds) == 1:
            return real(args, ui, **kwargs)  # refused: build.toml does not parse
        raise KeyboardInterrupt  # the next save was built: Ctrl-C

    saves = iter([good])

    def sleep(seconds: float) -> None:
        if seconds == 0.5:
            toml.write_text(next(saves))

    monkeypatch.setattr(dev, "dev_once", dev_once)
    monkeypatch.setattr(dev.time, "sleep", sleep)
    assert main(["dev", "--watch"]) == 130  # Ctrl-C
    assert len(builds) == 2
    out, err = capsys.readouterr()
    assert "invalid TOML" in err and f"watching {root.resolve()}" in out


def test_watch_of_no_project_is_refused_not_watched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dev", "--watch", str(tmp_path)]) == 3  # no build.toml: nothing to watch
    assert "watching" not in capsys.readouterr().out


def test_tests_a_signal_ended_exit_as_a_shell_says_naming_it() -> None:
    # `kernelwheel test --no-load-check` of an extension that aborts on import: 134, not 250
    err = io.StringIO()
    ui = ConsoleUI(out=io.StringIO(), err=err)
    assert pytest_exit(1, ui) == 1 and err.getvalue() == ""
    assert pytest_exit(-6, ui) == 134
    assert "ended by SIGABRT" in err.getvalue()
    # a kernel writing past its output: pytest's dots do not say which test crashed
    assert "fix: to see the test that ended it, run 'kernelwheel test -- -v -x'" in err.getvalue()


SKIPPING_TESTS = """\
import pytest

needs_gpu = pytest.mark.skipif(True, reason="CUDA is not available")


@needs_gpu
@pytest.mark.parametrize("n", [1, 2, 3])
def test_rotary(n):
    pass


def test_triton():
    pytest.skip("triton is not installed")
"""


def test_a_run_that_skipped_every_test_says_so_with_the_reasons(tmp_path: Path) -> None:
    # kernels-community rotary on a machine without a GPU: 192 skipped, exit 0, and nothing
    # but pytest's last line to tell that nothing was tested. A real pytest run, loading the
    # report plugin as `kernelwheel test` does, the project's own -r option left alone.
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_k.py").write_text(SKIPPING_TESTS)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -rN\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "dev-site")}
    outcome = test_cli._counting(tmp_path / "dev", env)
    assert env["PYTHONPATH"].startswith(str(tmp_path / "dev-site") + os.pathsep)  # it leads

    def run(*args: str) -> tuple[int, str, str]:
        cmd = [sys.executable, "-m", "pytest", "-p", test_cli._pytest_report.PLUGIN, *args]
        ran = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        err = io.StringIO()
        code = pytest_exit(
            ran.returncode, ConsoleUI(out=io.StringIO(), err=err), None, None, outcome
        )
        return code, err.getvalue(), ran.stdout

    code, said, out = run("-p", "no:cacheprovider", "tests")
    assert code == 0 and "4 skipped" in out and "SKIPPED [" not in out, out  # -rN kept
    assert said == (
        "warning: no test ran: 4 skipped, none passed (3 'CUDA is not available', 1 'triton is "
        "not installed'), so nothing was tested here; kernelwheel test -- -rs lists each\n"
    )
    # a test that passed beside the skipped ones: nothing to say
    (root / "tests" / "test_cpu.py").write_text("def test_cpu():\n    pass\n")
    code, said, out = run("-p", "no:cacheprovider", "tests")
    assert code == 0 and "1 passed, 4 skipped" in out and said == ""
    # a failure among skips: pytest's exit code and failure say it all
    (root / "tests" / "test_cpu.py").write_text("def test_cpu():\n    assert False\n")
    code, said, _ = run("-p", "no:cacheprovider", "tests")
    assert code == 1 and said == ""
    # no report (a run that died before its summary): nothing said, nothing stale read
    outcome.unlink(missing_ok=True)
    assert pytest_exit(0, ConsoleUI(out=io.StringIO(), err=io.StringIO()), None, None, outcome) == 0
    # a damaged report is read as none, never a traceback
    for damaged in ("[]", '{"counts": {"skipped": 2}, "reasons": "x"}', '{"counts": 3}'):
        outcome.write_text(damaged)
        err = io.StringIO()
        assert pytest_exit(0, ConsoleUI(out=io.StringIO(), err=err), None, None, outcome) == 0
        assert err.getvalue() == ""


def test_failed_tests_of_a_cuda_build_on_a_machine_without_a_gpu_say_so_with_the_fix() -> None:
    # a test calling torch.randn(4, device="cuda") failed on the laptop with torch's "Found no
    # NVIDIA driver" and kernelwheel said nothing of the GPU the machine lacks
    from support.runners import Reply, ScriptedRunner

    def answer(cmd: list[str], cwd: Path | None) -> Reply:
        assert cmd[0] == "nvidia-smi"
        return Reply(code=9, stderr="NVIDIA-SMI has failed: no NVIDIA driver")

    cuda = Variant.parse("torch214-cxx11-cu130-x86_64-linux")
    build = DevBuild(cuda, Path("dev"), Path("site"), Path("hub"), Path("py"))
    out = io.StringIO()
    ui = ConsoleUI(out=out, err=io.StringIO())
    runner = ScriptedRunner(answer)
    assert pytest_exit(1, ui, None, None, None, gpu_note(build, 1, runner)) == 1
    said = out.getvalue()
    assert said.startswith("tests failed; this machine has no NVIDIA GPU (nvidia-smi: exit 9")
    assert "skip it where torch.cuda.is_available() is False" in said
    # passed tests, a CPU build, a machine with a GPU: nothing said, nvidia-smi not asked
    assert gpu_note(build, 0, runner) is None
    assert gpu_note(DevBuild(CPU, Path("d"), Path("s"), Path("h"), Path("p")), 1, runner) is None
    assert len(runner.commands) == 1
    with_gpu = ScriptedRunner(lambda cmd, cwd: Reply(stdout="GPU-1, 9.0\n"))
    assert gpu_note(build, 1, with_gpu) is None


def test_failed_tests_repeat_the_note_of_files_the_build_leaves_out(tmp_path: Path) -> None:
    # data/table.json, read by the package, not in pyext: the tests failed with a
    # FileNotFoundError under the dev build's path, the note that said why far above them
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    (project.package_dir / "data").mkdir()
    (project.package_dir / "data" / "table.json").write_text("{}")
    out = io.StringIO()
    ui = ConsoleUI(out=out, err=io.StringIO())
    assert pytest_exit(0, ui, project) == 0 and out.getvalue() == ""
    assert pytest_exit(1, ui, project) == 1
    said = out.getvalue()
    assert "tests failed; note: torch-ext/tiny_add/data/table.json left out" in said
    assert 'add "json" to pyext' in said
    # the package reads it on import (a module-level json.load): pytest's collection fails, 2
    out.truncate(0)
    out.seek(0)
    assert pytest_exit(2, ui, project) == 2
    assert "collecting the tests failed; note: torch-ext/tiny_add/data/table.json left out" in (
        out.getvalue()
    )
    # a py.typed left out (kernels-community einops): no test fails for it, no note under them
    (project.package_dir / "data" / "table.json").unlink()
    (project.package_dir / "py.typed").write_text("")
    out.truncate(0)
    assert pytest_exit(1, ui, project) == 1 and out.getvalue() == ""
    assert "py.typed left out" in (left_out_note(project) or "")  # the build's note stays


def test_an_import_of_a_module_the_package_no_longer_holds_is_named_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # kernels-community einops with packing.py deleted: `dev` said nothing, and the tests'
    # collection failed with "No module named '_einops_cpu_dev….packing'" in the Hub copy
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    project = load_project(root)
    init = project.package_dir / "__init__.py"
    sub = project.package_dir / "sub" / "__init__.py"
    init.write_text(NOARCH_INIT + "from .packing import pack\nfrom .sub import VALUE\n")
    sub.write_text(
        "from .. import factor\nfrom ..gone.deeper import x\nfrom . import anything\n"
        "try:\n    from .optional import y\nexcept ImportError:\n    y = None\n"
        "def later():\n    from .lazy import z\n"
    )
    assert main(["dev", str(root), "--cache-dir", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    line = len(NOARCH_INIT.splitlines()) + 1
    assert (
        f"warning: torch-ext/scale_noarch/__init__.py:{line} imports .packing, which "
        "torch-ext/scale_noarch/ does not hold" in out
    )
    assert "torch-ext/scale_noarch/sub/__init__.py:2 imports ..gone.deeper" in out
    # the held module, the package's names, guarded and deferred imports: no word
    for fine in (".sub ", "..factor", ". import", ".optional", ".lazy", "._ops"):
        assert f"imports {fine}" not in out
    # said again under the collection error the import gives
    ui = ConsoleUI(out=(said := io.StringIO()), err=io.StringIO())
    assert pytest_exit(2, ui, project) == 2
    assert f"collecting the tests failed; warning: torch-ext/scale_noarch/__init__.py:{line}" in (
        said.getvalue()
    )
    init.write_text(NOARCH_INIT)  # mended: no word, from the same build
    sub.write_text("")
    assert main(["dev", str(root), "--cache-dir", str(tmp_path / "c")]) == 0
    assert "does not hold" not in capsys.readouterr().out


def test_a_shadowing_install_is_removed_from_the_linked_interpreter(tmp_path: Path) -> None:
    # with --python PY, the pip on PATH may be another environment's
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    python = tmp_path / "venv" / "bin" / "python"
    linked = Linked(python, tmp_path / "x.pth", shadowed_by="0.1.0+torch2.13.cpu.cxx11")
    err = io.StringIO()
    dev._report(ConsoleUI(out=io.StringIO(), err=err), project, _build(tmp_path), linked)
    assert f"{python} -m pip uninstall tiny-add" in err.getvalue()
    assert "these tests" not in err.getvalue()
    # kernelwheel test: the warning read as if the tests ran the stale copy; they never do
    err = io.StringIO()
    ui = ConsoleUI(out=io.StringIO(), err=err)
    dev._report(ui, project, _build(tmp_path), linked, testing=True)
    assert "imported before the dev build (not by these tests: they get the dev build first)" in (
        err.getvalue()
    )


def test_a_dev_build_of_another_arch_is_refused_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_tiny_kernel(tmp_path / "p")
    other = "aarch64" if Arch.host() is Arch.X86_64 else "x86_64"
    name = f"torch213-cxx11-cpu-{other}-linux"
    assert main(["dev", str(root), "--variant", name, "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert f"--variant {name}: a dev build is imported on this machine, and an {other}" in err
    assert f"kernelwheel build --variant {name}" in err
    assert not (tmp_path / "c").exists()  # no environment begun


def test_a_noarch_dev_build_links_the_authors_files_and_lays_out_each_backends_hub_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # it was refused ("is a noarch project: kernelwheel dev builds torch extensions only"):
    # a pure-Python author had no loop at all
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    project = load_project(root)
    cache = tmp_path / "c"
    assert main(["dev", str(root), "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    folder = dev_folder(cache, project)
    site = folder / "site" / "noarch"
    package = site / "scale_noarch"
    assert f"dev build of scale-noarch (torch-cpu, torch-cuda): {package}" in out
    assert f"PYTHONPATH={site} python  # holding torch" in out
    assert f"LOCAL_KERNELS=local/scale-noarch={folder / 'hub'}" in out
    # the author's files linked, not copied: an edit is what the next import reads
    for rel in ("__init__.py", "factor.json", "sub/__init__.py"):
        assert (package / rel).resolve() == (project.package_dir / rel).resolve()
    assert not (package / "notes.txt").exists()  # no pyext suffix: not in the wheel either
    ops = (package / "_ops.py").read_text()
    assert "_running_backend()" in ops and "_scale_noarch_" in ops
    for backend in ("cpu", "cuda"):  # kernels loads the folder of the running torch's backend
        with pytest.raises(UsageError, match="is a 'kernelwheel dev' build, not a release"):
            read_layout(folder / "hub")
        meta = json.loads(
            (folder / "hub" / "build" / f"torch-{backend}" / "metadata.json").read_text()
        )
        assert meta["id"].startswith(f"_scale_noarch_{backend}_dev"), meta
        copied = folder / "hub" / "build" / f"torch-{backend}" / "__init__.py"
        assert copied.read_text() == NOARCH_INIT
    # an edit: the site has it at once, the Hub copy on the next run
    init = project.package_dir / "__init__.py"
    init.write_text(NOARCH_INIT + "EDITED = True\n")
    assert "EDITED" in (package / "__init__.py").read_text()
    assert main(["dev", str(root), "--cache-dir", str(cache)]) == 0
    assert "EDITED" in (folder / "hub" / "build" / "torch-cpu" / "__init__.py").read_text()
    assert not list(root.rglob("__pycache__")) and not (root / "build").exists()
    # a build.toml edit that changes no file of the package: the metadata follows it
    toml = (root / "build.toml").read_text()
    (root / "build.toml").write_text(toml.replace('license = "MIT"', 'license = "Apache-2.0"'))
    assert main(["dev", str(root), "--cache-dir", str(cache)]) == 0
    meta = json.loads((folder / "hub" / "build" / "torch-cpu" / "metadata.json").read_text())
    assert meta["license"] == "Apache-2.0"
    # a backend dropped from build.toml: its old Hub copy goes (kernels would still load it)
    toml = (root / "build.toml").read_text()
    (root / "build.toml").write_text(
        toml.replace('backends = ["cpu", "cuda"]', 'backends = ["cpu"]')
    )
    assert main(["dev", str(root), "--cache-dir", str(cache)]) == 0
    assert sorted(p.name for p in (folder / "hub" / "build").iterdir()) == ["torch-cpu"]
    assert not (folder / "hub-torch-cuda.stamp").exists()


def test_a_noarch_build_with_a_syntax_error_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_noarch_project(tmp_path / "n")
    (root / "torch-ext" / "scale_noarch" / "sub" / "__init__.py").write_text("def f(:\n")
    assert main(["dev", str(root), "--cache-dir", str(tmp_path / "c")]) == 6
    said = capsys.readouterr()
    assert "torch-ext/scale_noarch/sub/__init__.py:1" in said.err
    # said once: not first as a file "not checked for op registrations" (a warning), then refused
    assert "not checked for op registrations" not in said.out + said.err


@pytest.mark.parametrize(
    "code",
    ["x = " + "-" * 100_000 + "1\n", "x = " + " + ".join(["'a'"] * 200_000) + "\n"],
    ids=["unary-minus", "long-sum"],
)
def test_a_noarch_file_too_deep_for_the_parser_is_refused_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    # a generated table nested past the parser's depth: compile() raised MemoryError or
    # RecursionError out of dev and build (a traceback, exit 1); its import fails the same way
    root = write_noarch_project(tmp_path / "n")
    (root / "torch-ext" / "scale_noarch" / "table.py").write_text(code)
    assert main(["dev", str(root), "--cache-dir", str(tmp_path / "c")]) == 6
    err = capsys.readouterr().err
    assert "torch-ext/scale_noarch/table.py: nested too deeply for this Python's parser" in err
    assert "Traceback" not in err


def test_noarch_tests_with_no_interpreter_are_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a pure-Python build has no build environment to run its tests in
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    assert main(["test", str(root), "--cache-dir", str(tmp_path / "c")]) == 5
    err = capsys.readouterr().err
    assert "scale-noarch is pure Python: its tests need an interpreter holding torch" in err
    assert "activate a virtual environment holding torch" in err and "--python PY" in err
    # one given that lacks torch: it is named, with the pip command that fixes it
    venv = QuickVenv(tmp_path / "venv")
    args = ["test", str(root), "--cache-dir", str(tmp_path / "c"), "--python", str(venv.python)]
    assert main(args) == 5
    err = capsys.readouterr().err
    assert f"({venv.python}: it has no torch, the build needs torch)" in err
    assert f"'{venv.python} -m pip install \"torch\"'" in err


def test_a_build_is_linked_only_where_its_runtime_is_installed(tmp_path: Path) -> None:
    # a pure-Python build needs the torch its wheel requires, a tvm-ffi build apache-tvm-ffi of
    # its series: an interpreter without it is not linked (its import would fail), and says why
    project = load_project(write_noarch_project(tmp_path / "n"))
    venv = QuickVenv(tmp_path / "venv", [fake_torch(tmp_path, "2.13.0")])
    pth = venv.purelib / "kernelwheel-dev-scale_noarch.pth"
    for runtime, linked in (("torch>=2.14", False), ("torch>=2.8", True)):
        build = replace(_build(tmp_path / "dev"), runtime=runtime)
        got = link_dev_build(build, project, venv.python, tmp_path / "cache", Runner())
        assert (got.pth is not None) is linked and pth.is_file() is linked, got
        if not linked:
            assert got.skipped == "it has torch 2.13.0, the build needs torch>=2.14"
    build = replace(_build(tmp_path / "dev"), runtime="apache-tvm-ffi>=0.1.9,<0.2")
    pth.unlink()
    got = link_dev_build(build, project, venv.python, tmp_path / "cache", Runner())
    assert got.skipped == "it has no apache-tvm-ffi, the build needs apache-tvm-ffi<0.2,>=0.1.9"
    assert not pth.exists()


def test_a_dev_build_shows_the_compile_plans_notes_as_build_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a source testing KERNELWHEEL_WITH_CUDA (its code silently left out): build printed the
    # warning, dev wrote it to the log alone
    from types import SimpleNamespace

    from kernelwheel.builder import dev as dev_builder
    from kernelwheel.builder import dev_layout
    from kernelwheel.builder.steps import Compiled
    from kernelwheel.log import SilentReporter

    note = "warning: csrc/k.cpp:3 tests KERNELWHEEL_WITH_CUDA: kernel-builder never defines it"
    compiled = Compiled(
        tmp_path / "k.so", (), "ccache 0/1 hit", (note,), ("csrc/k.cpp: 1 warning",)
    )

    class Stop(Exception):
        pass

    def stop(*args: object) -> None:
        raise Stop

    env = SimpleNamespace(env=SimpleNamespace(python=tmp_path / "python"))
    monkeypatch.setattr(dev_builder, "prepare_environment", lambda *a: env)
    monkeypatch.setattr(dev_builder, "compile_extension", lambda *a, **k: compiled)
    monkeypatch.setattr(dev_layout, "sha256_remembered", stop)
    project = load_project(write_tiny_kernel(tmp_path / "p"))
    req = SimpleNamespace(
        project=project,
        variant=CPU,
        log=tmp_path / "logs" / "dev.log",
        log_header=lambda: "kernelwheel build\n",
        outputs=SimpleNamespace(work_dir=tmp_path / "dev"),
    )
    reporter = SilentReporter()
    with pytest.raises(Stop):
        dev_builder._build_dev(req, reporter, Runner(), False)  # type: ignore[arg-type]
    assert (CPU.name, note) in reporter.messages
    assert (CPU.name, "warning: csrc/k.cpp: 1 warning") in reporter.messages


def test_test_refuses_a_project_without_tests_before_building_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # it built the variant (minutes for a CUDA one) and only then said there was nothing to run
    root = write_tiny_kernel(tmp_path / "p")
    assert not (root / "tests").exists()
    cache = tmp_path / "c"
    assert main(["test", str(root), "--cache-dir", str(cache)]) == 5
    err = capsys.readouterr().err
    assert f"{root} has no tests/ folder" in err and "kernelwheel init writes one" in err
    assert not cache.exists()  # no environment, no dev folder


def test_a_tvm_ffi_build_environment_is_named_for_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the tests of a tvm-ffi project, run in its build environment, import a module it lacks:
    # that environment was said to hold "torch alone", and the fix asked for "this variant's
    # torch, pytest and torch"
    from kernelwheel.cli.test import _warn_missing_imports

    root = write_noarch_project(tmp_path / "p")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("import no_such_module_here\n")
    python = Path(sys.executable)
    build = replace(_build(tmp_path / "dev"), python=python, runtime="apache-tvm-ffi>=0.1.9,<0.2")
    out, err = io.StringIO(), io.StringIO()
    ui = ConsoleUI(out=out, err=err)
    project = load_project(root)
    again = _warn_missing_imports(project, build, python, dict(os.environ), ui, Runner())
    said = out.getvalue() + err.getvalue()
    assert "(the build environment: kernelwheel's, holding apache-tvm-ffi alone)" in said, said
    assert "holding apache-tvm-ffi>=0.1.9,<0.2, pytest and no_such_module_here" in said, said
    # pytest's collection error (2) is what the author sees last: the fix said again under it
    out.truncate(0)
    out.seek(0)
    assert pytest_exit(2, ui, project, again) == 2
    under = out.getvalue()
    assert under.startswith(f"collecting the tests failed; {python} cannot import "), under
    assert "no_such_module_here; fix: activate a virtual environment holding apache-tvm-ffi" in (
        under
    )


def test_every_selection_of_a_noarch_projects_variants_takes_one_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `dev --variant torch-cuda` beside a `test` of both: each wrote the one site/noarch under
    # a lock of its own variant's name
    from contextlib import nullcontext

    from kernelwheel.builder import dev as dev_builder

    taken: list[str] = []
    monkeypatch.setattr(
        dev_builder, "locked", lambda path, waiting: taken.append(path.name) or nullcontext()
    )
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    for selected in ([], ["--variant", "torch-cuda"], ["--variant", "torch-cpu"]):
        assert main(["dev", str(root), "--cache-dir", str(tmp_path / "c"), *selected]) == 0
    assert taken == ["noarch.lock"] * 3


def test_the_tests_interpreter_is_asked_for_pytest_without_importing_it(tmp_path: Path) -> None:
    # `python -c "import pytest"` before every run: 0.75 s of a pure-Python project's 7 s
    # `kernelwheel test` on this machine, pytest then imported again by its own run
    site = tmp_path / "site"
    (site / "pytest").mkdir(parents=True)
    imported = tmp_path / "imported"
    (site / "pytest" / "__init__.py").write_text(f"open({str(imported)!r}, 'w').close()\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    assert has_pytest(Path(sys.executable), env, Runner())
    assert not imported.exists()
    bare = QuickVenv(tmp_path / "venv")  # no pytest: kernelwheel's own is provided
    assert not has_pytest(bare.python, dict(os.environ, PYTHONPATH=""), Runner())


def test_a_killed_runs_orphans_are_stopped_and_named_by_the_next_dev(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a `test` killed with -9 left its pytest running on the dev build; the next run stopped it
    # without a word, and the author's terminal lost its tests' output unexplained
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    cache = tmp_path / "c"
    folder = dev_folder(cache, load_project(root))
    folder.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    run_id = f"{dead.pid}:12345"
    (folder / "noarch.lock.owner").write_text(json.dumps({"pid": dead.pid, "start": "12345"}))
    orphan = subprocess.Popen(["sleep", "60"], env={**os.environ, "KERNELWHEEL_RUN_ID": run_id})
    try:
        assert main(["dev", str(root), "--cache-dir", str(cache)]) == 0
        assert orphan.wait(timeout=10) == -9
    finally:
        orphan.kill()
    out = capsys.readouterr().out
    assert f"a run that died (pid {dead.pid}) held this lock" in out, out
    assert f"(pids {orphan.pid}) were stopped" in out
    assert not (folder / "noarch.lock.owner").exists()
