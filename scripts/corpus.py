"""Run kernelwheel over a corpus of kernel projects and print one row per project.

    .venv/bin/python scripts/corpus.py /tmp/kc                        # read + plan only (fast)
    .venv/bin/python scripts/corpus.py /tmp/kc --build 'torch214-cxx11-cpu-*'
    .venv/bin/python scripts/corpus.py /tmp/kc/relu /tmp/kc/rotary --build 'torch214-*-x86_64-*' \\
        --cuda-capabilities 9.0 --version 1.0.0 --markdown docs/corpus.md

Each DIR is a project (it holds build.toml) or a folder of projects (every subfolder holding
one, e.g. a kernels-community checkout). Columns:

    project   the folder name
    read      ok, or the first line of the error reading build.toml
    planned   how many variants `kernelwheel matrix` plans (every backend), and of those how many
              kernelwheel compiles here (CPU, CUDA): "12 (8 here)"
    built     with --build: wheels built / variants asked for
    checked   with --build: wheels that passed `kernelwheel check` / wheels built
    reason    why something was not planned, built or checked (first line)

Reading and planning call kernelwheel's Python API in this process (a project that breaks the
reader, even with a bug, is a row, not a crash). Building runs the CLI, one
`kernelwheel build PROJECT --variant NAME... --json` per project, then `kernelwheel check
--json` on its wheels; wheels and logs go to --output-dir/<project>/. Exit code: 1 when a
requested build or check failed, else 0 (projects that fail to read are the corpus's state,
reported in the table, not a failure of the run).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelwheel.errors import KernelwheelError
from kernelwheel.model.project import load_project
from kernelwheel.plan.planning import plan_project
from kernelwheel.plan.selector import Selector, split_patterns
from kernelwheel.plan.toolchains import backend_problem, missing_toolchain

HEADER = ("project", "read", "planned", "built", "checked", "reason")

# Runs one kernelwheel command line (arguments after `kernelwheel`): (exit code, stdout, stderr).
Runner = Callable[[Sequence[str]], tuple[int, str, str]]


@dataclass(frozen=True)
class Row:
    project: str
    read: str = "ok"
    planned: str = "-"
    built: str = "-"
    checked: str = "-"
    reason: str = ""
    failed: bool = False  # a requested build or check failed

    def cells(self) -> tuple[str, ...]:
        return (self.project, self.read, self.planned, self.built, self.checked, self.reason)


def first_line(text: object) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, KernelwheelError):
        return first_line(exc)
    return f"internal error: {type(exc).__name__}: {first_line(exc)}"


def find_projects(paths: Sequence[Path]) -> list[Path]:
    """Each path that holds build.toml, else its subfolders that do (sorted)."""
    found: list[Path] = []
    for path in paths:
        if (path / "build.toml").is_file():
            found.append(path)
            continue
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a folder"
            raise SystemExit(f"corpus: {path} {what}: pass kernel project folders or their parents")
        subs = sorted(p for p in path.iterdir() if (p / "build.toml").is_file())
        if not subs:
            raise SystemExit(f"corpus: {path} holds no build.toml, nor folders that do")
        found += subs
    return found


def survey(root: Path, patterns: tuple[str, ...] | None) -> tuple[Row, list[str]]:
    """Read and plan ``root``; with ``patterns``, also the planned names they select that
    kernelwheel builds here (the row says why none, if none)."""
    try:
        load_project(root)
    except Exception as exc:  # a bug in the reader is a row too
        where = f"{root / 'build.toml'}: "  # the project column names it already
        return Row(root.name, read=describe_error(exc).removeprefix(where)), []
    try:
        planned = plan_project(root, {"build": ("*",)}, env={})
    except Exception as exc:
        return Row(root.name, reason=f"plan: {describe_error(exc)}"), []
    names = [recipe.name for recipe in planned.full.selected]
    here = [r.name for r in planned.full.selected if missing_toolchain(r.variant) is None]
    row = Row(root.name, planned=f"{len(names)} ({len(here)} here)")
    if not names:
        reasons = [r.reason for r in planned.full.rejected] + list(planned.full.notes)
        return Row(row.project, planned="0", reason=first_line(reasons[0] if reasons else "")), []
    if not here:
        kinds = {r.variant.backend.kind for r in planned.full.selected if r.variant.backend}
        problems = [backend_problem(kind, f"its {kind.value} variants") for kind in sorted(kinds)]
        row = dataclasses.replace(row, reason="none built here: " + "; ".join(map(str, problems)))
    if patterns is None:
        return row, []
    selector = Selector(build=patterns, build_label="--build")
    chosen = [n for n in names if selector.matches(n)]
    buildable = [n for n in chosen if n in here]
    if not buildable:
        why = f"no planned variant matches --build {' '.join(patterns)}"
        recipe = planned.full.get(chosen[0]) if chosen else None
        if recipe is not None:
            why = f"{len(chosen)} selected, none built here: {missing_toolchain(recipe.variant)}"
        return Row(row.project, planned=row.planned, built="0/0", reason=why), []
    return row, buildable


def build(
    row: Row,
    root: Path,
    names: list[str],
    out_dir: Path,
    extra: Sequence[str],
    run: Runner,
) -> Row:
    """Build ``names`` of ``root`` with the CLI, then check the wheels."""
    argv = ["build", str(root), "--json", "--output-dir", str(out_dir)]
    for name in names:
        argv += ["--variant", name]
    argv += extra
    code, out, err = run(argv)
    try:
        wheels = json.loads(out)["wheels"]
    except (ValueError, KeyError, TypeError):
        return dataclasses.replace(
            row, built=f"0/{len(names)}", reason=f"build: {first_line(err)}", failed=True
        )
    paths = [w["path"] for w in wheels if w.get("status") == "built" and w.get("path")]
    failures = [w for w in wheels if w.get("status") != "built"]
    reason = ""
    if failures:
        reason = f"{failures[0]['variant']}: {first_line(failures[0].get('error'))}"
    elif code != 0:
        reason = f"build exited {code}: {first_line(err)}"
    built = f"{len(paths)}/{len(names)}"
    if not paths:
        return dataclasses.replace(row, built=built, reason=reason, failed=True)
    code, out, err = run(["check", "--json", *paths])
    try:
        reports = json.loads(out)["reports"]
        passed = sum(1 for report in reports if report.get("ok"))
    except (ValueError, KeyError, TypeError):
        passed = 0
        reason = reason or f"check: {first_line(err)}"
    if passed < len(paths) and not reason:
        reason = f"check: {len(paths) - passed} wheel(s) with ABI violations"
    failed = bool(failures) or code != 0 or passed < len(paths)
    return dataclasses.replace(
        row, built=built, checked=f"{passed}/{len(paths)}", reason=reason, failed=failed
    )


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """`kernelwheel ARGV` with this interpreter; its progress is copied to our stderr as it
    comes, and kept for the reason column."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelwheel", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    kept: list[str] = []

    def tee(stream: Sequence[str]) -> None:
        for line in stream:
            kept.append(line)
            sys.stderr.write(line)

    copier = threading.Thread(target=tee, args=(proc.stderr,), daemon=True)
    copier.start()
    out = proc.stdout.read()
    code = proc.wait()
    copier.join()
    return code, out, "".join(kept)


