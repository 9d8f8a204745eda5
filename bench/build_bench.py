"""Build-time benchmark for issue 3: cold vs warm build of one variant, and kernelwheel's
whole build vs a bare compile of the same sources with the same flags.

    python bench/build_bench.py [--variant torch213-cxx11-cpu-x86_64-linux] [--runs 1]

- no cache: the whole build with the compiler cache turned off (KERNELWHEEL_NO_CCACHE=1);
- cold: the compiler cache emptied, the build environment already made (environment creation is
  a one-off download, timed separately by the first build); a miss costs ccache a preprocessor run;
- warm: the same build again, unchanged sources (objects come from ccache);
- bare: the exact compiler and linker commands torch's build wrote for that build (ninja's
  command list + the link line), run with no ccache and no kernelwheel around them.
Overhead = (no cache - bare) / bare, and (cold - bare) / bare. Prints a Markdown table;
--out FILE also writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_build(variant: str, out: Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "kernelwheel", "build", str(REPO / "kernels" / "img2gray"),
         "--variant", variant, "--output-dir", str(out)],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - start


def bare_compile(stage: Path, log: Path, jobs: int) -> float:
    """Re-run the recorded compile commands (ninja) and the link line, without ccache."""
    obj = stage / "obj"
    ninja_file = obj / "build.ninja"
    commands = subprocess.run(
        ["ninja", "-C", str(obj), "-t", "commands"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    link = [line for line in log.read_text().splitlines() if " -shared " in line]
    if not link:
        raise SystemExit(f"no link line in {log}")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if "ccache" not in p
    )
    spec = json.loads((stage / "compile.json").read_text())
    real = {"nvcc": str(Path(spec["cuda_home"]) / "bin" / "nvcc")} if spec.get("cuda_home") else {}
    for o in obj.rglob("*.o"):
        o.unlink()
    start = time.monotonic()
    # The same parallelism ninja had: run the object commands jobs at a time.
    procs: list[subprocess.Popen[bytes]] = []
    for cmd in commands:
        # The build ran the compilers through ccache masquerade links: call the real ones.
        first, _, rest = cmd.partition(" ")
        if Path(first).parent.name == "ccache-bin":
            first = real.get(Path(first).name, Path(first).name)
        cmd = f"{first} {rest}"
        procs.append(subprocess.Popen(cmd, shell=True, cwd=obj, env=env))
        while len([p for p in procs if p.poll() is None]) >= jobs:
            time.sleep(0.05)
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"bare compile failed: {p.args}")
    subprocess.run(shlex.split(link[-1]), check=True, cwd=obj, env=env)
    assert ninja_file.exists()
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="torch213-cxx11-cpu-x86_64-linux")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cache = Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()
    env = dict(os.environ)
    tmp = Path(subprocess.run(["mktemp", "-d"], capture_output=True, text=True).stdout.strip())

    run_build(args.variant, tmp / "prime", env)  # make sure the environment exists
    nocache = run_build(args.variant, tmp / "nocache", dict(env, KERNELWHEEL_NO_CCACHE="1"))
    shutil.rmtree(cache / "ccache", ignore_errors=True)
    cold = run_build(args.variant, tmp / "cold", env)
    warm = run_build(args.variant, tmp / "warm", env)
    stage = cache / "work" / "img2gray" / args.variant
    bare = bare_compile(stage, tmp / "warm" / "logs" / f"{args.variant}.log", os.cpu_count() or 1)
    rows = [
        ("build, compiler cache off", nocache),
        ("cold build (empty compiler cache)", cold),
        ("warm rebuild (unchanged sources)", warm),
        ("bare compile + link, same commands", bare),
    ]
    table = [f"Variant `{args.variant}` on {os.cpu_count()} cores.", "",
             "| what | seconds |", "|---|---|"]
    table += [f"| {name} | {sec:.1f} |" for name, sec in rows]
    table += ["", f"- warm / cold = {warm / cold:.1%} (goal ≤ 10 %)",
              f"- kernelwheel overhead over the bare compile = {(nocache - bare) / bare:+.1%} "
              "without the compiler cache, "
              f"{(cold - bare) / bare:+.1%} with a cold one (goal ≤ 15 %)"]
    text = "\n".join(table)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
