"""The release workflow with stable-ABI, tvm-ffi and noarch variants: the build job's wheel step
finds each kind's wheel, and the publish job's check matches the wheels to the plan. Both
scripts are run as written in release.yml, on wheel files named as `kernelwheel build` names
them; the entries come from `kernelwheel matrix --json` of fixture projects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.kinds import write_noarch_project, write_tvm_ffi_project

REPO = Path(__file__).resolve().parents[2]
RELEASE = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())

WHEELS = {
    "torch-stable-abi210-cu130-x86_64-linux": "k-1.0.0+torch2.10.stable.cu130-cp310-abi3-"
    "manylinux_2_28_x86_64.whl",
    "tvm-ffi01-cu130-aarch64-linux": "k-1.0.0+tvmffi0.1.cu130-py3-none-manylinux_2_28_aarch64.whl",
    "tvm-ffi01-cpu-x86_64-linux": "k-1.0.0+tvmffi0.1.cpu-py3-none-manylinux_2_28_x86_64.whl",
    "torch-cuda": "k-1.0.0-py3-none-any.whl",
}


def _run_step(
    job: str, step_id: str | None, name: str | None, env: dict[str, str], cwd: Path | None = None
) -> str:
    steps = RELEASE["jobs"][job]["steps"]
    (found,) = [
        s
        for s in steps
        if (step_id and s.get("id") == step_id) or (name is not None and s.get("name") == name)
    ]
    done = subprocess.run(
        ["bash", "-e", "-c", found["run"]],
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **env},
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _entries(tmp_path: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for root in (
        write_noarch_project(tmp_path / "noarch"),
        write_tvm_ffi_project(tmp_path / "tvm"),
        REPO / "tests" / "fixtures" / "stable_axpy",
    ):
        done = subprocess.run(
            [sys.executable, "-m", "kernelwheel", "matrix", str(root), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        entries += json.loads(done.stdout)["include"]
    return entries


def test_the_wheel_step_finds_each_kinds_wheel(tmp_path: Path) -> None:
    entries = {e["name"]: e for e in _entries(tmp_path)}
    for variant, wheel in WHEELS.items():
        house = tmp_path / f"wh-{variant}"
        house.mkdir()
        for other in WHEELS.values():  # the other kinds' wheels beside it are not taken
            (house / other).touch()
        entry = entries[variant]
        out = tmp_path / f"out-{variant}"
        env = {
            "WHEELHOUSE": str(house),
            "VARIANT": variant,
            "LOCAL_VERSION": entry["local_version"] or "",
            "PYTHON_ABI": entry["python_abi"],
            "ARCH": entry["arch"] or "",
            "GITHUB_OUTPUT": str(out),
        }
        _run_step("build", "wheel", None, env)
        assert out.read_text() == f"wheel={house / wheel}\n", variant


def test_the_publish_check_matches_every_kind(tmp_path: Path) -> None:
    include = [e for e in _entries(tmp_path) if e["name"] in WHEELS or e["name"] == "torch-cpu"]
    dist = tmp_path / "dist"
    dist.mkdir()
    for wheel in WHEELS.values():
        (dist / wheel).touch()
    env = {"MATRIX": json.dumps({"include": include})}
    name = "Check that every planned variant has its wheel"
    assert "k-1.0.0-py3-none-any.whl" in _run_step("publish", None, name, env, tmp_path)
    (dist / WHEELS["tvm-ffi01-cpu-x86_64-linux"]).unlink()
    with pytest.raises(AssertionError, match="missing \\['tvmffi0.1.cpu/x86_64'\\]"):
        _run_step("publish", None, name, env, tmp_path)


def test_the_plan_gives_every_kind_a_build_image(tmp_path: Path) -> None:
    """noarch variants too (they had none: the plan job failed, 'add its image to recipes/')."""
    (tmp_path / "matrix.json").write_text(json.dumps({"include": _entries(tmp_path)}))
    out = tmp_path / "out"
    _run_step("plan", "images", None, {"RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(out)})
    images = json.loads(out.read_text().removeprefix("images="))
    assert images["torch-cpu"] == images["tvm-ffi01-cpu-x86_64-linux"]  # the x86_64 image
