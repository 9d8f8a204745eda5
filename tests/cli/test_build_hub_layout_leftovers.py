"""`build --hub-layout DIR` into a layout an earlier build filled: the variant folders this run
did not write (made from the sources of then) are named, since `upload` would push them as
they are. The compile is replaced by a fake `build_project` that writes the variant's folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tinykernel import write_tiny_kernel

from kernelwheel.builder.service import BuildResult, Outcome
from kernelwheel.cli import build, main
from kernelwheel.model.variant import Arch

HOST = Arch.host().value
NOW = f"torch213-cxx11-cpu-{HOST}-linux"
THEN = f"torch214-cxx11-cpu-{HOST}-linux"


def test_a_variant_an_earlier_build_left_in_the_layout_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = tmp_path / "hub"
    (layout / "build" / THEN).mkdir(parents=True)  # an earlier build's
    out = tmp_path / "out"

    def build_project(planned, recipes, progress, **kwargs):  # type: ignore[no-untyped-def]
        (layout / "build" / NOW).mkdir(parents=True, exist_ok=True)
        wheel = out / "tiny_add-0.1.0+torch2.13.cpu.cxx11-cp310-abi3-linux_x86_64.whl"
        wheel.parent.mkdir(exist_ok=True)
        wheel.write_bytes(b"PK")
        return BuildResult("tiny-add", "0.1.0", (Outcome(NOW, 1.0, None, wheel, "0" * 64),))

    monkeypatch.setattr(build, "build_project", build_project)
    root = write_tiny_kernel(tmp_path / "p")
    argv = ["build", str(root), "-o", str(out), "--cache-dir", str(tmp_path / "cache")]
    assert main([*argv, "--hub-layout", str(layout), "--variant", NOW]) == 0
    err = capsys.readouterr().err
    assert f"warning: {layout / 'build'} also holds {THEN}, not written by this build" in err
    assert "kernelwheel upload would push it as it is" in err and NOW + "," not in err
    # Built again, both at once: nothing left over, nothing said.
    (layout / "build" / THEN).rmdir()
    assert main([*argv, "--hub-layout", str(layout), "--variant", NOW]) == 0
    assert "also holds" not in capsys.readouterr().err
