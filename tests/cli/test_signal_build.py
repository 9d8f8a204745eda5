"""SIGTERM and SIGINT while ``kernelwheel build`` has already put the variant's wheel into the
output folder (issue 38 family 10: the CLI said "nothing partial was left behind" with the wheel
in ``-o``). A real subprocess of the CLI, paused at a known point, gets a real signal: the run
exits 143/130, the wheel it had written is gone, and a wheel from an earlier run stays."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from support.interrupt import interrupt_at
from support.kinds import write_noarch_project

# The real CLI with one function paused after it ran, a mark file touched when it is reached.

POINTS = [
    ("kernelwheel.builder.noarch", "write_wheel", "after"),  # the wheel in -o, the build not done
    ("kernelwheel.hub.export", "export_variant", "after"),  # the wheel in -o, the layout half made
]


def _interrupted(tmp_path: Path, point: tuple[str, str, str], sig: int, argv: list[str]) -> str:
    code, out, err = interrupt_at(tmp_path, point, sig, argv, reach_within=120)
    assert code == (143 if sig == signal.SIGTERM else 130), out + err
    assert "Traceback" not in err
    return out + err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("point", POINTS, ids=lambda p: p[1])
def test_an_interrupted_build_leaves_no_wheel_in_the_output_folder(
    tmp_path: Path, point: tuple[str, str, str], sig: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    root = write_noarch_project(tmp_path / "p")
    out = tmp_path / "out"
    argv = ["build", str(root), "-o", str(out), "--hub-layout", str(tmp_path / "hub")]
    said = _interrupted(tmp_path, point, sig, argv)
    if sig == signal.SIGTERM:
        assert "nothing partial was left behind" in said
    assert list(out.glob("*.whl")) == [], sorted(p.name for p in out.iterdir())
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_a_wheel_of_an_earlier_run_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    root = write_noarch_project(tmp_path / "p")
    out = tmp_path / "out"
    from kernelwheel.cli import main

    assert main(["build", str(root), "-o", str(out)]) == 0
    (wheel,) = out.glob("*.whl")
    data = wheel.read_bytes()
    _interrupted(tmp_path, POINTS[0], signal.SIGTERM, ["build", str(root), "-o", str(out)])
    assert wheel.read_bytes() == data  # replaced whole by the same bytes, not removed


def test_a_compiled_variant_interrupted_after_its_repair_leaves_only_the_other_wheels(
    tmp_path: Path,
) -> None:
    # The compiled kinds' repair step publishes the wheel into -o before the check and Hub
    # layout steps end: the same guard, on the variant's own local version (here without a
    # compile: the build is replaced by one that publishes and is then interrupted).
    from dataclasses import replace

    from support.requests import build_request
    from support.tinykernel import write_tiny_kernel

    from kernelwheel.builder import entry
    from kernelwheel.builder.request import BuildKind
    from kernelwheel.builder.steps import full_version
    from kernelwheel.errors import Terminated
    from kernelwheel.log import SilentReporter
    from kernelwheel.model.variant import Arch, Variant

    variant = Variant.parse(f"torch213-cxx11-cpu-{Arch.host().value}-linux")
    req = build_request(write_tiny_kernel(tmp_path / "p"), variant)
    out = req.outputs.out_dir
    out.mkdir()
    version = full_version(req.version, variant, req.outputs.local_version_style)
    name = req.project.name.replace("-", "_")
    mine = out / f"{name}-{version}-cp39-abi3-manylinux_2_28_{Arch.host().value}.whl"
    other = out / f"{name}-{req.version}+other-cp39-abi3-linux_x86_64.whl"
    other.write_bytes(b"finished earlier")

    def publishes_then_is_interrupted(*_: object) -> None:
        mine.write_bytes(b"repaired")
        raise Terminated()

    kind = {BuildKind.TORCH: publishes_then_is_interrupted}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(entry, "_BUILDERS", kind)
        with pytest.raises(Terminated):
            entry.build_and_export(replace(req, kind=BuildKind.TORCH), SilentReporter())
    assert not mine.exists() and other.read_bytes() == b"finished earlier"
