"""kernelwheel install's choice among stable-ABI, tvm-ffi, noarch and per-torch builds of one
release, and the reason it gives for every build it passes over (no interpreter needed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support.installkit import choose

from kernelwheel.compat import rules as compat
from kernelwheel.errors import UsageError
from kernelwheel.install.probe import Target
from kernelwheel.install.select import parse_requirement, select
from kernelwheel.install.service import InstallRequest, install
from kernelwheel.install.sources import Candidate
from kernelwheel.model.sources import PipSources

_LINUX = "manylinux_2_28_x86_64"
PER_TORCH = f"k-1.0.0+torch2.14.cu130.cxx11-cp39-abi3-{_LINUX}.whl"
STABLE_210 = f"k-1.0.0+torch2.10.stable.cu130-cp39-abi3-{_LINUX}.whl"
STABLE_212 = f"k-1.0.0+torch2.12.stable.cu130-cp39-abi3-{_LINUX}.whl"
STABLE_215 = f"k-1.0.0+torch2.15.stable.cu130-cp39-abi3-{_LINUX}.whl"
STABLE_CU12 = f"k-1.0.0+torch2.10.stable.cu128-cp39-abi3-{_LINUX}.whl"
TVM = f"k-1.0.0+tvmffi0.1.cu130-py3-none-{_LINUX}.whl"
NOARCH = "k-1.0.0-py3-none-any.whl"


def _target(torch: compat.Torch) -> Target:
    tags = (f"cp311-abi3-{_LINUX}", f"cp39-abi3-{_LINUX}", f"py3-none-{_LINUX}", "py3-none-any")
    return Target(Path("/py"), (3, 11), "cpython", "x86_64", torch, "2.14.1", tags, True)


def _choose(files: list[str], torch: compat.Torch) -> tuple[str | None, dict[str, str]]:
    return choose(files, _target(torch))


CU13 = compat.Torch("2.14.1+cu130", compat.CUDA, (13, 0), True)


def test_per_torch_then_newest_stable_abi_then_tvm_ffi_then_noarch() -> None:
    files = [NOARCH, TVM, STABLE_210, STABLE_212, STABLE_215, STABLE_CU12, PER_TORCH]
    chosen, reasons = _choose(files, CU13)
    assert chosen == PER_TORCH
    assert reasons[STABLE_212] == (
        "compatible (a stable-ABI build), but a build for this torch series is preferred"
    )
    assert reasons[STABLE_215].endswith("mismatch in torch version (built for torch >= 2.15)")
    assert reasons[STABLE_CU12].endswith("mismatch in CUDA major version (built with CUDA 12.8)")
    assert reasons[TVM] == (
        "compatible (a tvm-ffi build), but a build for this torch series is preferred"
    )
    assert reasons[NOARCH] == (
        "compatible (a universal build), but a build for this torch series is preferred"
    )
    files.remove(PER_TORCH)
    chosen, reasons = _choose(files, CU13)
    assert chosen == STABLE_212
    assert reasons[STABLE_210] == "compatible, but a stable-ABI build for a newer torch was chosen"
    assert _choose([NOARCH, TVM], CU13)[0] == TVM
    assert _choose([NOARCH], CU13)[0] == NOARCH


def test_an_older_or_cpu_torch_refuses_what_it_cannot_load() -> None:
    old = compat.Torch("2.9.1+cu130", compat.CUDA, (13, 0), True)
    chosen, reasons = _choose([STABLE_210, TVM], old)
    assert chosen == TVM
    assert "built for torch >= 2.10" in reasons[STABLE_210]
    cpu = compat.Torch("2.14.1+cpu", compat.CPU, None, True)
    chosen, reasons = _choose([STABLE_210, TVM, NOARCH], cpu)
    assert chosen == NOARCH
    assert reasons[TVM].endswith("backend (a cu130 build; this torch has no CUDA)")


TVM_CPU = f"k-1.0.0+tvmffi0.1.cpu-py3-none-{_LINUX}.whl"
TVM_CU128 = f"k-1.0.0+tvmffi0.1.cu128-py3-none-{_LINUX}.whl"
TVM_ROCM = f"k-1.0.0+tvmffi0.1.rocm63-py3-none-{_LINUX}.whl"


def _choose_without_torch(
    files: list[str], driver: tuple[int, int] | None
) -> tuple[str | None, dict[str, str]]:
    target = replace(_target(CU13), torch=None, torch_dist=None, no_torch_driver=driver)
    return choose(files, target)


def test_without_torch_only_tvm_ffi_builds_fit_by_the_machines_driver() -> None:
    """An interpreter with no torch was refused whole; the tvm-ffi builds (apache-tvm-ffi, no
    torch) fit it now, the CUDA ones by the driver, and every torch build says why not."""
    files = [PER_TORCH, STABLE_210, NOARCH, TVM_CPU, TVM, TVM_CU128, TVM_ROCM]
    chosen, reasons = _choose_without_torch(files, (13, 1))
    assert chosen == TVM  # the newest CUDA the driver supports, before the CPU build
    needs = "it requires torch, and this environment has none"
    assert reasons[PER_TORCH] == f"built for torch 2.14, CUDA 13.0, cxx11 ABI: {needs}"
    assert reasons[STABLE_210].endswith(needs) and reasons[NOARCH].endswith(needs)
    assert (
        reasons[TVM_CU128]
        == "compatible, but a build with a newer CUDA that the driver supports was chosen"
    )
    assert reasons[TVM_CPU] == (
        "compatible (a CPU build), but a CUDA build the driver supports fits better"
    )
    assert "only CPU and CUDA builds" in reasons[TVM_ROCM]
    chosen, reasons = _choose_without_torch(files, (12, 9))
    assert chosen == TVM_CU128
    assert reasons[TVM].endswith(
        "mismatch in CUDA driver (built with CUDA 13.0; the driver supports CUDA 12.9)"
    )
    chosen, reasons = _choose_without_torch(files, None)  # no driver: the CPU build
    assert chosen == TVM_CPU and "no CUDA driver found" in reasons[TVM]
    assert _choose_without_torch([PER_TORCH, NOARCH], (13, 1))[0] is None


def test_a_pre_release_is_taken_only_when_asked_for_or_when_no_final_release_fits() -> None:
    """pip's rule (PEP 440): ``k`` is the newest final release, not a newer ``rc``; the
    pre-release is named with the way to ask for it."""
    final = f"k-1.0.0+torch2.14.cu130.cxx11-cp39-abi3-{_LINUX}.whl"
    rc = f"k-1.1.0rc1+torch2.14.cu130.cxx11-cp39-abi3-{_LINUX}.whl"
    chosen, reasons = _choose([final, rc], CU13)
    assert chosen == final  # before: the rc ("compatible, but 1.1.0rc1 is newer")
    assert reasons[rc] == (
        "compatible, but 1.1.0rc1 is a pre-release, taken only when the requirement names one "
        "(==1.1.0rc1) or no final release fits"
    )
    assert _choose([rc], CU13)[0] == rc  # nothing else fits: taken, as pip takes it
    target = _target(CU13)
    candidates = [Candidate(f, f"/wh/{f}", None, "/wh") for f in (final, rc)]
    for asked in ("k==1.1.0rc1", "k>=1.1.0rc1", "k>1.0"):
        (sel,) = select([Requirement(asked)], candidates, target)
        assert sel.chosen is not None and sel.chosen.candidate.filename == rc, asked


def test_a_file_of_the_project_whose_name_is_no_wheel_name_is_refused_with_why() -> None:
    """``k-latest.whl`` (a wheel renamed by hand): before, left out without a word, so a
    folder holding only it said "no wheel of k"."""
    renamed = "k-latest.whl"
    chosen, reasons = _choose([renamed, PER_TORCH, "other-latest.whl"], CU13)
    assert chosen == PER_TORCH
    assert set(reasons) == {renamed}  # another project's file is not this one's candidate
    assert reasons[renamed].startswith("not a wheel file name (Invalid wheel filename")
    assert reasons[renamed].endswith("pip ignores it too; give it its built name")
    assert _choose([renamed], CU13) == (None, {renamed: reasons[renamed]})


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        (
            f"dist/{PER_TORCH}",
            "kernelwheel install k==1.0.0+torch2.14.cu130.cxx11 -f dist (that build; 'k' alone "
            "takes the build that fits the environment)",
        ),
        ("my wheels/k.WHL", "kernelwheel install NAME -f 'my wheels'"),
    ],
)
def test_a_wheels_path_given_as_the_package_is_told_the_command(given: str, hint: str) -> None:
    """What build printed, pasted: before, "no source of wheels given" (or, with -f, pip's
    grammar error about a semicolon)."""
    with pytest.raises(UsageError) as err:
        parse_requirement(given)
    assert err.value.message == (
        f"{given!r} is a wheel file: install takes package names and reads wheels from "
        "--find-links/--index-url"
    )
    assert err.value.hint == hint
    request = InstallRequest((given,), PipSources(), Path("/no/python"))
    with pytest.raises(UsageError) as err:
        install(request)  # before the sources and the interpreter are looked at
    assert err.value.hint == hint


def test_a_build_whose_requires_python_excludes_the_target_is_passed_over_as_pip_does() -> None:
    """pip passes over a release whose Requires-Python excludes the interpreter; install chose
    it anyway, and pip then failed ("requires a different Python: 3.11.7 not in '>=3.12'")."""
    old = f"k-1.0.0+torch2.14.cu130.cxx11-cp39-abi3-{_LINUX}.whl"
    new = f"k-1.1.0+torch2.14.cu130.cxx11-cp39-abi3-{_LINUX}.whl"
    target = _target(CU13)  # Python 3.11
    candidates = [
        Candidate(old, f"/wh/{old}", None, "/wh", requires_python=">=3.9"),
        Candidate(new, f"/wh/{new}", None, "/wh", requires_python=">=3.12"),
    ]
    (sel,) = select([Requirement("k")], candidates, target)
    assert sel.chosen is not None and sel.chosen.candidate.filename == old
    (passed,) = sel.passed_over
    assert passed.reason == "requires Python >=3.12; this is Python 3.11"
    for fits in (">=3.11.5", "<3.11.5", "~=3.11", "", "not a specifier"):  # judged by the minor
        (only,) = select([Requirement("k")], [replace(candidates[1], requires_python=fits)], target)
        assert only.chosen is not None, fits
