"""Each new build environment of the recipes resolves (issue 32 items 3 and 4): pip's resolver
on the environment's exact requirements (torch, the CUDA toolchain pins, the build tools) for the
variant's arch and a CPython torch supports, ``pip install --dry-run --report`` with pip's
``fast-deps`` (PyPI here serves no PEP 658 metadata files, so metadata is read from the wheels
with HTTP range requests: nothing is downloaded whole). The report must name the pinned versions,
and each pinned wheel's sha256 in the recipes must be the one PyPI lists for that arch.

Needs PyPI (skipped with the reason where it cannot be reached); pip's configuration is left out
(this machine caps torch below 2.15). Environments whose torch only PyTorch's per-flavour index
serves are resolved only with KERNELWHEEL_OPTIN=1 and that index reachable, and are skipped here
with the reason: that index cannot be reached from this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kernelwheel.model.recipes import VariantRecipe, load_recipes
from kernelwheel.model.sources import PipSources
from kernelwheel.model.variant import Variant
from kernelwheel.toolchain.envs import BUILD_TOOLS, env_spec_for

pytestmark = pytest.mark.integration

OPTIN = os.environ.get("KERNELWHEEL_OPTIN") == "1"
PYTHON = "3.12"  # torch 2.15 needs >= 3.11; every torch of the recipes has cp312 wheels
# The environments the recipes gained with torch 2.15 and the CUDA flavours of 2.14 and 2.15.
FROM_PYPI = ["torch215-cxx11-cu132-x86_64-linux", "torch215-cxx11-cu132-aarch64-linux"]
FROM_INDEX = [
    f"torch{t}-cxx11-{f}-{a}-linux"
    for t, flavours in (("214", ("cu126", "cu132")), ("215", ("cu126", "cu130", "cpu")))
    for f in flavours
    for a in ("x86_64", "aarch64")
]


@cache
def _unreachable(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=15):
            return None
    except urllib.error.HTTPError as exc:
        return None if exc.code < 500 else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


def _platforms(arch: str) -> list[str]:
    """What pip's --platform must list for a manylinux_2_28 machine (it does not expand it)."""
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(28, 4, -1)]
    return (
        tags
        + [f"manylinux2014_{arch}"]
        + ([f"manylinux2010_{arch}", f"manylinux1_{arch}"] if arch == "x86_64" else [])
    )


def _resolve(recipe: VariantRecipe, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """pip's report for the variant's environment: name -> its report entry."""
    spec = env_spec_for(recipe, PipSources())
    assert recipe.variant.arch is not None
    arch = recipe.variant.arch.value
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    cmd += ["--use-feature=fast-deps", "--only-binary=:all:", "--report", str(report)]
    cmd += ["--python-version", PYTHON, "--implementation", "cp", "--target", str(tmp_path / "t")]
    for platform in _platforms(arch):
        cmd += ["--platform", platform]
    for url in spec.sources.extra_index_urls:
        cmd += ["--extra-index-url", url]
    cmd += [spec.torch_requirement, *(p.split(" ")[0] for p in spec.packages), *BUILD_TOOLS]
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_FIND_LINKS", None)  # this machine's local torch wheels
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    data = json.loads(report.read_text())
    return {entry["metadata"]["name"].lower(): entry for entry in data["install"]}


def _check(recipe: VariantRecipe, resolved: dict[str, dict[str, Any]]) -> None:
    assert recipe.torch_version is not None
    assert resolved["torch"]["metadata"]["version"].split("+")[0] == recipe.torch_version
    if recipe.cuda is None or recipe.cuda.source != "pypi":
        return
    for pin in recipe.cuda.packages:
        entry = resolved[pin.name]
        assert entry["metadata"]["version"] == pin.version, pin.name
        hashes = entry["download_info"].get("archive_info", {}).get("hashes", {})
        assert hashes.get("sha256") == pin.sha256, f"{pin.name}: recipe sha256 is not PyPI's"


def _pypi() -> None:
    why = _unreachable("https://pypi.org/simple/torch/")
    if why is not None:
        pytest.skip(f"PyPI cannot be reached ({why})")


@pytest.mark.parametrize("name", FROM_PYPI)
def test_a_torch_from_pypi_environment_resolves_with_its_pins(name: str, tmp_path: Path) -> None:
    _pypi()
    recipe = load_recipes().recipe_for(Variant.parse(name))
    assert recipe.index_url is None
    resolved = _resolve(recipe, tmp_path)
    _check(recipe, resolved)
    # torch 2.15.0's own cuda-toolkit==13.2.2 agrees with the toolchain pins (one runtime)
    assert resolved["cuda-toolkit"]["metadata"]["version"] == "13.2.2"


@pytest.mark.parametrize("name", FROM_INDEX)
def test_a_torch_from_pytorchs_index_environment_resolves(name: str, tmp_path: Path) -> None:
    recipe = load_recipes().recipe_for(Variant.parse(name))
    assert recipe.index_url is not None
    why = _unreachable(recipe.index_url.rstrip("/") + "/torch/")
    if why is not None:
        pytest.skip(
            f"cannot be resolved here: {recipe.torch_requirement} is only on {recipe.index_url}, "
            f"which this machine cannot reach ({why})"
        )
    if not OPTIN:
        pytest.skip("opt-in: set KERNELWHEEL_OPTIN=1 (a full torch resolution per flavour)")
    _pypi()
    _check(recipe, _resolve(recipe, tmp_path))
