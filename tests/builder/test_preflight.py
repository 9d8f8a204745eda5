"""A variant this machine cannot build (its "system" CUDA toolkit absent, its torch only on an
index this machine cannot reach) is refused before any environment is made, each with its
reason (issue 32 item 4). The toolkits are fake nvcc scripts; the index a loopback server."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest
from support.http import http_server
from support.requests import build_request
from support.runners import Reply, ScriptedRunner
from support.tinykernel import write_tiny_kernel
from support.venvs import QuickVenv, fake_torch

from kernelwheel.builder import preflight
from kernelwheel.cli import main
from kernelwheel.compat.gpus import Gpus, query_gpus
from kernelwheel.errors import ToolchainError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.recipes import VariantRecipe, load_recipes
from kernelwheel.model.sources import PipSources
from kernelwheel.model.variant import Arch, Variant
from kernelwheel.plan.defaults import Machine
from kernelwheel.plan.planning import plan_project
from kernelwheel.toolchain.cross import TARGET_READY, CrossPlan
from kernelwheel.toolchain.envs import READY_MARKER, env_root, env_spec_for

REPO = Path(__file__).resolve().parents[2]
IMG2GRAY = REPO / "kernels" / "img2gray"
CU126 = "torch215-cxx11-cu126-x86_64-linux"


def fake_toolkit(root: Path, version: str) -> Path:
    """A folder whose bin/nvcc answers ``--version`` as CUDA ``version``."""
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {version}, V{version}.1'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return root


def recipe(name: str) -> VariantRecipe:
    return load_recipes().recipe_for(Variant.parse(name))


@pytest.fixture(autouse=True)
def _no_toolkit_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    preflight._unreachable.cache_clear()


def test_a_system_toolchain_needs_exactly_its_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cu126 = recipe(CU126)
    assert cu126.cuda is not None
    problem = preflight.toolkit_problem(cu126)
    assert problem is not None
    assert problem.startswith("needs a CUDA 12.6 toolkit, which no PyPI wheel ships")
    assert "build it in nvidia/cuda:12.6.3-devel-rockylinux8 (its image)" in problem
    # another CUDA 12 is found but not taken: its nvcc would make a build that needs its driver
    monkeypatch.setenv("CUDA_HOME", str(fake_toolkit(tmp_path / "cuda-12.8", "12.8")))
    problem = preflight.toolkit_problem(cu126)
    assert problem is not None and f"{tmp_path / 'cuda-12.8'} (CUDA_HOME) is CUDA 12.8" in problem
    exact = fake_toolkit(tmp_path / "cuda-12.6", "12.6")
    assert preflight.toolkit_problem(cu126, exact) is None  # --cuda-home
    assert preflight.system_toolkit(cu126.cuda, exact) == (exact, "")
    monkeypatch.setenv("PATH", str(exact / "bin"))  # nvcc on PATH
    assert preflight.system_toolkit(cu126.cuda)[0] == exact
    # a PyPI toolchain (13.x) and a CPU variant need nothing from the machine
    assert preflight.toolkit_problem(recipe("torch215-cxx11-cu132-x86_64-linux")) is None
    assert preflight.toolkit_problem(recipe("torch215-cxx11-cpu-x86_64-linux")) is None


def test_the_toolkit_probe_runs_through_the_runner_it_is_given(tmp_path: Path) -> None:
    """The preflight asks each candidate's nvcc for its version through the build's runner: a
    runner that answers "12.6" makes a folder whose nvcc prints nothing a CUDA 12.6 toolkit."""
    cu126 = recipe(CU126)
    assert cu126.cuda is not None
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text("#!/bin/sh\nexit 1\n")  # must not be run
    runner = ScriptedRunner(lambda cmd, cwd: Reply(stdout="Cuda compilation tools, release 12.6"))
    assert preflight.toolkit_problem(cu126, home, runner) is None
    assert runner.commands == [[str(home / "bin" / "nvcc"), "--version"]]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_torch_from_pytorchs_index_needs_the_index_or_a_local_wheel(tmp_path: Path) -> None:
    cu126 = recipe(CU126)
    spec = env_spec_for(cu126, PipSources())
    assert spec.sources.extra_index_urls == ("https://download.pytorch.org/whl/cu126",)
    # an index nobody answers
    dead = VariantRecipe(**{**cu126.__dict__, "index_url": f"http://127.0.0.1:{_closed_port()}/"})
    dead_spec = env_spec_for(dead, PipSources())
    problem = preflight.torch_source_problem(dead, dead_spec, environ={})
    assert problem is not None
    assert problem.startswith(f"torch==2.15.0+cu126 comes from PyTorch's index {dead.index_url}")
    assert "cannot reach" in problem and "--find-links DIR" in problem
    # ... unless a local find-links folder (the build's, or PIP_FIND_LINKS) holds the wheel
    links = tmp_path / "links"
    links.mkdir()
    (links / "torch-2.15.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    assert (
        preflight.torch_source_problem(dead, dead_spec, environ={"PIP_FIND_LINKS": str(links)})
        is None
    )
    with_links = env_spec_for(dead, PipSources(find_links=(str(links),)))
    assert preflight.torch_source_problem(dead, with_links, environ={}) is None
    # a reachable index is enough
    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "index.html").write_text("<html></html>")
    with http_server(tmp_path / "site") as url:
        live = VariantRecipe(**{**cu126.__dict__, "index_url": url + "/"})
        assert preflight.torch_source_problem(live, env_spec_for(live, PipSources()), {}) is None
    # torch from PyPI, or from the user's own --index-url, is not this check's business
    cu132 = recipe("torch215-cxx11-cu132-x86_64-linux")
    assert preflight.torch_source_problem(cu132, env_spec_for(cu132, PipSources()), {}) is None
    own = env_spec_for(dead, PipSources(index_url="https://mirror.example/simple"))
    assert preflight.torch_source_problem(dead, own, {}) is None


def test_build_refuses_every_such_variant_before_any_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # PyTorch's index stands unreachable whatever this machine's network
    monkeypatch.setattr(preflight, "_unreachable", lambda url: "no route to host")
    cache, out = tmp_path / "cache", tmp_path / "wheelhouse"
    common = ["--cache-dir", str(cache), "--output-dir", str(out)]
    selected = "torch215-cxx11-cu1{26,30}-x86_64-linux"
    code = main(["build", str(REPO / "kernels" / "img2gray"), *common, "--build", selected])
    err = capsys.readouterr().err
    assert code == ToolchainError.exit_code
    assert "Traceback" not in err
    assert "2 selected variant(s) cannot be built on this machine:" in err
    assert f"  {CU126}: needs a CUDA 12.6 toolkit, which no PyPI wheel ships" in err
    assert (
        f"  {CU126}: torch==2.15.0+cu126 comes from PyTorch's index "
        "https://download.pytorch.org/whl/cu126, which this machine cannot reach (no route to host)"
    ) in err
    assert "  torch215-cxx11-cu130-x86_64-linux: torch==2.15.0+cu130 comes from" in err
    assert "kernelwheel matrix --json` gives each variant's build image" in err
    assert not (cache / "envs").exists() and not out.exists()  # no environment, no wheel


def test_the_default_falls_back_to_a_variant_this_machine_can_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # This machine's case: no GPU, no venv, PyTorch's index out of reach. torch 2.13's CPU
    # environment is cached (its ready marker), so the default falls back to it, naming the
    # newer ones passed over; with nothing cached, the error lists the fixes that work.
    monkeypatch.setattr(preflight, "_unreachable", lambda url: "no route to host")
    no_gpu = Machine(Arch.host(), Gpus((), "nvidia-smi: not found"))
    cached = recipe(f"torch213-cxx11-cpu-{Arch.host().value}-linux")
    cache = tmp_path / "cache"
    marker = env_root(env_spec_for(cached, PipSources()), cache) / READY_MARKER
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    planned = plan_project(IMG2GRAY, {"cache_dir": str(cache)}, env={})
    selection = preflight.select_buildable(planned, machine=no_gpu)
    assert selection.default is not None and selection.recipes == (cached,)
    notes = [n for n in selection.default.notes if n.startswith("not ")]
    assert [n.split(":")[0] for n in notes] == [
        f"not torch215-cxx11-cpu-{Arch.host().value}-linux",
        f"not torch214-cxx11-cpu-{Arch.host().value}-linux",
    ]
    assert all("cannot reach (no route to host)" in n for n in notes)
    # a selection is the user's: nothing is probed or replaced
    chosen = preflight.select_buildable(planned, ["torch215-*-cpu-x86_64-linux"], machine=no_gpu)
    assert [r.name for r in chosen.recipes] == ["torch215-cxx11-cpu-x86_64-linux"]
    # nothing cached: refused before anything is made, with the fixes in order, never --skip
    empty = plan_project(IMG2GRAY, {"cache_dir": str(tmp_path / "empty")}, env={})
    with pytest.raises(ToolchainError) as info:
        preflight.select_buildable(empty, machine=no_gpu)
    text = str(info.value)
    assert "can get the torch of none of the default's candidates" in text
    assert (
        text.index("1. build in an interpreter that holds torch")
        < text.index("2. build a variant this machine can get: --variant torch215-cxx11-cu132")
        < text.index("3. fetch the torch wheel")
    )
    assert "--skip" not in text
    assert not (tmp_path / "empty").exists()
    # the CLI's dry run prints the variant the build would make (on this machine's facts)
    if not query_gpus().present:
        monkeypatch.delenv("VIRTUAL_ENV", raising=False)
        args = ["build", str(IMG2GRAY), "--cache-dir", str(cache), "--print-build-identifiers"]
        assert main(args) == 0
        assert capsys.readouterr().out.split() == [cached.name]


def test_a_cross_builds_target_torch_needs_its_index_its_archs_wheel_or_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch213-cxx11-cpu-aarch64-linux with PyTorch's index out of reach passed the preflight
    # (the host's x86_64 wheel in PIP_FIND_LINKS counted for it) and failed in pip download
    monkeypatch.setattr(preflight, "_unreachable", lambda url: "no route to host")
    variant = Variant.parse("torch213-cxx11-cpu-aarch64-linux")
    target = env_spec_for(recipe(variant.name), PipSources())
    cross = CrossPlan(variant, compiler=None, host_env=None, target_env=target)
    req = build_request(write_tiny_kernel(tmp_path / "p"), variant, cross=cross)
    cache = tmp_path / "cache"
    problem = preflight.target_problem(req, cache)
    assert problem is not None and problem.startswith(
        "its aarch64 target's torch==2.13.0+cpu comes from PyTorch's index"
    )
    links = tmp_path / "links"
    links.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    assert preflight.target_problem(req, cache) == problem
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_aarch64.whl").write_bytes(b"")
    assert preflight.target_problem(req, cache) is None
    monkeypatch.delenv("PIP_FIND_LINKS")
    # a target sysroot unpacked by an earlier build needs no index
    root = cache / "targets" / f"aarch64-py3.11-{cross.target_spec('3.11').digest()}"
    root.mkdir(parents=True)
    assert preflight.target_problem(req, cache) == problem  # half-made: no ready marker
    (root / TARGET_READY).write_text("{}")
    assert preflight.target_problem(req, cache) is None


def cuda_only(root: Path) -> Path:
    """A project whose one kernel is CUDA (kernels-community's yoso): nothing runs without a GPU."""
    for rel in ("csrc/k.cu", "torch-ext/binding.cpp", "torch-ext/konly/__init__.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// made up\n")
    (root / "build.toml").write_text(
        '[general]\nname = "konly"\nversion = 0\nlicense = "MIT"\nbackends = ["cuda"]\n\n'
        '[torch]\nsrc = ["torch-ext/binding.cpp"]\n\n'
        '[kernel.k]\nbackend = "cuda"\ndepends = ["torch"]\nsrc = ["csrc/k.cu"]\n'
    )
    return root


def test_a_cuda_only_default_without_gpu_takes_a_torch_already_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # yoso on a machine with no GPU: the default was torch 2.15 cu132, newest, whose torch pip
    # could not find here (after 24 s), while torch 2.14 cu130's environment was cached; no
    # CUDA variant runs here, so the one already here is taken, the newer ones named.
    host = Arch.host().value
    no_gpu = Machine(Arch.host(), Gpus((), "nvidia-smi: not found"))
    project = cuda_only(tmp_path / "konly")
    cache = tmp_path / "cache"
    cached = recipe(f"torch214-cxx11-cu130-{host}-linux")
    marker = env_root(env_spec_for(cached, PipSources()), cache) / READY_MARKER
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    planned = plan_project(project, {"cache_dir": str(cache)}, env={})
    selection = preflight.select_buildable(planned, machine=no_gpu)
    assert selection.default is not None and selection.recipes == (cached,)
    assert "the newest whose torch is already here (no GPU" in selection.default.reason
    newest = f"torch215-cxx11-cu132-{host}-linux"
    assert any(
        n.startswith(f"not {newest} nor the 3 other(s) newer than {cached.name}: ")
        and f"--variant {newest} fetches it" in n
        for n in selection.default.notes
    )
    # a GPU here: the newest, as before (the cache decides nothing)
    gpu = Machine(Arch.host(), Gpus(parse_all(["9.0"]), "nvidia-smi"))
    assert preflight.select_buildable(planned, machine=gpu).recipes[0].name == newest
    # nothing cached: the newest, PyPI's torch taken as within reach (pip says if it is not)
    empty = plan_project(project, {"cache_dir": str(tmp_path / "empty")}, env={})
    assert preflight.select_buildable(empty, machine=no_gpu).recipes[0].name == newest
    # a torch wheel in a --find-links folder counts as here, as a cached environment does
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / f"torch-2.14.1-cp311-cp311-manylinux_2_28_{host}.whl").write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    chosen = preflight.select_buildable(empty, machine=no_gpu)
    assert chosen.recipes == (cached,)


