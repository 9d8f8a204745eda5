"""Side by side: ``kernelwheel to-wheel`` against ``kernels==0.11.3``'s ``kernels to-wheel``.

Both CLIs run as fresh processes against the same loopback Hub (tests/support/hubserver.py:
the endpoints huggingface_hub calls, answered from git repos built by tests/support/gitrepo.py
with real ELF objects), each run with an empty Hugging Face cache, so the timings include the
download. Recorded per repo: which wheels each tool writes, how they differ (name, METADATA
Version, Requires-Dist, tag), whether each tool's wheels pass the checks pip applies, and the wall
time of each run (median of --runs).

Repos: the seed's 13 variants (docs/to-wheel.md), with each .so padded to --pad-mib of
incompressible data so the sizes are realistic, and one repo per known defect case (torch210,
cpu, rocm, torch-cuda, darwin), since kernels aborts the whole run at the first variant it cannot
map.

    python bench/compare_kernels_to_wheel.py --kernels /work/venvs/kernels0113/bin/kernels \\
        --kernelwheel /work/venvs/dev/bin/kernelwheel --runs 5 --markdown out.md

The kernels venv needs ``kernels==0.11.3`` and ``wheel`` (its to-wheel imports wheel.wheelfile).
Timings are of this machine; this script is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from email.parser import Parser
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))

from packaging.utils import InvalidWheelFilename, parse_wheel_filename  # noqa: E402
from support.gitrepo import DEFECT_CASES, SEED_13, make_repo  # noqa: E402
from support.hubserver import GitBackedRepo, HubState, serve  # noqa: E402
from to_wheel_core import run_timed  # noqa: E402  (this folder: the same timing for both)

PACKAGE = "img2gray"
VERSION = "1.1.2"


@dataclass
class WheelFacts:
    name: str
    version: str  # METADATA Version
    requires: list[str]
    tag: str
    consistent: bool  # METADATA Version == file name version (pip refuses otherwise)
    has_abi_guard: bool


@dataclass
class Run:
    tool: str
    repo: str
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)  # user + sys of the process tree
    exit_code: int = 0
    wheels: list[WheelFacts] = field(default_factory=list)
    error: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_seconds) if self.cpu_seconds else float("nan")


def facts(path: Path) -> WheelFacts:
    with zipfile.ZipFile(path) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        wheel_name = meta_name.replace("METADATA", "WHEEL")
        meta = Parser().parsestr(zf.read(meta_name).decode())
        tag = Parser().parsestr(zf.read(wheel_name).decode()).get("Tag", "")
        guard = any(n.endswith("/_kernelwheel_guard.py") for n in zf.namelist())
    try:
        _, file_version, _, _ = parse_wheel_filename(path.name)
        consistent = str(file_version) == meta["Version"]
    except InvalidWheelFilename:
        consistent = False
    return WheelFacts(
        name=path.name,
        version=meta["Version"],
        requires=meta.get_all("Requires-Dist") or [],
        tag=tag,
        consistent=consistent,
        has_abi_guard=guard,
    )


def run_once(result: Run, exe: str, env: dict[str, str], cpus: set[int] | None, keep: bool) -> None:
    """One run of one tool with an empty cache and output folder; records wall and CPU time."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-{result.tool}-"))
    out = work / "out"
    out.mkdir()
    run_env = {**env, "HF_HUB_CACHE": str(work / "hf"), "HF_HOME": str(work / "hfhome")}
    cmd = [exe, "to-wheel", result.repo, VERSION]
    if result.tool == "kernelwheel":
        cmd += ["--output-dir", str(out)]  # kernels writes into its working directory

    proc, elapsed, cpu = run_timed(cmd, out, cpus, env=run_env)
    result.seconds.append(elapsed)
    result.cpu_seconds.append(cpu)
    if keep:
        result.exit_code = proc.returncode
        result.wheels = [facts(p) for p in sorted(out.glob("*.whl"))]
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in lines if "Error" in ln or "error" in ln] or lines
            result.error = errors[-1].strip()[:200] if errors else ""
    shutil.rmtree(work, ignore_errors=True)


# One repo per defect case of docs/to-wheel.md's comparison (org names only tell them apart).
DEFECT_ORGS = {
    "torch210-cxx11-cu130-x86_64-linux": "case-torch210",
    "torch27-cxx11-cpu-x86_64-linux": "case-cpu",
    "torch27-cxx11-rocm63-x86_64-linux": "case-rocm",
    "torch-cuda": "case-noarch-cuda",
    "torch28-metal-aarch64-darwin": "case-darwin",
}


def build_repos(root: Path, pad: int) -> dict[str, Path]:
    so_cache = root / "so"
    seed = make_repo(root / "seed" / PACKAGE, SEED_13, so_cache=so_cache, pad=pad)
    repos = {f"seed13/{PACKAGE}": seed.root}
    assert set(DEFECT_ORGS) == set(DEFECT_CASES)
    for variant, org in DEFECT_ORGS.items():
        repos[f"{org}/{PACKAGE}"] = make_repo(
            root / org / PACKAGE, [variant], so_cache=so_cache
        ).root
    return repos


def markdown(runs: list[Run], meta: dict[str, str]) -> str:
    by = {(r.tool, r.repo): r for r in runs}
    repos = list(dict.fromkeys(r.repo for r in runs))
    lines = [
        f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']}); medians of "
        f"{meta['runs']} interleaved runs for the 13-variant repo (3 per defect case); cold "
        f"Hugging Face cache per run; loopback Hub; each .so of the 13-variant repo padded with "
        f"{meta['pad_mib']} MiB of incompressible bytes.",
        "",
        "| repo | kernels 0.11.3: wall (CPU) | kernelwheel: wall (CPU) | wall speed-up |",
        "|---|---|---|---|",
    ]
    for repo in repos:
        k, w = by[("kernels", repo)], by[("kernelwheel", repo)]
        speed = k.median / w.median if w.median else float("nan")
        lines.append(
            f"| `{repo}` | {k.median:.2f} s ({k.cpu:.2f} s), exit {k.exit_code}, "
            f"{len(k.wheels)} wheel(s) | {w.median:.2f} s ({w.cpu:.2f} s), exit {w.exit_code}, "
            f"{len(w.wheels)} wheel(s) | {speed:.2f}x |"
        )
    lines += ["", "| repo | tool | wheel | METADATA Version | Requires-Dist | pip-consistent |"]
    lines.append("|---|---|---|---|---|---|")
    for repo in repos:
        for tool in ("kernels", "kernelwheel"):
            r = by[(tool, repo)]
            if not r.wheels:
                lines.append(f"| `{repo}` | {tool} | — ({r.error or 'no wheel'}) | | | |")
            for w in r.wheels:
                lines.append(
                    f"| `{repo}` | {tool} | `{w.name}` | `{w.version}` | "
                    f"`{', '.join(w.requires)}` | {'yes' if w.consistent else 'no'} |"
                )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="/work/venvs/kernels0113/bin/kernels")
    parser.add_argument("--kernelwheel", default=str(Path(sys.executable).with_name("kernelwheel")))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pad-mib", type=float, default=4.0)
    parser.add_argument(
        "--cpus", type=int, default=0, help="pin both tools to CPUs 0..N-1 (default: all)"
    )
    parser.add_argument("--markdown", type=Path, help="write the tables here")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-repos-"))
    try:
        repos = build_repos(root, int(args.pad_mib * 1024 * 1024))
        # kernels 0.11.3 reads model-type repos, kernelwheel kernel-type ones: serve both.
        state = HubState(
            repos={rid: GitBackedRepo(path) for rid, path in repos.items()},
            types=dict.fromkeys(repos, "kernel+model"),
        )
        runs: list[Run] = []
        cpus = set(range(args.cpus)) if args.cpus else None
        tools = {"kernels": args.kernels, "kernelwheel": args.kernelwheel}
        with serve(state) as url:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELS_"))}
            env["HF_ENDPOINT"] = url
            env["HF_HUB_DISABLE_TELEMETRY"] = "1"
            for repo_id in repos:
                results = {tool: Run(tool, repo_id) for tool in tools}
                n = args.runs if repo_id.startswith("seed13/") else min(3, args.runs)
                for i in range(n):
                    order = list(tools) if i % 2 == 0 else list(reversed(tools))
                    for tool in order:  # interleaved, alternating who goes first
                        run_once(results[tool], tools[tool], env, cpus, keep=i == n - 1)
                for r in results.values():
                    runs.append(r)
                    print(
                        f"{r.tool:12} {repo_id:28} median {r.median:6.2f}s (CPU {r.cpu:5.2f}s) "
                        f"over {len(r.seconds)} run(s), exit {r.exit_code}, {len(r.wheels)} "
                        f"wheel(s) {r.error}",
                        file=sys.stderr,
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "runs": str(args.runs),
        "cpus": f"tools pinned to {args.cpus} CPU(s)" if args.cpus else "tools on all CPUs",
        "pad_mib": f"{args.pad_mib:g}",
    }
    text = markdown(runs, meta)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
