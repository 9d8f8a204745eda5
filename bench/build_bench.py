"""Build-time benchmark: cold vs warm build of one variant, and kernelwheel's whole build vs a
bare compile of the same sources with the same flags. Prints the ratios.

    python bench/build_bench.py [--variant torch213-cxx11-cpu-x86_64-linux] [--runs 3]

Each run uses fresh cache folders of its own (the build environments, a one-off download, are
linked in from the real cache), so nothing of an earlier build is left and the shared cache is
never touched:

- no cache: the whole build with the compiler cache turned off (KERNELWHEEL_NO_CCACHE=1: no
  ccache, no reuse of an earlier build);
- bare: the exact compiler and linker commands torch's build wrote for that build (ninja's
  command list + the link line), run with no ccache and no kernelwheel around them, as many at a
  time as kernelwheel's build ran;
- cold: the first build in an empty cache folder (empty ccache: every object a miss);
- warm: the same build again, sources unchanged.

Overhead = (no cache - bare) / bare and (cold - bare) / bare; warm / cold. Medians over --runs,
and the ratios of each run. --out FILE also writes the table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """user + sys of every child process waited for so far (compilers included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_build(variant: str, cache: Path, out: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole ``kernelwheel build``."""
    start, cpu = time.monotonic(), cpu_seconds()
    subprocess.run(
        [sys.executable, "-m", "kernelwheel", "build", str(REPO / "kernels" / "img2gray"),
         "--only", variant, "--cache-dir", str(cache), "--output-dir", str(out)],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - start, cpu_seconds() - cpu


def fresh_cache(root: Path, name: str, envs: Path) -> Path:
    cache = root / name
    cache.mkdir(parents=True)
    (cache / "envs").symlink_to(envs)
    return cache


def bare_compile(stage: Path, log: Path, jobs: int) -> tuple[float, float]:
    """Re-run the recorded compile commands (ninja) and the link line, without ccache."""
    obj = stage / "obj"
    commands = subprocess.run(
        ["ninja", "-C", str(obj), "-t", "commands"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    link = [line for line in log.read_text().splitlines() if " -shared " in line]
    if not link:
        raise SystemExit(f"no link line in {log}")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "ccache" not in p)
    spec = json.loads((stage / "compile.json").read_text())
    real = {"nvcc": str(Path(spec["cuda_home"]) / "bin" / "nvcc")} if spec.get("cuda_home") else {}
    for o in obj.rglob("*.o"):
        o.unlink()
    start, cpu = time.monotonic(), cpu_seconds()
    procs: list[subprocess.Popen[bytes]] = []
    for cmd in commands:
        first, _, rest = cmd.partition(" ")
        if Path(first).parent.name == "ccache-bin":  # a masquerade link: call the real compiler
            first = real.get(Path(first).name, Path(first).name)
        procs.append(subprocess.Popen(f"{first} {rest}", shell=True, cwd=obj, env=env))
        while len([p for p in procs if p.poll() is None]) >= jobs:
            time.sleep(0.02)
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"bare compile failed: {p.args}")
    subprocess.run(shlex.split(link[-1]), check=True, cwd=obj, env=env)
    return time.monotonic() - start, cpu_seconds() - cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="torch213-cxx11-cpu-x86_64-linux")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    real_cache = Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELWHEEL_CACHE_DIR",
                                                            "KERNELWHEEL_NO_CCACHE")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # kernelwheel as installed: bytecode cached
    root = Path(tempfile.mkdtemp(prefix="kw-build-bench-"))
    keys = ("nocache", "bare", "cold", "warm")
    rows: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}

    def record(key: str, times: tuple[float, float]) -> None:
        rows[key].append(times[0])
        cpu[key].append(times[1])

    try:
        # the environment exists (made once, outside the timings), the bytecode is compiled
        run_build(args.variant, fresh_cache(root, "prime", real_cache / "envs"), root / "o0", env)
        for i in range(args.runs):
            cache = fresh_cache(root, f"nocache{i}", real_cache / "envs")
            out = root / f"nocache{i}-out"
            record("nocache", run_build(args.variant, cache, out,
                                        dict(env, KERNELWHEEL_NO_CCACHE="1")))
            stage = cache / "work" / "img2gray" / args.variant
            record("bare", bare_compile(stage, out / "logs" / f"{args.variant}.log",
                                        os.cpu_count() or 1))
            cache = fresh_cache(root, f"cold{i}", real_cache / "envs")
            record("cold", run_build(args.variant, cache, root / f"cold{i}-out", env))
            record("warm", run_build(args.variant, cache, root / f"warm{i}-out", env))
            print(f"run {i + 1}: " + ", ".join(f"{k} {rows[k][-1]:.2f} s (CPU {cpu[k][-1]:.2f} s)"
                                               for k in keys), file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    per_run = {
        "warm / cold": [w / c for w, c in zip(rows["warm"], rows["cold"], strict=True)],
        "no cache / bare": [n / b for n, b in zip(rows["nocache"], rows["bare"], strict=True)],
        "cold / bare": [c / b for c, b in zip(rows["cold"], rows["bare"], strict=True)],
    }
    cpu_ratio = {
        "warm / cold": mcpu["warm"] / mcpu["cold"],
        "no cache / bare": mcpu["nocache"] / mcpu["bare"],
        "cold / bare": mcpu["cold"] / mcpu["bare"],
    }
    table = [f"Variant `{args.variant}`, {os.cpu_count()} CPUs, {args.runs} run(s), medians.", "",
             "| what | wall s (median) | each run | CPU s (median) |", "|---|---|---|---|"]
    for key, label in (("nocache", "build, compiler cache off"),
                       ("cold", "cold build (empty caches)"),
                       ("warm", "warm rebuild (unchanged sources)"),
                       ("bare", "bare compile + link, same commands")):
        table.append(f"| {label} | {med[key]:.2f} | {', '.join(f'{v:.2f}' for v in rows[key])} "
                     f"| {mcpu[key]:.2f} |")
    table += ["", "| ratio | wall, of the medians | wall, each run | CPU, of the medians | goal |",
              "|---|---|---|---|---|"]
    goals = {"warm / cold": "≤ 0.10", "no cache / bare": "≤ 1.15", "cold / bare": "≤ 1.15"}
    of_medians = {"warm / cold": med["warm"] / med["cold"],
                  "no cache / bare": med["nocache"] / med["bare"],
                  "cold / bare": med["cold"] / med["bare"]}
    for key, values in per_run.items():
        table.append(f"| {key} | {of_medians[key]:.3f} | {', '.join(f'{v:.3f}' for v in values)} "
                     f"| {cpu_ratio[key]:.3f} | {goals[key]} |")
    text = "\n".join(table)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
