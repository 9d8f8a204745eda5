"""The memory model of a compile (compile/memory, issue 39 item 2): the limit read from cgroup v1
and v2 folders and /proc/meminfo laid out under a fake root, each unit's peak (measured by
compile/_peak_rss in a real ninja run, else estimated), the jobs and nvcc threads that fit, the
line the log gets, and the plan a build compiles with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.requests import build_request
from support.variants import TORCH213_CPU, TORCH214_CU130

from kernelwheel.abi.remedies import remedy_flags
from kernelwheel.builder.compile_plan import Toolchain, plan_compile
from kernelwheel.compile import _compile_worker, memory
from kernelwheel.compile.memory import MemoryLimit, UnitMemory, available, fit, units_of
from kernelwheel.compile.unit_costs import PEAK_LOG, read_costs, record_costs, unit_peaks
from kernelwheel.model.capability import parse_all
from kernelwheel.model.variant import Variant
from kernelwheel.toolchain.envs import CudaToolkit

GIB = 1 << 30
NINJA = Path(sys.executable).with_name("ninja")  # the ninja wheel of the test extra
PEAK_RSS = Path(memory.__file__).with_name("_peak_rss.py")


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _meminfo(root: Path, available_kib: int) -> None:
    _write(root, "proc/meminfo", f"MemTotal: 67108864 kB\nMemAvailable: {available_kib} kB\n")


V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNT = (
    "25 23 0:21 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
    "26 23 0:22 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
)


def test_cgroup_v2_the_tightest_level_binds_and_page_cache_is_room(tmp_path: Path) -> None:
    _meminfo(tmp_path, 32 * 1024 * 1024)  # 32 GiB free on the machine
    _write(tmp_path, "proc/self/cgroup", "0::/ci.slice/job-7\n")
    _write(tmp_path, "proc/self/mountinfo", V2_MOUNT)
    job, parent = "sys/fs/cgroup/ci.slice/job-7", "sys/fs/cgroup/ci.slice"
    _write(tmp_path, f"{job}/memory.max", "max\n")  # the job itself: no limit
    _write(tmp_path, f"{job}/memory.current", f"{GIB}\n")
    _write(tmp_path, f"{parent}/memory.max", f"{16 * GIB}\n")  # the runner: 16 GiB
    _write(tmp_path, f"{parent}/memory.current", f"{6 * GIB}\n")
    _write(tmp_path, f"{parent}/memory.stat", f"anon 1\ninactive_file {2 * GIB}\n")
    found = available(tmp_path)
    # 16 GiB - (6 GiB used - 2 GiB reclaimable page cache) = 12 GiB
    assert found == MemoryLimit(12 * 1024, "cgroup v2 /sys/fs/cgroup/ci.slice: memory.max - usage")
    # the machine tighter than the cgroup: MemAvailable binds
    _meminfo(tmp_path, 4 * 1024 * 1024)
    assert available(tmp_path) == MemoryLimit(4096, "MemAvailable in /proc/meminfo")


def test_cgroup_v1_limit_and_unlimited_levels(tmp_path: Path) -> None:
    _meminfo(tmp_path, 32 * 1024 * 1024)
    _write(tmp_path, "proc/self/cgroup", "5:cpu:/\n4:memory:/process_api/abc\n0::/\n")
    _write(tmp_path, "proc/self/mountinfo", V1_MOUNT)
    root, own = "sys/fs/cgroup/memory", "sys/fs/cgroup/memory/process_api/abc"
    for folder in (root, f"{root}/process_api"):  # v1's "no limit": 2**63 rounded to a page
        _write(tmp_path, f"{folder}/memory.limit_in_bytes", "9223372036854771712\n")
        _write(tmp_path, f"{folder}/memory.usage_in_bytes", f"{20 * GIB}\n")
    _write(tmp_path, f"{own}/memory.limit_in_bytes", f"{4 * GIB}\n")
    _write(tmp_path, f"{own}/memory.usage_in_bytes", f"{GIB + 512 * 2**20}\n")
    _write(tmp_path, f"{own}/memory.stat", f"cache 9\ntotal_inactive_file {512 * 2**20}\n")
    limit = available(tmp_path)
    assert limit is not None and limit.mib == 3 * 1024  # 4 GiB - (1.5 GiB - 0.5 GiB cache)
    assert limit.source == (
        "cgroup v1 /sys/fs/cgroup/memory/process_api/abc: memory.limit_in_bytes - usage"
    )


def test_a_namespaced_cgroup_mount_is_its_own_root(tmp_path: Path) -> None:
    """In a container the mount shows the container's cgroup as its root: the process's path
    (the same cgroup) is the mount point itself."""
    _meminfo(tmp_path, 32 * 1024 * 1024)
    _write(tmp_path, "proc/self/cgroup", "0::/docker/f00\n")
    mount = "30 23 0:26 /docker/f00 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"
    _write(tmp_path, "proc/self/mountinfo", mount)
    _write(tmp_path, "sys/fs/cgroup/memory.max", f"{8 * GIB}\n")
    _write(tmp_path, "sys/fs/cgroup/memory.current", f"{2 * GIB}\n")
    assert available(tmp_path) == MemoryLimit(6144, "cgroup v2 /sys/fs/cgroup: memory.max - usage")


def test_nothing_readable_is_no_limit(tmp_path: Path) -> None:
    assert available(tmp_path) is None
    _write(tmp_path, "proc/meminfo", "MemTotal: 1 kB\n")  # no MemAvailable line
    assert available(tmp_path) is None


def test_this_machine_has_a_limit_no_larger_than_its_memavailable() -> None:
    found = available()
    assert found is not None
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            # a little slack: the figure moves between the two reads
            assert found.mib <= int(line.split()[1]) // 1024 + 256


def test_unit_peaks_measured_else_estimated_cuda_per_target() -> None:
    est = memory.Estimates(cuda_per_thread=2000, host_torch=800, host=300, min_measured=32)
    sources = ["k/a.cu", "k/b.cu", "torch-ext/binding.cpp", "k/plain.cpp", "k/hit.cpp"]
    measured = {"k/a.cu": 1500.4, "k/hit.cpp": 8.0}  # the hit: a ccache replay, not a compile
    units = units_of(
        sources, targets=4, torch_free=["k/plain.cpp"], measured=measured, estimates=est
    )
    by = {u.source: u for u in units}
    assert by["k/a.cu"] == UnitMemory("k/a.cu", 1500, 4, "measured")
    assert by["k/b.cu"] == UnitMemory("k/b.cu", 2000, 4, "estimated")
    assert by["torch-ext/binding.cpp"].mib == 800 and by["k/plain.cpp"].mib == 300
    assert by["k/hit.cpp"] == UnitMemory("k/hit.cpp", 800, 0, "estimated")
    assert by["k/a.cu"].at(2) == 3000 and by["k/a.cu"].at(16) == 6000  # threads <= targets
    assert by["k/plain.cpp"].at(8) == 300  # a host unit is one process
    # the memory-per-thread option replaces every figure
    (forced,) = units_of(
        ["k/a.cu"], targets=4, torch_free=(), measured=measured, per_thread=999, estimates=est
    )
    assert (forced.mib, forced.origin) == (999, "the memory-per-thread option")


def test_the_shipped_estimates_load() -> None:
    est = memory.load_estimates()
    assert est.cuda_per_thread > est.host_torch > est.host > est.min_measured > 0


def _units(*mibs: int, targets: int = 0) -> list[UnitMemory]:
    return [
        UnitMemory(f"u{i}.cu" if targets else f"u{i}.cpp", m, targets) for i, m in enumerate(mibs)
    ]


def test_cpu_bound_when_the_memory_holds_the_largest_units() -> None:
    result = fit(4, 1, _units(900, 800, 700, 600, 500), MemoryLimit(8000, "MemAvailable"))
    assert (result.jobs, result.nvcc_threads, result.by_memory) == (4, 1, False)
    assert result.line == (
        "jobs 4, nvcc threads 1: the CPU budget; 8000 MiB available (MemAvailable), "
        "3000 MiB needed by the 4 largest units at once"
    )
    assert (
        fit(4, 1, _units(900), None).line
        == "jobs 4, nvcc threads 1: the CPU budget (memory not known)"
    )


def test_memory_cuts_jobs_to_the_largest_units_that_fit() -> None:
    # floor(available / peak) for equal units: 3900 // 1000 = 3
    result = fit(16, 1, _units(*[1000] * 10), MemoryLimit(3900, "cgroup v1 /x"))
    assert (result.jobs, result.nvcc_threads, result.by_memory) == (3, 1, True)
    assert result.line.startswith(
        "jobs 3, nvcc threads 1: limited by memory: 3900 MiB available (cgroup v1 /x) holds "
        "3000 MiB of units at once (the largest: u0.cpp, 1000 MiB estimated); the CPUs allow "
        "jobs 16, nvcc threads 1"
    )
    # unequal units: any 3 of them fit together (3000 + 500 + 500), where floor(available /
    # the largest peak) would allow 1; one MiB less and only 2 do
    assert fit(8, 1, _units(3000, 500, 500, 500), MemoryLimit(4000, "m")).jobs == 3
    assert fit(8, 1, _units(3000, 500, 500, 500), MemoryLimit(3999, "m")).jobs == 2


def test_memory_cuts_threads_after_jobs_and_never_refuses_a_serial_build() -> None:
    cu = _units(2000, 2000, targets=8)  # 8 targets: up to 8 cicc at once per unit
    result = fit(2, 8, cu, MemoryLimit(9000, "m"))
    assert (result.jobs, result.nvcc_threads) == (1, 4)  # 1 x 4 x 2000 <= 9000
    serial = fit(4, 4, cu, MemoryLimit(1000, "m"))  # not even one thread fits
    assert (serial.jobs, serial.nvcc_threads, serial.by_memory) == (1, 1, True)
    assert "even that exceeds it: compiling serially anyway" in serial.line


def _run_wrapped(log: Path, *command: str) -> int:
    return subprocess.run([sys.executable, "-S", str(PEAK_RSS), str(log), *command]).returncode


def test_peak_rss_measures_the_largest_process_and_keeps_the_exit_status(tmp_path: Path) -> None:
    log = tmp_path / "peaks"
    grow = "import sys; b = bytearray(int(sys.argv[1]) << 20); b[::4096] = b'x' * len(b[::4096])"
    assert _run_wrapped(log, sys.executable, "-c", grow, "300", "-o", "big.o") == 0
    assert _run_wrapped(log, sys.executable, "-c", grow, "1", "-o", "small.o") == 0
    # the largest process of the tree: a child two levels down
    nested = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grow!r}, '200'])"
    assert _run_wrapped(log, sys.executable, "-c", nested, "-o", "nested.o") == 0
    assert _run_wrapped(log, sys.executable, "-c", "raise SystemExit(3)", "-o", "bad.o") == 3
    assert _run_wrapped(log, "sh", "-c", "kill -9 $$", "-o", "killed.o") == 128 + 9
    rows = dict(line.split("\t") for line in log.read_text().splitlines())
    kib = {obj: int(v) for obj, v in rows.items()}
    assert 300 * 1024 <= kib["big.o"] < 400 * 1024
    assert kib["small.o"] < 100 * 1024
    assert 200 * 1024 <= kib["nested.o"] < 300 * 1024
    assert set(kib) == {"big.o", "small.o", "nested.o", "bad.o", "killed.o"}


def test_unit_peaks_from_a_real_ninja_run_through_the_workers_wrapper(tmp_path: Path) -> None:
    """build.ninja's compiler variable wrapped as the worker wraps torch's, ninja run for real:
    each source's peak read back, a light unit under the floor left out, the record only
    growing."""
    temp = tmp_path / "obj dir"
    temp.mkdir()
    heavy, light = tmp_path / "src" / "heavy.cpp", tmp_path / "src" / "light.cpp"
    heavy.parent.mkdir()
    heavy.write_text("250")
    light.write_text("1")
    grow = (
        "import sys, pathlib; n = int(pathlib.Path(sys.argv[1]).read_text()); "
        "b = bytearray(n << 20); b[::4096] = b'x' * len(b[::4096]); "
        "pathlib.Path(sys.argv[3]).write_text('o')"
    )
    esc = str(temp).replace(" ", "$ ")
    text = (
        f"cxx = {sys.executable} -c {_compile_worker.shlex.quote(grow)}\n"
        "rule compile\n  command = $cxx $in -o $out\n"
        f"build {esc}/heavy.o: compile {heavy}\n"
        f"build {esc}/light.o: compile {light}\n"
    )
    log = temp / PEAK_LOG
    wrapped = _compile_worker.measured(text, [sys.executable, "-S", str(PEAK_RSS), str(log)])
    assert wrapped.splitlines()[0].startswith(f"cxx = {sys.executable} -S ")
    (temp / "build.ninja").write_text(wrapped)
    subprocess.run([NINJA, "-C", str(temp)], check=True, capture_output=True)
    peaks = unit_peaks(temp, floor=32)
    assert set(peaks) == {str(heavy)}  # light.cpp's few MiB: under the floor
    assert 250 <= peaks[str(heavy)] < 350
    assert set(unit_peaks(temp)) == {str(heavy), str(light)}
    store = tmp_path / "peaks.json"
    record_costs(store, {"src/heavy.cpp": 300.0}, decay=1.0)
    record_costs(store, {"src/heavy.cpp": 100.0}, decay=1.0)  # a lighter run keeps the peak
    assert read_costs(store) == {"src/heavy.cpp": 300.0}


CU130 = Variant.parse(TORCH214_CU130)
NVCC13 = ("7.5", "8.0", "8.6", "8.7", "8.8", "8.9", "9.0", "10.0", "11.0", "10.3", "12.0", "12.1")


def _project(root: Path, cu_files: int) -> Path:
    kernels = "".join(
        f'[kernel.k{i}]\nbackend = "cuda"\ndepends = ["torch"]\nsrc = ["k/k{i}.cu"]\n'
        for i in range(cu_files)
    )
    _write(
        root,
        "build.toml",
        '[general]\nname = "probe"\nbackends = ["cpu", "cuda"]\n\n'
        '[torch]\nsrc = ["torch-ext/binding.cpp"]\n\n'
        '[kernel.host]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["k/host.cpp"]\n\n' + kernels,
    )
    for rel in ["torch-ext/binding.cpp", "k/host.cpp", *(f"k/k{i}.cu" for i in range(cu_files))]:
        _write(root, rel, "#include <torch/all.h>\n")
    _write(root, "torch-ext/probe/__init__.py", "")
    return root


def _ci(mib: int) -> MemoryLimit:
    """The variant's share as a CI machine's cgroup gives it."""
    return MemoryLimit(mib, "cgroup v2 /ci: memory.max - usage")


def test_the_plan_compiles_with_the_jobs_that_fit_and_says_why(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", 6)
    req = build_request(
        root,
        CU130,
        jobs=16,
        capabilities=parse_all(["8.0", "9.0"]),
    )
    stage = req.outputs.work_dir / "stage"
    roomy = Toolchain(CudaToolkit(Path("/cuda"), "13.0"), NVCC13, cpus=16, memory=_ci(64 * 1024))
    plan = plan_compile(req, "_probe_0", stage, roomy, remedy_flags())
    # the CPUs': 6 .cu x 2 threads, 4 CPUs left for the host units
    assert (plan.spec.jobs, "--threads=2" in plan.spec.nvcc_flags) == (10, True)
    assert plan.log_lines[0].startswith("jobs 10, nvcc threads 2: the CPU budget; 65536 MiB")
    assert plan.spec.peak_log == str(stage / "obj" / PEAK_LOG)
    # 12 GiB: the six .cu units' 2 x 2560 MiB estimates fit two at a time
    tight = Toolchain(CudaToolkit(Path("/cuda"), "13.0"), NVCC13, cpus=16, memory=_ci(12 * 1024))
    plan = plan_compile(req, "_probe_0", stage, tight, remedy_flags())
    assert (plan.spec.jobs, "--threads=2" in plan.spec.nvcc_flags) == (2, True)
    assert plan.log_lines == ()
    assert plan.notes[-1].startswith(
        "jobs 2, nvcc threads 2: limited by memory: 12288 MiB available (cgroup v2 /ci: "
        "memory.max - usage) holds 10240 MiB of units at once (the largest: k/k0.cu, 5120 MiB "
        "estimated); the CPUs allow jobs 10, nvcc threads 2"
    )
    # earlier builds measured the units: 1 GiB a cicc, so the six .cu fit at once (6 x 2 x
    # 1024 MiB = 12288), not a host unit beside them
    peaks = {f"k/k{i}.cu": 1024.0 for i in range(6)} | {"torch-ext/binding.cpp": 900.0}
    plan = plan_compile(req, "_probe_0", stage, tight, remedy_flags(), peaks=peaks)
    assert plan.spec.jobs == 6 and "2048 MiB measured" in plan.notes[-1]


@pytest.mark.parametrize("memory_mib", [None, 100])
def test_a_cpu_plan_keeps_one_job_at_least(tmp_path: Path, memory_mib: int | None) -> None:
    req = build_request(_project(tmp_path / "p", 0), Variant.parse(TORCH213_CPU), jobs=4)
    tools = Toolchain(cpus=4, memory=None if memory_mib is None else _ci(memory_mib))
    plan = plan_compile(req, "_probe_0", req.outputs.work_dir / "s", tools, remedy_flags())
    assert plan.spec.jobs == (4 if memory_mib is None else 1)
    assert os.path.basename(plan.spec.peak_log) == PEAK_LOG
