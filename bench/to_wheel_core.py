"""to-wheel without the download: ``kernelwheel to-wheel CLONE`` against kernels 0.11.3's core.

Both tools run as fresh processes, interleaved (alternating who goes first), pinned to --cpus
CPUs, on the seed's 13-variant repo (docs/to-wheel.md) with every ``.so`` padded to --pad-mib of
incompressible bytes (as the compressed fatbins of real CUDA objects are):

- kernelwheel: ``kernelwheel to-wheel <local git clone> 1.1.2 -o OUT`` (files read from the clone's
  object store and ``.git/lfs/objects``, each verified against its git/LFS id, guard added, every
  binary ABI-checked, written atomically);
- kernels 0.11.3: its own ``kernels to-wheel`` CLI (``kernels.cli.main``) with the one download
  call, ``install_kernel_all_variants``, replaced by the folder of the same variant files, so what
  is timed is its start-up plus ``build_variant_to_wheel`` per variant.

Also timed: ``kernelwheel --version`` against a bare ``python -c pass`` (start-up cost of the CLI).
Prints medians and the ratios measured in the same run:

    python bench/to_wheel_core.py --kernels-python /tmp/k0113/bin/python --runs 11 --cpus 2

The kernels venv needs ``kernels==0.11.3`` and ``wheel``. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))

from support.gitrepo import SEED_13, make_repo, variant_files  # noqa: E402

PACKAGE = "img2gray"
VERSION = "1.1.2"

KERNELS_DRIVER = """\
import sys
from pathlib import Path

import kernels.cli as cli

snapshot = Path(sys.argv[1])
cli.install_kernel_all_variants = lambda repo_id, revision: snapshot  # the download, bypassed
sys.argv = ["kernels", "to-wheel", "seed13/img2gray", "1.1.2"]
cli.main()
"""

# Both tools as installed: bytecode cached (pip writes it at install; a PYTHONDONTWRITEBYTECODE
# development shell would otherwise make every run recompile kernelwheel's editable sources).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_timed(
    cmd: list[str], cwd: Path, cpus: set[int] | None, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """One run pinned to ``cpus``: the process, its wall and CPU (user + sys) seconds."""

    def pin() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=ENV if env is None else env,
        capture_output=True,
        text=True,
        preexec_fn=pin,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return proc, wall, cpu


def timed(cmd: list[str], cwd: Path, cpus: set[int] | None) -> tuple[float, float]:
    """Wall and CPU seconds of one run; fails loudly."""
    proc, wall, cpu = run_timed(cmd, cwd, cpus)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, cpu


def fresh(dir_: Path) -> Path:
    shutil.rmtree(dir_, ignore_errors=True)
    dir_.mkdir(parents=True)
    return dir_


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels-python", default="/tmp/k0113/bin/python")
    parser.add_argument("--kernelwheel", default=str(Path(sys.executable).with_name("kernelwheel")))
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--startup-runs", type=int, default=41)
    parser.add_argument("--pad-mib", type=float, default=4.0)
    parser.add_argument("--cpus", type=int, default=2, help="pin to CPUs 0..N-1 (0: all)")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="also time another kernelwheel: this src/ folder (e.g. `git archive` of an older "
        "commit), run as python -m kernelwheel with it first on PYTHONPATH",
    )
    args = parser.parse_args()
    cpus = set(range(args.cpus)) if args.cpus else None

    root = Path(tempfile.mkdtemp(prefix="bench-core-"))
    try:
        pad = int(args.pad_mib * 1024 * 1024)
        so_cache = root / "so"
        clone = make_repo(root / "clone" / PACKAGE, SEED_13, so_cache=so_cache, pad=pad).root
        snapshot = root / "snapshot"
        for name in SEED_13:
            v = variant_files(name, so_cache=so_cache, pad=pad)
            for inner, data in v.files.items():
                target = snapshot / name / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        driver = root / "kernels_core.py"
        driver.write_text(KERNELS_DRIVER)
        out = root / "out"

        tools = {
            "kernels": [args.kernels_python, str(driver), str(snapshot)],
            "kernelwheel": [args.kernelwheel, "to-wheel", str(clone), VERSION, "-o", str(out)],
        }
        if args.baseline_src:
            tools["kernelwheel (baseline)"] = [
                "env",
                f"PYTHONPATH={args.baseline_src.resolve()}",
                sys.executable,
                "-m",
                "kernelwheel",
                "to-wheel",
                str(clone),
                VERSION,
                "-o",
                str(out),
            ]
        walls: dict[str, list[float]] = {t: [] for t in tools}
        cpu: dict[str, list[float]] = {t: [] for t in tools}
        ratios: list[float] = []
        base_ratios: list[float] = []
        for i in range(args.runs + 1):  # run 0 warms the page cache and is not counted
            order = list(tools) if i % 2 == 0 else list(reversed(tools))
            got: dict[str, float] = {}
            for tool in order:
                w, c = timed(tools[tool], fresh(out), cpus)
                got[tool] = w
                if i:
                    walls[tool].append(w)
                    cpu[tool].append(c)
            if i:
                ratios.append(got["kernels"] / got["kernelwheel"])
                if "kernelwheel (baseline)" in got:
                    base_ratios.append(got["kernelwheel (baseline)"] / got["kernelwheel"])
        wheels = sorted(p.name for p in out.glob("*.whl"))
        assert len(wheels) == len(SEED_13), wheels

        start = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "kernelwheel --version": [args.kernelwheel, "--version"],
        }
        if args.baseline_src:
            start["kernelwheel --version (baseline)"] = [
                "env",
                f"PYTHONPATH={args.baseline_src.resolve()}",
                sys.executable,
                "-m",
                "kernelwheel",
                "--version",
            ]
        swalls: dict[str, list[float]] = {k: [] for k in start}
        for i in range(args.startup_runs + 1):
            for k, cmd in start.items():
                w, _ = timed(cmd, root, cpus)
                if i:
                    swalls[k].append(w)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    med = statistics.median
    print(
        f"{platform.machine()}, {os.cpu_count()} CPUs on the machine, tools pinned to "
        f"{args.cpus or 'all'}; Python {platform.python_version()}; {len(SEED_13)} variants, "
        f".so padded with {args.pad_mib:g} MiB incompressible; {args.runs} interleaved runs"
    )
    print()
    print("| 13-variant repo, no download | wall median (min) | CPU median |")
    print("|---|---|---|")
    for t in tools:
        print(f"| {t} | {med(walls[t]):.3f} s ({min(walls[t]):.3f} s) | {med(cpu[t]):.3f} s |")
    print()
    of_medians = med(walls["kernels"]) / med(walls["kernelwheel"])
    print(
        f"speed-up kernels/kernelwheel: ratio of medians {of_medians:.2f}x, median of per-run "
        f"ratios {med(ratios):.2f}x (min {min(ratios):.2f}x, max {max(ratios):.2f}x); "
        f"CPU ratio {med(cpu['kernels']) / med(cpu['kernelwheel']):.2f}x"
    )
    if base_ratios:
        print(
            f"kernelwheel (baseline)/kernelwheel: median of per-run ratios {med(base_ratios):.2f}x"
        )
    print()
    print(f"| start-up, {args.startup_runs} runs | wall median (min) |")
    print("|---|---|")
    for k, v in swalls.items():
        print(f"| `{k}` | {med(v) * 1000:.0f} ms ({min(v) * 1000:.0f} ms) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
