"""Issue 22, goal 5: how long `kernelwheel --version` takes, beside a bare interpreter start.

Runs each command N times (default 20) after one unmeasured run, and prints a Markdown table of
the median and the fastest wall time, the median CPU time (the child's user + system), and the
median wall time over the bare `python -c pass`: the part kernelwheel adds. Usage:

    .venv/bin/python bench/startup.py [--runs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_S = 0.12


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    script = shutil.which("kernelwheel", path=str(Path(sys.executable).parent)) or "kernelwheel"
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "kernelwheel --version": [script, "--version"],
        "python -m kernelwheel --version": [sys.executable, "-m", "kernelwheel", "--version"],
    }
    rows, bare = [], 0.0
    for name, cmd in commands.items():
        timed(cmd)  # the first run fills the page cache
        runs = [timed(cmd) for _ in range(args.runs)]
        walls = [w for w, _ in runs]
        median = statistics.median(walls)
        bare = median if name == "python -c pass" else bare
        rows.append(
            f"| `{name}` | {median:.3f} | {min(walls):.3f} | "
            f"{statistics.median(c for _, c in runs):.3f} | {median - bare:+.3f} |"
        )
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    lines = [
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {args.runs} runs each, "
        f"load average {load}; goal: `kernelwheel --version` <= {GOAL_S} s",
        "",
        "| command | median wall s | fastest wall s | median CPU s | over `python -c pass` s |",
        "|---|---|---|---|---|",
        *rows,
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
