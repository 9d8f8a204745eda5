"""The author's loop, measured (issue 37): a one-line edit of one kernel source, then
`kernelwheel test` (or `dev`) until the op is loaded and tested, against a release rebuild of
the same edit and against that source's own compile.

    python bench/dev_loop.py --project DIR --edit csrc/k.cpp --variant V --python PY \\
        [--mode test|dev] [--pairs 3] [--release] [--out FILE.md]

Runs, in a copy of DIR (the original is never touched):
1. `kernelwheel dev` once, cold or warm (not counted);
2. with ``--release``, `kernelwheel build --variant V` once (not counted: its environment and
   caches warm);
3. ``--pairs`` times: a new line ``static_assert(N >= 0, "edit N <nonce>");`` appended to the edited
   source (a real change of its text: no compiler cache can serve it), then `kernelwheel MODE`
   timed (A); with ``--release``, a second new line and `kernelwheel build` timed (B);
4. the unchanged project: `kernelwheel dev` timed three times (U);
5. the reference: the edited source's compile command from the dev build's build.ninja, run
   alone without ccache (C, the better of two runs).

Printed (and written to ``--out``): each pair's times, the medians, A/B and A against 1.5 C + 3 s
(the issue's goals: A <= 0.6 B on the CPU; A <= 1.2 C for a CUDA unit; U <= 2 s).
``--python`` is the interpreter the dev build is linked into (VIRTUAL_ENV): it needs the
variant's torch, and pytest for ``--mode test``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kernelwheel(*args: str, env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    """Run ``kernelwheel ARGS``; (wall seconds, exit code, output)."""
    cmd = [sys.executable, "-m", "kernelwheel.cli", *args]
    if Path(sys.executable).with_name("kernelwheel").exists():
        cmd = [str(Path(sys.executable).with_name("kernelwheel")), *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc.returncode, proc.stdout + proc.stderr


# Each run's edits are new text: no compiler cache can hold them from an earlier run.
NONCE = os.urandom(6).hex()


def append_line(path: Path, n: int) -> None:
    with open(path, "a") as fh:
        fh.write(f'static_assert({n} >= 0, "edit {n} {NONCE}");\n')


def ninja_command(stage: Path, source: str) -> str:
    """The edited source's compile command, from the dev build's build.ninja (ninja -t)."""
    obj_dir = stage / "obj"
    ninja = shutil.which("ninja") or str(Path(sys.executable).with_name("ninja"))
    targets = subprocess.run(
        [ninja, "-C", str(obj_dir), "-t", "targets", "all"], capture_output=True, text=True
    ).stdout
    stem = Path(source).stem
    target = next(
        t.split(":")[0] for t in targets.splitlines() if t.split(":")[0].endswith(f"/{stem}.o")
    )
    out = subprocess.run(
        [ninja, "-C", str(obj_dir), "-t", "commands", "-s", target],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def reference(stage: Path, source: str) -> float:
    """The source's compile alone, without ccache: the better of two runs."""
    cmd = ninja_command(stage, source)
    # ccache wraps the compiler through a masquerade folder on PATH or a prefix: run the bare one
    cmd = re.sub(r"^\S*ccache\s+", "", cmd)
    env = dict(os.environ, CCACHE_DISABLE="1")
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        subprocess.run(
            shlex.split(cmd), cwd=stage / "obj", env=env, check=True, capture_output=True
        )
        best = min(best, time.perf_counter() - start)
    return best


def dev_stage(output: str, variant: str) -> Path:
    """The dev build's work folder, from `kernelwheel dev`'s "dev build of …: <site>/<pkg>"."""
    match = re.search(r"dev build of \S+ \(\S+\): (\S+)", output)
    if match is None:
        raise SystemExit(f"no dev build line in:\n{output}")
    return Path(match.group(1)).parents[1] / variant


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, required=True)
    ap.add_argument("--edit", required=True, help="the source to edit, relative to the project")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--python", required=True, help="the venv interpreter the build is linked to")
    ap.add_argument("--mode", choices=("test", "dev"), default="test")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--release", action="store_true", help="also time the release rebuild")
    ap.add_argument("--extra", default="", help="more kernelwheel flags, e.g. --cuda-home DIR")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kw-dev-loop-"))
    project = work / args.project.name
    shutil.copytree(args.project, project, symlinks=True)
    source = project / args.edit
    venv = Path(args.python).parents[1]
    env = dict(os.environ, VIRTUAL_ENV=str(venv))
    flags = ["--variant", args.variant, *shlex.split(args.extra)]
    lines = [f"# dev loop: {args.project.name}, {args.variant}, edit {args.edit}", ""]
    lines.append(f"load before: {os.getloadavg()[0]:.2f}")

    seconds, code, out = kernelwheel("dev", str(project), *flags, env=env, cwd=work)
    lines.append(f"first dev build (not counted): {seconds:.1f} s, exit {code}")
    if code != 0:
        print(out)
        return 1
    stage = dev_stage(out, args.variant)
    if args.release:
        seconds, code, out = kernelwheel(
            "build", str(project), *flags, "-o", str(work / "wh"), env=env, cwd=work
        )
        lines.append(f"first release build (not counted): {seconds:.1f} s, exit {code}")
        if code != 0:
            print(out)
            return 1

    a_times: list[float] = []
    b_times: list[float] = []
    rows = ["| pair | A: edit → `kernelwheel " + args.mode + "` | B: edit → release build |"]
    rows.append("|---|---|---|")
    for pair in range(args.pairs):
        append_line(source, 2 * pair)
        a, code, out = kernelwheel(args.mode, str(project), *flags, env=env, cwd=work)
        if code != 0 or (args.mode == "test" and not re.search(r"\d+ passed", out)):
            print(out)
            return 1
        a_times.append(a)
        b = float("nan")
        if args.release:
            append_line(source, 2 * pair + 1)
            b, code, out = kernelwheel(
                "build", str(project), *flags, "-o", str(work / "wh"), env=env, cwd=work
            )
            if code != 0:
                print(out)
                return 1
            b_times.append(b)
        rows.append(f"| {pair + 1} | {a:.1f} s | {b:.1f} s |")
    # the unchanged project, after a dev build of the last state
    kernelwheel("dev", str(project), *flags, env=env, cwd=work)
    u_times = [kernelwheel("dev", str(project), *flags, env=env, cwd=work)[0] for _ in range(3)]
    c = reference(stage, str(source))

    a_med = statistics.median(a_times)
    lines += ["", *rows, ""]
    lines.append(f"A median: {a_med:.1f} s ({args.mode}: compile the unit, link, load check"
                 + (", pytest" if args.mode == "test" else "") + ")")
    if b_times:
        b_med = statistics.median(b_times)
        lines.append(f"B median: {b_med:.1f} s (release: build id, binding, wheel, repair)")
        lines.append(f"A / B = {a_med / b_med:.2f} (goal <= 0.6 on the CPU)")
    lines.append(f"C (the edited source's own compile, no ccache): {c:.1f} s")
    lines.append(f"A / C = {a_med / c:.2f}; A - (1.5 C + 3 s) = {a_med - (1.5 * c + 3):+.1f} s")
    lines.append(f"U (unchanged, `kernelwheel dev`): {', '.join(f'{u:.2f}' for u in u_times)} s")
    lines.append(f"load after: {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
