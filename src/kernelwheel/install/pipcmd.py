"""The pip command that installs the chosen builds as direct references with their hashes, with
``torch==<installed>`` so a dependency needing another torch fails instead of replacing it; a forced
run gets ``--no-deps`` and no torch pin (docs/install.md, "Selection", step 6)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .._util import RUNNER, Runner
from ..errors import InstallError
from ..model.sources import PipSources
from .probe import Target
from .sources import Candidate


def pinned_requirement(project: str, candidate: Candidate, sha256: str | None) -> str:
    url = Path(candidate.location).as_uri() if candidate.is_local else candidate.location
    return f"{project} @ {url}" + (f"#sha256={sha256}" if sha256 else "")


def pip_command(
    target: Target, pins: Sequence[str], sources: PipSources, *, force: bool = False
) -> list[str]:
    # The target's own pip if it has one; else this pip, pointed at the target (pip >= 22.3).
    if target.has_pip:
        cmd = [str(target.python), "-m", "pip", "install"]
    else:
        cmd = [sys.executable, "-m", "pip", "--python", str(target.python), "install"]
    cmd.append("--disable-pip-version-check")
    if force:
        cmd += ["--force-reinstall", "--no-deps"]
    # the find-links absolute, so the printed command runs from anywhere
    links = tuple(ln if "://" in ln else str(Path(ln).resolve()) for ln in sources.find_links)
    cmd += replace(sources, find_links=links).pip_args()
    if force or target.torch_dist is None:  # no torch: none to keep (tvm-ffi builds only)
        return [*cmd, *pins]
    return [*cmd, *pins, f"torch=={target.torch_dist}"]


def run_pip(cmd: Sequence[str], runner: Runner = RUNNER) -> None:
    proc = runner.captured(cmd)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise InstallError(
            f"pip failed (exit {proc.returncode}); torch and the environment are as pip left "
            f"them:\n{tail}",
            hint="read pip's message above; --dry-run prints the command to run it yourself",
        )
