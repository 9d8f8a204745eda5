"""Build environments: digests and the ready-marker that caches the environment's probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwheel.builder import envs
from kernelwheel.builder.envs import EnvInfo, EnvSpec, provision

SPEC = EnvSpec(torch_requirement="torch===2.14.1", packages=("nvidia-cuda-nvcc==13.0.88",))


def test_digest_depends_on_every_input() -> None:
    base = SPEC.digest("3.11")
    assert base == EnvSpec("torch===2.14.1", ("nvidia-cuda-nvcc==13.0.88",)).digest("3.11")
    assert SPEC.digest("3.12") != base
    assert EnvSpec("torch===2.13.0", SPEC.packages).digest("3.11") != base
    assert EnvSpec(SPEC.torch_requirement, (), find_links=("/w",)).digest("3.11") != base


def _ready_env(tmp_path: Path) -> Path:
    root = tmp_path / "envs" / f"py3.11-{SPEC.digest('3.11')}"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")  # must not be run
    return root


def test_ready_environment_is_reused_from_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _ready_env(tmp_path)
    info = EnvInfo(
        root / "bin" / "python", "3.11", "x86_64", root / "lib", "2.14.1+cu130", "13.0", None, True
    )
    envs._write_marker(root / envs.READY_MARKER, info)
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))

    def no_probe(python: Path) -> EnvInfo:
        raise AssertionError("a ready environment is not probed again")

    monkeypatch.setattr(envs, "probe", no_probe)
    got = provision(SPEC, tmp_path)
    assert got.reused and got.torch == "2.14.1+cu130" and got.cuda == "13.0"


def test_old_marker_is_probed_once_and_upgraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _ready_env(tmp_path)
    (root / envs.READY_MARKER).write_text(json.dumps({"torch": "2.14.1"}))
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))
    calls: list[Path] = []

    def fake_probe(python: Path) -> EnvInfo:
        calls.append(python)
        return EnvInfo(python, "3.11", "x86_64", root / "lib", "2.14.1", "13.0", None, True)

    monkeypatch.setattr(envs, "probe", fake_probe)
    assert provision(SPEC, tmp_path).reused
    assert provision(SPEC, tmp_path).torch == "2.14.1"
    assert len(calls) == 1