def table(rows: Sequence[Row]) -> str:
    cells = [HEADER, *(row.cells() for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(rows: Sequence[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|") or " "

    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(cell(c) for c in row.cells()) + " |" for row in rows]
    return "\n".join(out) + "\n"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Run kernelwheel over kernel projects and tabulate read / plan / build.",
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    p.add_argument(
        "--build",
        metavar="GLOBS",
        help="also build the planned variants these space-separated globs select (only those "
        "kernelwheel compiles here), e.g. 'torch214-cxx11-cpu-*'",
    )
    p.add_argument(
        "--cuda-capabilities",
        metavar="LIST",
        help="passed to kernelwheel build, to keep CUDA builds short, e.g. 9.0",
    )
    p.add_argument(
        "--version",
        help="passed to kernelwheel build: the wheels' version, for projects whose build.toml "
        "gives none (an integer general.version is the API version, not a wheel version)",
    )
    p.add_argument(
        "--output-dir", type=Path, default=Path("corpus-wheelhouse"), help="wheels and logs"
    )
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table here")
    return p


def main(argv: Sequence[str] | None = None, run: Runner = run_cli) -> int:
    args = parser().parse_args(argv)
    patterns = tuple(split_patterns(args.build)) if args.build else None
    extra: list[str] = []
    if args.cuda_capabilities:
        extra += ["--cuda-capabilities", args.cuda_capabilities]
    if args.version:
        extra += ["--version", args.version]
    rows: list[Row] = []
    for root in find_projects(args.dirs):
        row, names = survey(root, patterns)
        if names:
            print(f"corpus: {root.name}: building {len(names)} variant(s)", file=sys.stderr)
            row = build(row, root, names, args.output_dir / root.name, extra, run)
        rows.append(row)
    print(table(rows))
    if args.markdown:
        write_atomic(args.markdown, markdown(rows))
    return 1 if any(row.failed for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
