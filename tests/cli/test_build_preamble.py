"""`kernelwheel build` says first which options it runs with (those set above their defaults,
each with the layer that set it), and each variant's log starts with the same lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.variants import TORCH213_CPU, TORCH214_CPU

import kernelwheel.builder.service as build_service
from kernelwheel._util import Runner
from kernelwheel.builder import preflight
from kernelwheel.builder.request import BuildRequest, BuiltWheel
from kernelwheel.cli import main
from kernelwheel.log import Reporter
from kernelwheel.plan.options import ENV_VARS

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"


@pytest.fixture(autouse=True)
def _no_option_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:  # e.g. a KERNELWHEEL_CACHE_DIR of the machine running the tests
        monkeypatch.delenv(name, raising=False)


def test_options_come_first_in_the_output_and_in_each_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the build is faked: PyTorch's CPU index counts as reachable (builder.preflight asks it)
    monkeypatch.setattr(preflight, "_unreachable", lambda url: None)
    headers: dict[str, str] = {}

    def fake(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
        headers[req.variant.name] = req.log_header()
        wheel = req.outputs.out_dir / f"img2gray-0.1.0+{req.variant.local_version}-cp310-abi3-x.whl"
        wheel.parent.mkdir(parents=True, exist_ok=True)
        wheel.write_bytes(b"x")
        return BuiltWheel(req.variant, wheel, "ns", req.log)

    monkeypatch.setattr(build_service, "build_and_export", fake)
    monkeypatch.setenv("KERNELWHEEL_NO_CCACHE", "1")
    out = tmp_path / "wh"
    args = ["build", str(IMG2GRAY), "-o", str(out), "--variant", TORCH213_CPU]
    assert main([*args, "--variant", TORCH214_CPU, "--jobs", "2"]) == 0
    shown = capsys.readouterr().out.splitlines()  # progress: stdout without --json
    expected = [
        "options (set above their defaults):",
        f"  output-dir = {out}  (--output-dir)",
        "  no-ccache = true  (KERNELWHEEL_NO_CCACHE)",
        "  jobs = 2  (--jobs)",
    ]
    assert shown[:4] == expected
    assert sorted(headers) == sorted([TORCH213_CPU, TORCH214_CPU])
    for name, header in headers.items():
        assert header.splitlines() == [f"kernelwheel build of img2gray for {name}", *expected]


def test_all_defaults_are_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def refuse(*args: object, **kwargs: object) -> BuiltWheel:
        raise KeyboardInterrupt  # the preamble is out before any variant builds

    monkeypatch.setattr(build_service, "build_and_export", refuse)
    main(["build", str(IMG2GRAY), "--variant", TORCH213_CPU])
    assert capsys.readouterr().out.splitlines()[0] == (
        "options: all defaults (kernelwheel build --help lists them)"
    )
