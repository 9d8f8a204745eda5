"""A real build under a memory limit (issue 39 item 2's proof here): img2gray's CPU variant
compiled cold (no compiler cache) by `kernelwheel build --jobs 2` inside a memory cgroup of
1250 MiB made for the test (nested in this process's own cgroup; skipped where none can be
made). With the CPUs' split forced (memory-per-thread 1 MiB: every unit "fits"), the binding
(~980 MiB of cc1plus) and the CPU kernel (~610 MiB) compile side by side and the kernel kills
a compiler; left to compile/memory, the build reads the cgroup's room, compiles one unit at a
time, says so in its log, finishes, and records each unit's measured peak."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT, IMG2GRAY, build_env

from kernelwheel.plan.options import ENV_VARS

pytestmark = pytest.mark.integration

LIMIT_MIB = 1250  # serial: ~1150 MiB at its peak here; two units at once: killed


def _own_memory_cgroup() -> tuple[str, Path] | None:
    """(v1|v2, this process's memory cgroup folder), where a child folder can be made in it."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if os.access(folder, os.W_OK):
                return "v1", folder
        if controllers == "" and line.startswith("0:"):
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            enabled = folder / "cgroup.subtree_control"
            if enabled.is_file() and "memory" in enabled.read_text() and os.access(folder, os.W_OK):
                return "v2", folder
    return None


@pytest.fixture
def limited() -> Iterator[Path]:
    """A memory cgroup of LIMIT_MIB, removed after the test."""
    found = _own_memory_cgroup()
    if found is None:
        pytest.skip("no memory cgroup can be made here (this process's is not writable)")
    version, parent = found
    folder = parent / f"kernelwheel-test-{os.getpid()}"
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"no memory cgroup can be made in {parent}: {exc}")
    limit = "memory.limit_in_bytes" if version == "v1" else "memory.max"
    (folder / limit).write_text(str(LIMIT_MIB << 20))
    yield folder
    folder.rmdir()  # its processes have ended


def _build(folder: Path, tmp: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """`kernelwheel build` of img2gray's CPU variant in the cgroup ``folder``: its result and
    the variant's log."""
    python = build_env(CPU_VARIANT).python  # the cached environment, only read
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    out = tmp / "out"
    args = [sys.executable, "-m", "kernelwheel", "build", str(IMG2GRAY)]
    args += ["--variant", CPU_VARIANT, "--python", str(python), "--output-dir", str(out)]
    args += ["--cache-dir", str(tmp / "cache"), "--no-ccache", "--jobs", "2", *extra]

    def enter() -> None:
        (folder / "cgroup.procs").write_text(str(os.getpid()))

    proc = subprocess.run(
        args, preexec_fn=enter, capture_output=True, text=True, env=env, timeout=600
    )
    log = out / "logs" / f"{CPU_VARIANT}.log"
    return proc, log.read_text() if log.is_file() else ""


def test_a_build_fits_its_jobs_to_a_cgroup_limit_where_jobs_equal_to_cpus_die(
    limited: Path, tmp_path: Path
) -> None:
    forced, log = _build(limited, tmp_path / "forced", "--memory-per-thread", "1")
    assert forced.returncode != 0, forced.stdout
    assert "note: jobs 2, nvcc threads 1: the CPU budget" in log
    assert "Killed signal terminated program cc1plus" in log  # the kernel's OOM kill

    fitted, log = _build(limited, tmp_path / "fitted")
    assert fitted.returncode == 0, fitted.stdout + fitted.stderr
    assert "1 of 1 variant(s) built" in fitted.stdout
    line = next(ln for ln in log.splitlines() if ln.startswith("note: jobs "))
    assert line.startswith("note: jobs 1, nvcc threads 1: limited by memory: ")
    assert f"/{limited.name}: memory." in line  # the test's cgroup is the limit named
    assert line.endswith("the CPUs allow jobs 2, nvcc threads 1")
    assert "limited by memory" in fitted.stdout  # the note is shown, not only logged
    (peaks,) = (tmp_path / "fitted" / "cache" / "unit-costs").glob("*.peaks.json")
    measured = json.loads(peaks.read_text())
    assert 300 < measured["torch-ext/torch_binding.cpp"] < LIMIT_MIB
    assert 100 < measured["csrc/img2gray_cpu.cpp"] < measured["torch-ext/torch_binding.cpp"]
