"""Issue 40: scripts/test.sh, the README's and CI's one test command, runs the suite in tiers:
the fast tier first and in parallel (a unit failure is reported before any build), then the slow
tier in parallel, then the integration tier two tests at a time; every tier ends with its
slowest tests. The script is run for real here, in a copy of the repository whose .venv holds
stand-ins that record their arguments and answer with the exit status a test asks for."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIERS = ("fast", "slow", "integration")
STAND_IN = """#!/bin/sh
for arg in "$@"; do printf '%s\\037' "$arg"; done >> "$CALLS"
echo >> "$CALLS"
case "$*" in
  *"-m pytest -m not integration and not slow "*) exit "${RC_FAST:-0}" ;;
  *"-m pytest -m slow and not integration "*) exit "${RC_SLOW:-0}" ;;
  *"-m pytest -m integration "*) exit "${RC_INTEGRATION:-0}" ;;
esac
"""


@dataclass
class Run:
    code: int
    err: str
    pytest: list[list[str]]  # each pytest command's arguments after `-m pytest`


RunScript = Callable[..., Run]


@pytest.fixture
def run_script(tmp_path: Path) -> RunScript:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "test.sh", root / "scripts" / "test.sh")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("python", "ruff", "mypy", "actionlint"):
        (bin_dir / tool).write_text(STAND_IN)
        (bin_dir / tool).chmod(0o755)
    calls = tmp_path / "calls"

    def run(*args: str, **rc: str) -> Run:
        calls.write_text("")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWHEEL_")}
        env.pop("TEST_TIERS", None)
        env.update(HOME=str(tmp_path), CALLS=str(calls), **rc)
        proc = subprocess.run(
            ["bash", str(root / "scripts" / "test.sh"), *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        argvs = [line.split("\037")[:-1] for line in calls.read_text().splitlines()]
        runs = [argv[2:] for argv in argvs if argv[:2] == ["-m", "pytest"]]
        return Run(proc.returncode, proc.stderr, runs)

    return run


def marks(args: list[str]) -> str:
    return args[args.index("-m") + 1]


def test_the_tiers_run_in_order_fast_ones_in_parallel_each_with_its_durations(
    run_script: RunScript,
) -> None:
    run = run_script("-k", "img2gray and cpu", "-x")
    assert run.code == 0, run.err
    assert [a[a.index("-n") + 1] for a in run.pytest] == ["auto", "auto", "2"]
    assert [a[a.index("--dist") + 1] for a in run.pytest] == ["load", "load", "loadfile"]
    for args in run.pytest:
        assert "--durations=25" in args
        assert args[-3:] == ["-k", "img2gray and cpu", "-x"]  # "$@", each word kept whole
    # Every combination of the two markers is run by exactly one tier: the three tiers are the
    # whole suite (plain `pytest` leaves the integration tier out; the script does not).
    expressions = [marks(a) for a in run.pytest]
    for integration, slow in product((False, True), repeat=2):
        where = {"integration": integration, "slow": slow}
        chosen = [TIERS[i] for i, e in enumerate(expressions) if eval(e, {}, where)]
        assert chosen == ["integration" if integration else "slow" if slow else "fast"]


def test_a_failing_fast_tier_stops_the_run_before_the_long_tiers(
    run_script: RunScript,
) -> None:
    run = run_script(RC_FAST="1")
    assert run.code == 1 and len(run.pytest) == 1
    assert "fast tier failed (exit 1)" in run.err
    run = run_script(RC_SLOW="3")
    assert run.code == 3 and len(run.pytest) == 2


def test_a_tier_the_arguments_leave_empty_is_passed_over(
    run_script: RunScript,
) -> None:
    """pytest's exit status 5 (no test selected): a -k naming one integration test leaves the
    fast and slow tiers empty, and the run goes on; when every tier is empty, it fails."""
    run = run_script("-k", "one_build", RC_FAST="5", RC_SLOW="5")
    assert run.code == 0 and len(run.pytest) == 3, run.err
    run = run_script("-k", "nothing", RC_FAST="5", RC_SLOW="5", RC_INTEGRATION="5")
    assert run.code == 5 and "no test selected in any tier" in run.err


def test_test_tiers_picks_the_tiers(run_script: RunScript) -> None:
    run = run_script(TEST_TIERS="fast slow")
    assert run.code == 0 and [marks(a) for a in run.pytest] == [
        "not integration and not slow",
        "slow and not integration",
    ]
    run = run_script(TEST_TIERS="unit")
    assert run.code == 2 and "no tier 'unit'" in run.err and run.pytest == []


@pytest.mark.parametrize("args", [["-m", "not integration"], ["-mslow"]])
def test_a_marker_argument_is_refused_naming_test_tiers(
    run_script: RunScript,
    args: list[str],
) -> None:
    """A -m of the caller's would replace each tier's: every tier would run the same tests."""
    run = run_script(*args)
    assert run.code == 2 and "TEST_TIERS" in run.err and run.pytest == []
