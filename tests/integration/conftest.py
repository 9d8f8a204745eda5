"""Session fixtures for integration tests: real builds through the CLI, real pip installs.

Build environments are cached under $KERNELWHEEL_CACHE_DIR (default ~/.cache/kernelwheel), so
a second run reuses them; wheels go to a per-session temporary wheelhouse.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelwheel.builder.envs import EnvInfo, IndexOptions, env_spec_for, provision
from kernelwheel.cli import main
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Variant

from .venvs import LayeredVenv

REPO = Path(__file__).resolve().parents[2]
IMG2GRAY = REPO / "kernels" / "img2gray"
CUDA_VARIANT = "torch214-cxx11-cu130-x86_64-linux"
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def cache_dir() -> Path:
    return Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()


def build_env(variant_name: str) -> EnvInfo:
    """The (cached) build environment of a variant: created by the build, reused here."""
    recipe = load_recipes().recipe_for(Variant.parse(variant_name))
    return provision(env_spec_for(recipe, IndexOptions()), cache_dir())


@dataclass(frozen=True)
class Built:
    wheelhouse: Path
    wheels: dict[str, Path]  # variant name -> wheel
    exit_code: int


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """img2gray built for the CUDA 13.0 and the CPU variant by `kernelwheel build`."""
    wheelhouse = tmp_path_factory.mktemp("wheelhouse")
    code = main(
        [
            "build",
            str(IMG2GRAY),
            "--output-dir",
            str(wheelhouse),
            "--variant",
            CUDA_VARIANT,
            "--variant",
            CPU_VARIANT,
        ]
    )
    wheels: dict[str, Path] = {}
    for name in (CUDA_VARIANT, CPU_VARIANT):
        local = Variant.parse(name).local_version
        found = sorted(wheelhouse.glob(f"img2gray-*+{local}-*.whl"))
        if found:
            wheels[name] = found[0]
    return Built(wheelhouse, wheels, code)


@pytest.fixture
def venv_for(tmp_path: Path) -> Iterator[object]:
    made: list[LayeredVenv] = []

    def make(variant_name: str | None, name: str = "venv") -> LayeredVenv:
        site = build_env(variant_name).purelib if variant_name else None
        v = LayeredVenv(tmp_path / f"{name}{len(made)}", site)
        made.append(v)
        return v

    yield make
