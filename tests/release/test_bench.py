"""Issue 40 item 7: bench/ keeps what the docs cite, its GPU work behind one runner
(bench/gpu.sh). The docs name only files that exist and jobs the runner has; the shell parses."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "bench" / "gpu.sh"


def _pages() -> list[Path]:
    """The pages that tell how to run something: the README, docs/ (not its evidence), scripts/
    and the tests."""
    docs = [p for p in (REPO / "docs").rglob("*.md") if "evidence" not in p.parts]
    scripts = [p for p in (REPO / "scripts").rglob("*") if p.is_file()]
    return [REPO / "README.md", *docs, *scripts, *(REPO / "tests").rglob("*.py")]


def _evidence() -> list[Path]:
    return sorted((REPO / "docs" / "evidence").rglob("*.md"))


def _bench_names(page: Path) -> set[str]:
    return set(
        re.findall(r"bench/([A-Za-z0-9_.-]+\.(?:sh|py|cu))", page.read_text(errors="replace"))
    )


def _jobs() -> set[str]:
    usage = subprocess.run(
        ["bash", str(RUNNER), "help"], capture_output=True, text=True, check=True
    ).stdout
    return set(re.findall(r"^([a-z][a-z-]*) ", usage, re.MULTILINE))


def test_the_runner_lists_its_jobs_and_refuses_others() -> None:
    assert {"dev-loop", "first-unchanged", "corpus", "round", "check", "perf"} <= _jobs()
    proc = subprocess.run(["bash", str(RUNNER), "no-such-job"], capture_output=True, text=True)
    assert proc.returncode == 2 and "no job no-such-job" in proc.stderr


def test_every_runner_job_the_docs_name_exists() -> None:
    jobs = _jobs()
    cited = {
        (page.relative_to(REPO).as_posix(), job)
        for page in _pages() + _evidence()
        for job in re.findall(r"bench/gpu\.sh\s+([a-z][a-z-]*)", page.read_text(errors="replace"))
    }
    assert cited, "no page names a job of bench/gpu.sh"
    assert {(page, job) for page, job in cited if job not in jobs} == set()


def test_every_bench_file_the_docs_name_exists() -> None:
    missing = {
        (page.relative_to(REPO).as_posix(), name)
        for page in _pages()
        for name in _bench_names(page)
        if not (REPO / "bench" / name).exists()
    }
    assert missing == set()


def test_evidence_of_a_retired_script_names_the_runner() -> None:
    """An evidence page may keep the command line a run was made with, but one that names a
    script no longer in bench/ says how to run it today: through bench/gpu.sh."""
    stale = [
        page.relative_to(REPO).as_posix()
        for page in _evidence()
        if any(not (REPO / "bench" / name).exists() for name in _bench_names(page))
        and "bench/gpu.sh " not in page.read_text()
    ]
    assert stale == []


@pytest.mark.parametrize("script", sorted((REPO / "bench").glob("*.sh")), ids=lambda p: p.name)
def test_bench_scripts_parse(script: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", "-x", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout
