"""Selectors mean one thing everywhere: --variant takes globs with brace expansion in build (as in
to-wheel and download), conflicting selection flags are refused, -j auto works."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwheel.cli import main
from kernelwheel.errors import UsageError
from kernelwheel.plan.options import resolve_command_option, resolve_jobs

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
IDS = ["build", str(IMG2GRAY), "--print-build-identifiers"]



def identifiers(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main([*IDS, *args]) == 0
    return capsys.readouterr().out.split()


def test_build_variant_takes_globs_with_braces(capsys: pytest.CaptureFixture[str]) -> None:
    assert identifiers(capsys, "--variant", "torch21{3,4}-*-cpu-x86_64-*") == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch214-cxx11-cpu-x86_64-linux",
    ]
    # repeatable, any arch, a plain name still picks exactly that variant
    assert identifiers(
        capsys, "--variant", "torch214-cxx11-cu130-aarch64-linux", "--variant", "torch27-*-cpu-x*"
    ) == ["torch27-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu130-aarch64-linux"]


def test_brace_ranges_expand_in_build(capsys: pytest.CaptureFixture[str]) -> None:
    assert identifiers(capsys, "--variant", "torch21{0..4}-*-cpu-x86_64-linux") == [
        f"torch21{i}-cxx11-cpu-x86_64-linux" for i in range(5)
    ]


def test_brace_ranges_expand_in_build_selectors(capsys: pytest.CaptureFixture[str]) -> None:
    names = identifiers(capsys, "--build", "torch2{7..9}-*-cpu-*", "--arch", "x86_64")
    assert names == [f"torch2{i}-cxx11-cpu-x86_64-linux" for i in (7, 8, 9)]


def test_a_variant_glob_matching_nothing_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*IDS, "--variant", "torch99-*"]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert "--variant pattern 'torch99-*' matches no variant" in err and "available:" in err


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        ("build", ["--variant", "torch214-*", "--only", "x"],
         "--variant cannot be combined with --only"),
        ("build", ["--variant", "torch214-*", "--build", "x"],
         "--variant cannot be combined with --build"),
        ("build", ["--variant", "torch214-*", "--skip", "x", "--arch", "x86_64"],
         "--variant cannot be combined with --skip or --arch"),
        ("build", ["--only", "torch214-cxx11-cpu-x86_64-linux", "--build", "*"],
         "--only cannot be combined with --build"),
        ("matrix", ["--only", "torch214-cxx11-cpu-x86_64-linux", "--skip", "*-cpu-*"],
         "--only cannot be combined with --skip"),
    ],
)  # fmt: skip
def test_conflicting_selectors_are_refused(
    command: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--print-build-identifiers"] if command == "build" else []
    assert main([command, str(IMG2GRAY), *extra, *args]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert message in err and "fix: use" in err


def test_only_still_overrides_lower_layers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a conflict: --only replaces build/skip/archs from the environment, as documented."""
    monkeypatch.setenv("KERNELWHEEL_SKIP", "*-cpu-*")
    assert identifiers(capsys, "--only", "torch214-cxx11-cpu-x86_64-linux") == [
        "torch214-cxx11-cpu-x86_64-linux"
    ]


def test_jobs_auto_everywhere(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    default = identifiers(capsys)  # this machine's (tests/plan/test_defaults.py)
    assert len(default) == 1 and default[0].endswith("-x86_64-linux")
    assert identifiers(capsys, "-j", "auto") == default
    assert identifiers(capsys, "--jobs", "3") == default
    assert resolve_jobs(resolve_command_option("jobs", "auto")) == (os.cpu_count() or 1)
    monkeypatch.setenv("KERNELWHEEL_JOBS", "auto")
    assert resolve_command_option("jobs", None) is None
    assert main([*IDS, "-j", "0"]) == UsageError.exit_code
    assert "--jobs: expected a positive integer or 'auto'" in capsys.readouterr().err
