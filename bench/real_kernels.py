"""Build real kernel projects (kernels-community, fetched, not committed) with kernelwheel and run
their own tests, unmodified, through the real `kernels` package (LOCAL_KERNELS pointing at
kernelwheel's --hub-layout output).

    python bench/real_kernels.py --corpus DIR --kernel relu --kernel activation \
        --variant torch211-cxx11-cu130-x86_64-linux --python "$(command -v python3)" \
        --tests-python /tmp/kwv/bin/python --out OUT [--cuda-capabilities 9.0]

Writes OUT/real_kernels.log (every command and its output) and OUT/summary.md (one row per
kernel: build, wheel, tests). The GPU driver is `bash bench/gpu.sh real-kernels`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

LOG: list[str] = []


def log(text: str) -> None:
    print(text, flush=True)
    LOG.append(text)


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: int = 1800) -> tuple[int, str, float]:
    log("$ " + " ".join(cmd))
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=timeout, check=False)
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out, code = f"timed out after {timeout} s: {exc.stdout or ''}", 124
    elapsed = time.monotonic() - start
    log(out.rstrip()[-6000:])
    log(f"-> exit {code} in {elapsed:.1f}s")
    return code, out, elapsed


def repo_id(project: Path) -> str:
    data = tomllib.loads((project / "build.toml").read_text())
    hub = data.get("general", {}).get("hub", {})
    return str(hub.get("repo-id") or f"kernels-community/{project.name}")


def summary_line(out: str) -> str:
    found = re.findall(r"=+ (.*(?:passed|failed|error|skipped|deselected).*) =+", out)
    if found:
        return found[-1]
    lines = [line for line in out.splitlines() if re.search(r"passed|failed|error", line)]
    return lines[-1].strip() if lines else "no pytest summary"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--kernel", action="append", required=True,
                    help="a project folder name in --corpus; NAME=VARIANT builds that variant")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--python", required=True, help="the build interpreter (its torch)")
    ap.add_argument("--tests-python", required=True, help="interpreter with kernels + pytest")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cuda-capabilities")
    ap.add_argument("--extra", action="append", default=[], help="more build flags")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for entry in args.kernel:
        name, _, variant = entry.partition("=")
        project = args.corpus / name
        wheels, hub = args.out / "wheels" / name, args.out / "hub" / name
        cmd = [sys.executable, "-m", "kernelwheel", "build", str(project), "--variant",
               variant or args.variant, "--python", args.python, "-o", str(wheels), "--hub-layout", str(hub)]
        if args.cuda_capabilities:
            cmd += ["--cuda-capabilities", args.cuda_capabilities]
        code, out, took = run(cmd + args.extra)
        wheel = next((p.name for p in wheels.glob("*.whl")), "-")
        built = "built" if code == 0 else f"failed (exit {code})"
        for build_log in wheels.glob("logs/*.log") if code else ():
            log(f"--- tail of {build_log.name}\n" + build_log.read_text()[-8000:])
        tests = "not run"
        if code == 0 and wheel != "-":
            # Some projects' tests import the package itself rather than through kernels.
            run([args.tests_python, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                 "--force-reinstall", str(wheels / wheel)])
        if code == 0 and (project / "tests").is_dir():
            env = dict(os.environ, LOCAL_KERNELS=f"{repo_id(project)}={hub}", HF_HUB_OFFLINE="1")
            tcode, tout, ttook = run(
                # -c /dev/null: the project's own tests, without kernelwheel's strict pytest config
                # (pytest would otherwise find this repository's pyproject.toml above them).
                [args.tests_python, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider",
                 "-c", "/dev/null", "--rootdir", "."],
                env=env, cwd=project,
            )
            tests = f"exit {tcode}: {summary_line(tout)} ({ttook:.0f}s)"
        rows.append((name, f"{built} in {took:.0f}s", wheel, tests))
    table = ["| kernel | build | wheel | its own tests |", "| --- | --- | --- | --- |"]
    table += [f"| {' | '.join(row)} |" for row in rows]
    (args.out / "summary.md").write_text("\n".join(table) + "\n")
    (args.out / "real_kernels.log").write_text("\n".join(LOG) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