def test_a_variant_whose_torch_is_out_of_reach_names_those_this_machine_can_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `build --variant V` with PyTorch's index out of reach said only that V cannot be built:
    # not that torch 2.13's CPU environment is cached, nor that the active venv holds a torch.
    monkeypatch.setattr(preflight, "_unreachable", lambda url: "no route to host")
    host = Arch.host().value
    cache = tmp_path / "cache"
    cached = recipe(f"torch213-cxx11-cpu-{host}-linux")
    marker = env_root(env_spec_for(cached, PipSources()), cache) / READY_MARKER
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    venv = QuickVenv(tmp_path / "venv", [fake_torch(tmp_path, "2.14.1+cpu", None)])
    monkeypatch.setenv("VIRTUAL_ENV", str(venv.root))
    wanted = f"torch215-cxx11-cpu-{host}-linux"
    common = ["--cache-dir", str(cache), "--output-dir", str(tmp_path / "out")]
    code = main(["build", str(IMG2GRAY), *common, "--variant", wanted])
    err = " ".join(capsys.readouterr().err.split())
    assert code == ToolchainError.exit_code
    assert f"{wanted}: cannot be built on this machine: torch==2.15.0+cpu comes from" in err
    assert (
        "a variant this machine can build instead: "
        f"--variant torch214-cxx11-cpu-{host}-linux --python {venv.python} "
        f"(the torch of the active virtual environment {venv.root}: torch 2.14.1"
    ) in err
    assert "; it needs setuptools and ninja); --variant " in err
    assert f"; --variant {cached.name} (its environment is cached)" in err
    assert "--variant " + wanted not in err  # never the refused one
    assert not (tmp_path / "out").exists()
    # no venv, nothing cached: the variants whose torch PyPI serves, by name
    monkeypatch.delenv("VIRTUAL_ENV")
    common = ["--cache-dir", str(tmp_path / "empty"), "--output-dir", str(tmp_path / "out")]
    assert main(["build", str(IMG2GRAY), *common, "--variant", wanted]) == code
    err = " ".join(capsys.readouterr().err.split())
    assert "a variant this machine can build instead: --variant torch215-cxx11-cu132" in err
    assert "(its torch from PyPI, a CUDA build)" in err
