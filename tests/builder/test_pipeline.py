"""Pure pieces of the build pipeline: flags, tags, environment checks (version resolution:
tests/plan/test_versioning.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version
from support.requests import request_for

from kernelwheel.builder.compile_plan import fatbin_compression_flags
from kernelwheel.builder.pipeline import _check_env_matches, _python_tag
from kernelwheel.builder.steps import full_version
from kernelwheel.errors import ToolchainError
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import LocalVersionStyle, Variant
from kernelwheel.plan.options import resolve_options
from kernelwheel.toolchain.envs import EnvInfo

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"


def test_fatbin_compression_flags() -> None:
    assert fatbin_compression_flags("default", "13.0") == ([], None)
    assert fatbin_compression_flags("size", "13.0") == (["--compress-mode=size"], None)
    assert fatbin_compression_flags("none", "12.8") == (["--compress-mode=none"], None)
    assert fatbin_compression_flags("none", "12.6") == (["-no-compress"], None)
    flags, note = fatbin_compression_flags("balance", "11.8")
    assert flags == [] and note is not None and "needs nvcc >= 12.8" in note


def test_python_tag_follows_the_limited_api_really_used() -> None:
    assert _python_tag("0x03090000") == ("cp39", ">=3.9")
    assert _python_tag("0x030A0000") == ("cp310", ">=3.10")


def test_full_version_stamps_local_part() -> None:
    v = Variant.parse("torch210-cxx11-cu130-x86_64-linux")
    assert full_version("1.2.0", v) == "1.2.0+torch2.10.cu130.cxx11"
    compact = full_version("1.2.0", v, LocalVersionStyle.COMPACT)
    assert compact == "1.2.0+torch210cu130cxx11" and str(Version(compact)) == compact
    assert v.torch_requirement() == "torch==2.10.*"  # Requires-Dist, whatever the style


def test_request_for_carries_every_resolved_setting(tmp_path: Path) -> None:
    """plan_requests is where options become build settings: nothing below re-reads them."""
    project = load_project(IMG2GRAY)
    recipes = load_recipes()
    recipe = recipes.recipe_for(Variant.parse("torch214-cxx11-cu130-x86_64-linux"))
    options = resolve_options(
        None,
        env={},
        cli={
            "cache_dir": str(tmp_path / "cache"),
            "find_links": ["/wheels"],
            "no_index": True,
            "repair": False,
            "jobs": "3",
            "local_version_style": "compact",
            "with_cpu_kernels": True,
            "nvcc_threads": "2",
            "memory_per_thread": "3000",
            "no_ccache": True,
        },
    )
    req = request_for(project, recipe, "0.1.0", options, recipes)
    assert req.compile.no_ccache and req.compile.cross is None  # a native variant
    assert req.recipe is recipe and req.cuda.with_cpu_kernels
    assert req.budget.nvcc_threads == 2 and req.budget.memory_per_thread == 3000
    assert req.outputs.cache_dir == tmp_path / "cache"
    assert req.outputs.work_dir.parent == tmp_path / "cache/work"
    assert (
        req.env.spec is not None
        and req.env.spec.sources.no_index
        and req.env.spec.sources.find_links == ("/wheels",)
    )
    assert req.env.spec.sources.extra_index_urls == ()  # --no-index: not even the recipe's index
    assert req.outputs.manylinux is None and req.budget.jobs == 3
    assert req.outputs.local_version_style is LocalVersionStyle.COMPACT
    assert req.env.spec.sources.pip_args()[:1] == ["--no-index"]


def _env(torch: str, cuda: str | None, cxx11: bool = True) -> EnvInfo:
    p = Path("/env/bin/python")
    return EnvInfo(p, "3.11", "x86_64", Path("/env/site"), torch, cuda, None, cxx11)


@pytest.mark.parametrize(
    ("variant", "env", "match"),
    [
        ("torch214-cxx11-cu130-x86_64-linux", _env("2.13.0", "13.0"), "needs torch 2.14"),
        ("torch214-cxx11-cu130-x86_64-linux", _env("2.14.1+cpu", None), "CPU-only"),
        ("torch214-cxx11-cu130-x86_64-linux", _env("2.14.1", "12.8"), "CUDA 13.0"),
        ("torch214-cxx11-cu130-x86_64-linux", _env("2.14.1", "13.0", False), "needs the cxx11"),
    ],
)
def test_environment_mismatch_is_refused(variant: str, env: EnvInfo, match: str) -> None:
    with pytest.raises(ToolchainError, match=match):
        _check_env_matches(env, Variant.parse(variant))


def test_matching_environment_passes() -> None:
    _check_env_matches(_env("2.14.1", "13.0"), Variant.parse("torch214-cxx11-cu130-x86_64-linux"))
    # A CPU variant builds with any torch of its minor: only CPU kernels are compiled.
    _check_env_matches(_env("2.13.0", "13.0"), Variant.parse("torch213-cxx11-cpu-x86_64-linux"))


def test_static_only_libstdcxx_toolchain_is_detected(tmp_path: Path) -> None:
    from kernelwheel._util import RUNNER
    from kernelwheel.builder.steps import _links_shared_libstdcxx

    fake = tmp_path / "g++"
    fake.write_text('#!/bin/sh\necho "${1#-print-file-name=}"\n')  # "not found": bare name
    fake.chmod(0o755)
    assert _links_shared_libstdcxx(RUNNER, str(fake)) is False
    assert _links_shared_libstdcxx(RUNNER, "c++") is True  # Debian's g++ ships libstdc++.so


def test_a_dev_build_runs_ninja_directly_whatever_the_schedule(tmp_path: Path) -> None:
    # The last run's spec and result: ninja and the link are rerun directly (no worker start)
    # while only the units' order or the job count moved; a changed flag needs the worker.
    from kernelwheel.builder.steps import _direct_commands
    from kernelwheel.compile.compile_spec import CompileSpec

    so = tmp_path / "lib" / "_x.abi3.so"
    so.parent.mkdir()
    so.write_bytes(b"\x7fELF")
    base = CompileSpec(
        name="_x",
        sources=("/p/a.cu", "/p/b.cu"),
        include_dirs=(),
        define_macros=(),
        cxx_flags=("-O3",),
        nvcc_flags=(),
        cuda=True,
        cuda_home="/usr/local/cuda",
        build_temp=str(tmp_path / "obj"),
        build_lib=str(tmp_path / "lib"),
        jobs=16,
        requested_limited_api="0x03090000",
    )
    (tmp_path / "compile.json").write_text(base.to_json())
    last = {"ninja": "/usr/bin/ninja", "link": ["c++", "-o", "x.so"], "shared_object": str(so)}
    (tmp_path / "result.json").write_text(json.dumps(last))
    moved = CompileSpec(**{**base.__dict__, "schedule": ("/p/b.cu", "/p/a.cu"), "jobs": 3})
    direct = _direct_commands(tmp_path, moved)
    assert direct is not None and direct[0][-2:] == ["-j", "3"] and direct[1][-1] == "x.so"
    flagged = CompileSpec(**{**base.__dict__, "cxx_flags": ("-O2",)})
    assert _direct_commands(tmp_path, flagged) is None
