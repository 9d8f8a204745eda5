"""A matrix of a real kernel, timed: one machine cold and warm, then N shards sharing a redis cache.

    python bench/matrix.py PROJECT --variant V [--variant V ...] [--shards 2 4] [--out FILE]

1. **One machine**: every variant in one ``kernelwheel build`` (variants side by side,
   ``--variant-jobs`` auto), cold (an empty compiler cache, no earlier build's unit costs) with a
   fresh redis-server as its remote cache, then warm (the same command again, sources unchanged).
2. **N machines**: the variants, in ``kernelwheel matrix --json`` order, dealt round-robin into N
   shards (the release workflow's ``include`` list split as N runners would take it). Each shard is
   a "machine" of its own: its own cache folder and its own copy of the project at another path,
   all sharing one fresh redis-server. The shards run one after another, each with the whole of
   this machine, as N machines would each have theirs: the matrix's wall on N machines is the
   slowest shard's, the speed-up is one machine's cold wall over it. Then the same shards again on
   new empty machines with the redis already filled (a rerun of the release): the share of their
   compiles that came from the remote cache.

The build environments (torch, the CUDA toolkit, aarch64 targets, ccache) are a one-off download
that the release workflow caches by digest: every machine links them from the real cache, so the
timings are the compiles, the link, the load check and the repair. Needs ``redis-server`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from build_bench import cpu_seconds  # bench/ is this script's own folder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.redis import redis_server  # noqa: E402  (the tests' real redis-server)

SHARED = ("envs", "targets", "toolkits", "tools", "deps")  # a one-off download, cached by digest
# the compile step's progress line: "✓ VARIANT: compile (12.3s)  ccache 2/3 hit (2 remote)"
CCACHE = re.compile(r": compile \([\d.]+s\)\s+ccache (\d+)/(\d+) hit(?: \((\d+) remote\))?")


@dataclass
class Run:
    """One ``kernelwheel build`` of some variants on one "machine"."""

    wall: float
    cpu: float
    variants: dict[str, float]  # variant -> its own time, as the build reports it
    hits: int
    units: int
    remote: int

    @property
    def efficiency(self) -> float:
        return self.cpu / (self.wall * (os.cpu_count() or 1))


def machine(root: Path, name: str, project: Path, real_cache: Path) -> tuple[Path, Path]:
    """A fresh cache folder (downloads linked in) and a copy of the project at a path of its own."""
    cache = root / name / "cache"
    cache.mkdir(parents=True)
    for sub in SHARED:
        if (real_cache / sub).is_dir():
            (cache / sub).symlink_to(real_cache / sub)
    copy = root / name / "src" / project.name
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("build", "wheelhouse", ".git"))
    return cache, copy


def build(project: Path, cache: Path, out: Path, variants: list[str], remote: str) -> Run:
    cmd = [
        sys.executable,
        "-m",
        "kernelwheel",
        "build",
        str(project),
        "--json",
        "--cache-dir",
        str(cache),
        "--output-dir",
        str(out),
        "--ccache-remote",
        remote,
    ]
    for v in variants:
        cmd += ["--variant", v]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWHEEL_")}
    start, cpu = time.monotonic(), cpu_seconds()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall, used = time.monotonic() - start, cpu_seconds() - cpu
    out.mkdir(parents=True, exist_ok=True)
    (out / "progress.txt").write_text(done.stderr)  # the terminal's lines, kept with the logs
    if done.returncode != 0:
        raise SystemExit(f"build failed (exit {done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    rows = json.loads(done.stdout)["wheels"]
    counts = [[int(n or 0) for n in m] for m in CCACHE.findall(done.stderr)]  # [] when reused
    hits, units, remote_hits = (sum(c[i] for c in counts) for i in range(3))
    times = {row["variant"]: float(row["seconds"]) for row in rows}
    return Run(wall, used, times, hits, units, remote_hits)


def matrix_order(project: Path, variants: list[str]) -> list[str]:
    """The variants in the order of ``kernelwheel matrix --json``'s include list."""
    out = subprocess.run(
        [sys.executable, "-m", "kernelwheel", "matrix", str(project), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    order = [entry["name"] for entry in json.loads(out)["include"]]
    missing = sorted(set(variants) - set(order))
    if missing:
        raise SystemExit(f"not in the matrix of {project}: {', '.join(missing)}")
    return [v for v in order if v in variants]


def row(name: str, run: Run) -> str:
    remote = f" ({run.remote} remote)" if run.remote else ""
    cache = f"{run.hits}/{run.units} hit{remote}" if run.units else "compile skipped (unchanged)"
    return (
        f"| {name} | {len(run.variants)} | {run.wall:.1f} | {run.cpu:.1f} | "
        f"{run.efficiency:.2f} | {cache} | {os.getloadavg()[0]:.2f} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("project", type=Path)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--shards", type=int, nargs="*", default=[2, 4])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not on PATH (Debian: apt-get install redis-server)")
    project = args.project.resolve()
    real_cache = Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()
    variants = matrix_order(project, args.variant)
    cores = os.cpu_count() or 1
    lines = [
        f"`{project.name}`, {len(variants)} variant(s), {cores} CPUs, "
        f"load average before: {os.getloadavg()[0]:.2f}",
        "",
    ]
    head = [
        "| run | variants | wall s | CPU s | efficiency | compiler cache | load after |",
        "|---|---|---|---|---|---|---|",
    ]
    root = Path(tempfile.mkdtemp(prefix="kw-matrix-"))
    try:
        cache, copy = machine(root, "one", project, real_cache)
        with redis_server(root / "redis-one") as remote:
            cold = build(copy, cache, root / "one" / "cold", variants, remote)
            warm = build(copy, cache, root / "one" / "warm", variants, remote)
        lines += [
            "### One machine",
            "",
            *head,
            row("cold", cold),
            row("warm", warm),
            "",
            "| variant | cold s | warm s |",
            "|---|---|---|",
        ]
        lines += [f"| {v} | {cold.variants[v]:.1f} | {warm.variants[v]:.1f} |" for v in variants]
        print("\n".join(lines), flush=True)
        for n in args.shards:
            shards = [variants[i::n] for i in range(n) if variants[i::n]]
            table = [f"### {n} machines", "", *head]
            with redis_server(root / f"redis-{n}") as remote:
                for again in (False, True):
                    runs = []
                    for i, part in enumerate(shards):
                        name = f"n{n}-{'rerun' if again else 'cold'}-{i}"
                        cache, copy = machine(root, name, project, real_cache)
                        runs.append(build(copy, cache, root / name / "out", part, remote))
                        label = f"{'rerun, ' if again else ''}machine {i + 1}: {', '.join(part)}"
                        table.append(row(label, runs[-1]))
                    slowest = max(r.wall for r in runs)
                    units = sum(r.units for r in runs)
                    share = sum(r.remote for r in runs) / units if units else 0.0
                    kind = "rerun on new machines, redis filled" if again else "cold"
                    table.append(
                        f"| **{kind}: wall on {n} machines** | {len(variants)} | "
                        f"{slowest:.1f} | {sum(r.cpu for r in runs):.1f} | "
                        f"speed-up {cold.wall / slowest:.2f} | remote share "
                        f"{share:.0%} | |"
                    )
            lines += ["", *table]
            print("\n".join(["", *table]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines += ["", f"load average after: {os.getloadavg()[0]:.2f}"]
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
