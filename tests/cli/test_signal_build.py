"""SIGTERM and SIGINT while ``kernelwheel build`` has already put the variant's wheel into the
output folder (issue 38 family 10: the CLI said "nothing partial was left behind" with the wheel
in ``-o``). A real subprocess of the CLI, paused at a known point, gets a real signal: the run
exits 143/130, the wheel it had written is gone, and a wheel from an earlier run stays."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.kinds import write_noarch_project

# The real CLI with one function paused after it ran, a mark file touched when it is reached.
DRIVER = r"""
import importlib, os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
module, attr = sys.argv[1:3]
mod = importlib.import_module(module)
original = getattr(mod, attr)
def paused(*args, **kwargs):
    result = original(*args, **kwargs)
    open(os.environ["KW_MARK"], "a").close()
    time.sleep(30)
    return result
setattr(mod, attr, paused)
from kernelwheel.cli import main
sys.exit(main(sys.argv[3:]))
"""

POINTS = [
    ("kernelwheel.builder.noarch", "write_wheel"),  # the wheel in -o, the build not finished
    ("kernelwheel.hub.export", "export_variant"),  # the wheel in -o, the Hub layout half made
]


def _interrupted(tmp_path: Path, point: tuple[str, str], sig: int, argv: list[str]) -> str:
    mark = tmp_path / "mark"
    mark.unlink(missing_ok=True)
    env = {**os.environ, "KW_MARK": str(mark)}
    env.pop("KERNELWHEEL_TRACEBACK", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *point, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not mark.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"never reached {point}: rc={proc.returncode}\n{out}\n{err}")
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), out + err
    assert "Traceback" not in err
    return out + err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("point", POINTS, ids=lambda p: p[1])
def test_an_interrupted_build_leaves_no_wheel_in_the_output_folder(
    tmp_path: Path, point: tuple[str, str], sig: int, monkeypatch: pytest.MonkeyPatch
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
    req.out_dir.mkdir()
    version = full_version(req.version, variant, req.local_version_style)
    name = req.project.name.replace("-", "_")
    mine = req.out_dir / f"{name}-{version}-cp39-abi3-manylinux_2_28_{Arch.host().value}.whl"
    other = req.out_dir / f"{name}-{req.version}+other-cp39-abi3-linux_x86_64.whl"
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
