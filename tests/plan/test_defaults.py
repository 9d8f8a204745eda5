"""The default variant (plan.defaults): the user's build when nothing is selected. The facts
about the machine (its GPUs, the torch of --python or of the active virtual environment) are
written here as :class:`Machine` values; the plans come from the real recipes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelwheel.compat.gpus import Gpus
from kernelwheel.compat.rules import Torch
from kernelwheel.errors import ToolchainError, UsageError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.variant import Arch
from kernelwheel.plan.defaults import DefaultBuild, Machine, TorchAt, within_reach
from kernelwheel.plan.options import ENV_VARS
from kernelwheel.plan.planning import plan_project, select

H100 = Gpus(parse_all(["9.0"]), "nvidia-smi")
NO_GPU = Gpus((), "nvidia-smi: not found")
CU130 = Torch("2.11.0+cu130", "cuda", (13, 0), True)
CPU213 = Torch("2.13.0+cpu", "cpu", None, True)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def project(root: Path, backends: tuple[str, ...] = ("cpu", "cuda"), torch: str = "") -> Path:
    kernels = {"cpu": "csrc/k.cpp", "cuda": "csrc/k.cu", "rocm": "csrc/k.hip"}
    text = f"""\
        [general]
        name = "addone"
        version = 0
        edition = 5
        license = "MIT"
        backends = {list(backends)!r}

        [torch]
        src = ["torch-ext/binding.cpp"]
        {torch}
        """
    for backend in backends:
        text += f"""
        [kernel.k_{backend}]
        backend = "{backend}"
        depends = ["torch"]
        src = ["{kernels[backend]}"]
        """
    for rel in (*kernels.values(), "torch-ext/binding.cpp", "torch-ext/addone/__init__.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// made up\n")
    (root / "build.toml").write_text(textwrap.dedent(text).replace('"', '"'))
    return root


def default(root: Path, machine: Machine, **flags: object) -> DefaultBuild:
    selection = select(plan_project(root, flags, env={}), machine=machine)
    assert selection.default is not None
    assert selection.recipes == (selection.default.recipe,)
    return selection.default


def python(torch: Torch | None, machine: str = "x86_64") -> TorchAt:
    return TorchAt("--python python3", torch, machine, None if torch else "No module 'torch'")


def venv(torch: Torch | None) -> TorchAt:
    return TorchAt("the active virtual environment /v", torch, "x86_64", None)


# -- rule 1: the torch of --python -------------------------------------------------------------


def test_python_torch_decides_the_variant(tmp_path: Path) -> None:
    # The issue: `--python python3` with torch 2.11 cu130 got torch 2.14, then was refused.
    got = default(project(tmp_path), Machine(Arch.X86_64, H100, python=python(CU130)))
    assert got.recipe.name == "torch211-cxx11-cu130-x86_64-linux"
    assert "--python python3" in got.reason and "torch 2.11.0+cu130" in got.reason
    cpu = default(project(tmp_path), Machine(Arch.X86_64, H100, python=python(CPU213)))
    assert cpu.recipe.name == "torch213-cxx11-cpu-x86_64-linux"


def test_python_torch_on_another_arch_gets_that_arch(tmp_path: Path) -> None:
    got = default(project(tmp_path), Machine(Arch.X86_64, NO_GPU, python=python(CPU213, "aarch64")))
    assert got.recipe.name == "torch213-cxx11-cpu-aarch64-linux"


def test_a_cpu_only_kernel_builds_its_cpu_variant_for_a_cuda_torch(tmp_path: Path) -> None:
    got = default(project(tmp_path, ("cpu",)), Machine(Arch.X86_64, H100, python=python(CU130)))
    assert got.recipe.name == "torch211-cxx11-cpu-x86_64-linux"
    assert got.gpu_capabilities == ()


def test_python_torch_the_bounds_exclude_is_refused_with_the_plans_reason(tmp_path: Path) -> None:
    root = project(tmp_path, torch='maxver = "2.10"')
    with pytest.raises(UsageError) as info:
        default(root, Machine(Arch.X86_64, H100, python=python(CU130)))
    message = str(info.value)
    assert "--python python3, torch 2.11.0+cu130 (CUDA 13.0, cxx11 ABI)" in message
    assert "torch211-cxx11-cu130-x86_64-linux: torch 2.11 > torch.maxver 2.10" in message
    assert "--variant NAME without --python" in message


def test_python_torch_the_recipes_lack_is_refused(tmp_path: Path) -> None:
    old = Torch("2.5.1+cu124", "cuda", (12, 4), True)
    with pytest.raises(UsageError, match=r"the recipes have no variant for torch 2\.5 cu124"):
        default(project(tmp_path), Machine(Arch.X86_64, H100, python=python(old)))


def test_python_without_torch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"--python python3 has no usable torch \(No module"):
        default(project(tmp_path), Machine(Arch.X86_64, H100, python=python(None)))


# -- rule 2: the active virtual environment ----------------------------------------------------


def test_the_venv_torch_decides_when_no_python_is_given(tmp_path: Path) -> None:
    got = default(project(tmp_path), Machine(Arch.X86_64, H100, venv=venv(CPU213)))
    assert got.recipe.name == "torch213-cxx11-cpu-x86_64-linux"
    assert got.reason.startswith("the torch of the active virtual environment /v")
    # --python outranks the venv.
    both = Machine(Arch.X86_64, H100, python=python(CU130), venv=venv(CPU213))
    assert default(project(tmp_path), both).recipe.name == "torch211-cxx11-cu130-x86_64-linux"


def test_a_venv_torch_the_plan_lacks_falls_back_with_a_note(tmp_path: Path) -> None:
    root = project(tmp_path, torch='maxver = "2.12"')
    got = default(root, Machine(Arch.X86_64, NO_GPU, venv=venv(CPU213)))
    assert got.recipe.name == "torch212-cxx11-cpu-x86_64-linux"
    (note,) = [n for n in got.notes if "virtual environment" in n]
    assert "torch213-cxx11-cpu-x86_64-linux: torch 2.13 > torch.maxver 2.12" in note
    # A venv without torch (kernelwheel's own, say) is passed over too.
    none = default(project(tmp_path / "n"), Machine(Arch.X86_64, NO_GPU, venv=venv(None)))
    assert none.recipe.name == "torch215-cxx11-cpu-x86_64-linux"


# -- rule 3: the newest the plan allows, one this machine runs ---------------------------------


def test_bounds_are_the_plans_not_the_recipes(tmp_path: Path) -> None:
    # The issue: with maxver = "2.12" the default was torch 2.14, which the matrix leaves out.
    got = default(project(tmp_path, torch='maxver = "2.12"'), Machine(Arch.X86_64, H100))
    assert got.recipe.name == "torch212-cxx11-cu132-x86_64-linux"


def test_no_gpu_builds_the_cpu_variant(tmp_path: Path) -> None:
    got = default(project(tmp_path), Machine(Arch.X86_64, NO_GPU))
    assert got.recipe.name == "torch215-cxx11-cpu-x86_64-linux"
    assert "no NVIDIA GPU (nvidia-smi: not found)" in got.reason
    gpu = default(project(tmp_path), Machine(Arch.AARCH64, H100))
    assert gpu.recipe.name == "torch215-cxx11-cu132-aarch64-linux"


def test_a_cuda_only_kernel_without_gpu_says_its_ops_cannot_run_here(tmp_path: Path) -> None:
    got = default(project(tmp_path, ("cuda",)), Machine(Arch.X86_64, NO_GPU))
    assert got.recipe.name == "torch215-cxx11-cu132-x86_64-linux"
    assert any("cannot run here" in n and "no cpu backend" in n for n in got.notes)
    assert got.gpu_capabilities == ()  # no GPU: the full list


def test_the_newest_cuda_the_driver_supports(tmp_path: Path) -> None:
    # The GPU machine's case: driver 580 (CUDA 13.0), and torch 2.15's newest flavour is cu132,
    # which neither the installer nor the wheel's guard would load there.
    got = default(project(tmp_path), Machine(Arch.X86_64, H100, driver=(13, 0)))
    assert got.recipe.name == "torch215-cxx11-cu130-x86_64-linux"
    assert "a driver for CUDA 13.0" in got.reason
    assert any("not torch215-cxx11-cu132-x86_64-linux" in n and "--variant" in n for n in got.notes)
    older = default(project(tmp_path), Machine(Arch.X86_64, H100, driver=(12, 8)))
    assert older.recipe.name == "torch215-cxx11-cu126-x86_64-linux"
    new = default(project(tmp_path), Machine(Arch.X86_64, H100, driver=(13, 2)))
    assert new.recipe.name == "torch215-cxx11-cu132-x86_64-linux"
    assert not any("driver" in n for n in new.notes)


def test_a_driver_older_than_every_cuda_variant_says_so(tmp_path: Path) -> None:
    got = default(project(tmp_path), Machine(Arch.X86_64, H100, driver=(11, 4)))
    assert got.recipe.name == "torch215-cxx11-cu132-x86_64-linux"  # still the project's GPU build
    (note,) = [n for n in got.notes if "driver" in n]
    assert "supports CUDA 11.4" in note and "cannot run here" in note


def test_the_driver_does_not_override_the_users_torch(tmp_path: Path) -> None:
    # rule 1: the build runs in --python's torch; its CUDA is what the wheel must match
    machine = Machine(Arch.X86_64, H100, python=python(CU130), driver=(12, 8))
    assert default(project(tmp_path), machine).recipe.name.startswith("torch211-cxx11-cu130")


def test_cuda_bounds_leaving_no_cuda_variant_give_the_cpu_one(tmp_path: Path) -> None:
    root = project(tmp_path, torch='maxver = "2.10"').parent / tmp_path.name
    text = (
        (root / "build.toml")
        .read_text()
        .replace("[torch]", '[general.cuda]\nminver = "13.1"\n\n[torch]')
    )
    (root / "build.toml").write_text(text)
    got = default(root, Machine(Arch.X86_64, H100))
    assert got.recipe.name == "torch210-cxx11-cpu-x86_64-linux"
    assert any("no CUDA variant" in n for n in got.notes)


def test_nothing_fitting_quotes_the_plans_rejections(tmp_path: Path) -> None:
    # The plan holds ROCm variants only (which kernelwheel does not compile).
    root = project(tmp_path, ("cuda", "rocm"))
    text = (
        (root / "build.toml")
        .read_text()
        .replace("[torch]", '[general.cuda]\nminver = "14.0"\n\n[torch]')
    )
    (root / "build.toml").write_text(text)
    with pytest.raises(UsageError) as info:
        default(root, Machine(Arch.X86_64, H100))
    message = str(info.value)
    assert "has no CPU or CUDA variant for this machine (x86_64)" in message
    assert "torch215-cxx11-cu132-x86_64-linux: CUDA 13.2 < general cuda minver 14.0" in message
    assert "aarch64" not in message  # only this machine's arch


# -- the capabilities of a default CUDA build ----------------------------------------------------


def test_a_default_cuda_build_compiles_for_the_gpus_present(tmp_path: Path) -> None:
    got = default(
        project(tmp_path), Machine(Arch.X86_64, Gpus(parse_all(["8.9", "9.0"]), "nvidia-smi"))
    )
    assert got.gpu_capabilities == parse_all(["8.9", "9.0"])
    (note,) = [n for n in got.notes if n.startswith("compiling for the GPUs of this machine")]
    assert "8.9, 9.0 (nvidia-smi)" in note and "--cuda-capabilities all" in note


def test_the_capabilities_option_keeps_its_list(tmp_path: Path) -> None:
    machine = Machine(Arch.X86_64, H100)
    for value in ("all", "8.0 9.0"):
        got = default(project(tmp_path), machine, cuda_capabilities=value)
        assert got.recipe.name == "torch215-cxx11-cu132-x86_64-linux"
        assert got.gpu_capabilities == () and not got.notes


def test_a_gpu_the_toolkit_does_not_target_gets_the_full_list(tmp_path: Path) -> None:
    got = default(
        project(tmp_path), Machine(Arch.X86_64, Gpus(parse_all(["9.0", "12.3"]), "nvidia-smi"))
    )
    assert got.gpu_capabilities == ()
    cuda = got.recipe.variant.backend.cuda_version if got.recipe.variant.backend else None
    assert any(f"12.3 is not among CUDA {cuda}'s targets" in n for n in got.notes), got.notes


def test_selections_keep_the_full_list_and_probe_nothing(tmp_path: Path) -> None:
    planned = plan_project(project(tmp_path), {"build": "*-cu130-x86_64-*"}, env={})
    # No machine is given: a selection must not need one (it would probe this machine).
    selection = select(planned)
    assert selection.default is None
    assert [r.name for r in selection.recipes] == [r.name for r in planned.plan.selected]
    assert all("-cu130-x86_64-" in r.name for r in selection.recipes) and selection.recipes
    named = select(planned, ["torch213-cxx11-cu130-x86_64-linux"])
    assert named.default is None


def test_the_build_request_of_a_default_targets_its_gpus(tmp_path: Path) -> None:
    from support.requests import request_for

    root = project(tmp_path)
    planned = plan_project(root, {}, env={})
    for gpus, targets, here in ((H100, ("9.0",), True), (NO_GPU, (), False)):
        machine = Machine(Arch.X86_64, gpus, python=python(Torch("2.13.0", "cuda", (13, 0), True)))
        chosen = select(planned, machine=machine).default
        assert chosen is not None and chosen.recipe.name == "torch213-cxx11-cu130-x86_64-linux"
        req = request_for(
            planned.project,
            chosen.recipe,
            "0.0.0",
            planned.options,
            planned.recipes,
            gpu_capabilities=chosen.gpu_capabilities,
        )
        assert req.cuda.for_gpus_here is here
        expected = parse_all(targets) or chosen.recipe.cuda.capabilities  # type: ignore[union-attr]
        assert req.cuda.default_capabilities == expected


def test_cuda_capabilities_all_is_a_keyword_alone() -> None:
    from kernelwheel.plan.options import resolve_options

    assert resolve_options(None, env={}, cli={"cuda_capabilities": "ALL"}).cuda_capabilities == ()
    with pytest.raises(UsageError, match="gives 'all' with other capabilities"):
        resolve_options(None, env={}, cli={"cuda_capabilities": "all 9.0"})


def test_a_cpu_only_kernel_does_not_talk_about_gpus(tmp_path: Path) -> None:
    machine = Machine(Arch.X86_64, Gpus((), "not asked: the project has no cuda backend"))
    got = default(project(tmp_path, ("cpu",)), machine)
    assert got.recipe.name == "torch215-cxx11-cpu-x86_64-linux"
    assert got.reason == "the newest CPU variant the plan allows for this machine (x86_64)"
    assert got.notes == () and got.gpu_capabilities == ()


def test_the_machine_probe_asks_the_driver_only_with_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole default through select(): nvidia-smi scripted, the driver said by the override
    the installer and uv's NVIDIA provider read too."""
    from support.runners import Reply, ScriptedRunner

    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", "13.0")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    planned = plan_project(project(tmp_path), {}, env={})
    gpu = ScriptedRunner(lambda cmd, cwd: Reply(stdout="GPU-1234, 9.0\n"))
    chosen = select(planned, runner=gpu).default
    assert chosen is not None and chosen.recipe.name == "torch215-cxx11-cu130-x86_64-linux"
    assert gpu.commands == [["nvidia-smi", "--query-gpu=uuid,compute_cap", "--format=csv,noheader"]]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # as torch would: no GPU, the CPU build
    hidden = select(planned, runner=gpu).default
    assert hidden is not None and hidden.recipe.name == "torch215-cxx11-cpu-x86_64-linux"
    assert "CUDA_VISIBLE_DEVICES=: no GPU visible" in hidden.reason
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    none = ScriptedRunner(lambda cmd, cwd: Reply(code=9, stderr="NVIDIA-SMI has failed\n"))
    cpu = select(planned, runner=none).default
    assert cpu is not None and cpu.recipe.name == "torch215-cxx11-cpu-x86_64-linux"


# -- a torch this machine can get (within_reach) ------------------------------------------------
# The machine's facts come in as the variants it cannot get, each with why (builder.preflight
# finds them: no cached environment, PyTorch's index out of reach).

OUT_OF_REACH = "torch comes from an index this machine cannot reach"


def test_the_default_falls_back_to_the_newest_variant_whose_torch_is_within_reach(
    tmp_path: Path,
) -> None:
    got = default(project(tmp_path), Machine(Arch.X86_64, NO_GPU))
    assert [r.name for r in got.fallbacks[:3]] == [
        "torch214-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cpu-x86_64-linux",
        "torch212-cxx11-cpu-x86_64-linux",
    ]
    assert all("-cpu-x86_64-" in r.name for r in got.fallbacks)  # the kind this machine runs
    assert within_reach(got, {}) is got  # the default within reach: nothing changes
    cannot = {
        "torch215-cxx11-cpu-x86_64-linux": OUT_OF_REACH,
        "torch214-cxx11-cpu-x86_64-linux": OUT_OF_REACH,
    }
    settled = within_reach(got, cannot)
    assert settled.recipe.name == "torch213-cxx11-cpu-x86_64-linux"
    assert settled.reason.endswith("the newest whose torch this machine can get")
    assert settled.notes[-2:] == (
        f"not torch215-cxx11-cpu-x86_64-linux: {OUT_OF_REACH}",
        f"not torch214-cxx11-cpu-x86_64-linux: {OUT_OF_REACH}",
    )
    # a GPU machine falls back among the CUDA variants its driver loads, never to the CPU one
    gpu = default(project(tmp_path), Machine(Arch.X86_64, H100, driver=(13, 0)))
    cuda = within_reach(gpu, {"torch215-cxx11-cu130-x86_64-linux": OUT_OF_REACH})
    assert cuda.recipe.name == "torch215-cxx11-cu126-x86_64-linux"
    assert cuda.gpu_capabilities == parse_all(["9.0"])  # still this machine's GPUs


def test_a_torch_the_user_named_has_no_fallback(tmp_path: Path) -> None:
    # rules 1 and 2 name a torch: another variant would not load into it
    got = default(project(tmp_path), Machine(Arch.X86_64, NO_GPU, venv=venv(CPU213)))
    assert got.fallbacks == ()
    with pytest.raises(ToolchainError, match="torch213-cxx11-cpu-x86_64-linux: nope"):
        within_reach(got, {got.recipe.name: "nope"})


def test_none_within_reach_lists_the_fixes_that_work_in_order(tmp_path: Path) -> None:
    got = default(project(tmp_path), Machine(Arch.X86_64, NO_GPU))
    cannot = {r.name: OUT_OF_REACH for r in (got.recipe, *got.fallbacks)}
    others = [("torch214-cxx11-cu130-x86_64-linux", "its environment is cached")]
    with pytest.raises(ToolchainError) as info:
        within_reach(got, cannot, others)
    text = str(info.value)
    assert f"torch215-cxx11-cpu-x86_64-linux: {OUT_OF_REACH}" in text
    assert "and the older ones the same way: torch214-cxx11-cpu-x86_64-linux, " in text
    fixes = text.split("fix: one of these, in order:")[1].splitlines()[1:]
    assert [line.split()[0] for line in fixes] == ["1.", "2.", "3."]
    assert "--python PY" in fixes[0]
    assert "--variant torch214-cxx11-cu130-x86_64-linux (its environment is cached)" in fixes[1]
    assert "pip download 'torch==2.15.0+cpu'" in fixes[2] and "--find-links DIR" in fixes[2]
    assert "https://download.pytorch.org/whl/cpu" in fixes[2]
    assert "--skip" not in text  # following it would plan the whole matrix
    # nothing else within reach: the --variant fix is left out rather than named empty
    with pytest.raises(ToolchainError) as bare:
        within_reach(got, cannot)
    assert "--variant" not in str(bare.value) and "2. fetch the torch wheel" in str(bare.value)


def test_a_dev_build_of_a_named_cuda_variant_compiles_for_the_gpus_here(tmp_path: Path) -> None:
    from support.runners import Reply, ScriptedRunner

    from kernelwheel.plan.defaults import capabilities_here

    planned = plan_project(project(tmp_path), {})
    recipe = select(planned, ["torch211-cxx11-cu130-x86_64-linux"]).recipes[0]
    smi = ScriptedRunner(lambda cmd, cwd: Reply(stdout="GPU-aa11, 9.0\n"))
    caps, notes = capabilities_here(recipe, planned.options, environ={}, runner=smi)
    assert caps == parse_all(["9.0"]) and smi.commands[0][0] == "nvidia-smi"
    assert notes[0].startswith("compiling for the GPUs of this machine only: 9.0")
    none = ScriptedRunner(lambda cmd, cwd: Reply(code=9, stderr="no devices"))
    caps, notes = capabilities_here(recipe, planned.options, environ={}, runner=none)
    assert caps == () and "compiling for every capability" in notes[0]
    cpu = select(planned, ["torch211-cxx11-cpu-x86_64-linux"]).recipes[0]
    assert capabilities_here(cpu, planned.options, environ={}, runner=smi) == ((), ())


@pytest.mark.parametrize("torch", [CPU213, CU130])
def test_the_gpus_are_asked_of_a_cuda_torch_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torch: Torch
) -> None:
    # Without nvidia-smi a CUDA torch is asked which GPUs it sees (a torch import); a CPU torch
    # lists none, so no dev run on a machine without a GPU pays that import.
    from support.runners import Reply, ScriptedRunner

    from kernelwheel.plan import defaults

    monkeypatch.setattr(defaults, "_probe", lambda *a, **k: python(torch))
    planned = plan_project(project(tmp_path), {"python": "/v/bin/python"}, env={})
    asked = ScriptedRunner(lambda cmd, cwd: Reply(code=127, stderr="not here"))
    machine = defaults.probe_machine(planned.project, planned.options, {}, asked)
    assert [cmd[0] for cmd in asked.commands][1:] == ([] if torch is CPU213 else ["/v/bin/python"])
    assert not machine.gpus.present
    if torch is CPU213:
        assert machine.gpus.source.endswith("/v/bin/python: a cpu torch, no GPU")


def test_a_dev_build_without_a_gpu_names_the_flag_that_compiles_one_capability(
    tmp_path: Path,
) -> None:
    # a laptop without a GPU compiled every capability of the recipe on every edit, and the
    # note did not say how to ask for fewer (dev and test had no --cuda-capabilities)
    from support.runners import Reply, ScriptedRunner

    from kernelwheel.cli import make_parser
    from kernelwheel.cli._args import option_values
    from kernelwheel.plan.defaults import capabilities_here

    planned = plan_project(project(tmp_path), {})
    recipe = select(planned, ["torch211-cxx11-cu130-x86_64-linux"]).recipes[0]
    none = ScriptedRunner(lambda cmd, cwd: Reply(code=9, stderr="no devices"))
    _, notes = capabilities_here(recipe, planned.options, environ={}, runner=none)
    assert any("--cuda-capabilities 9.0" in note for note in notes)
    for command in ("dev", "test"):
        args = make_parser().parse_args([command, str(tmp_path), "--cuda-capabilities", "9.0"])
        chosen = plan_project(project(tmp_path), option_values(args)).options
        assert chosen.cuda_capabilities == parse_all(["9.0"])
        _, notes = capabilities_here(recipe, chosen, environ={}, runner=none)
        assert not any("--cuda-capabilities 9.0" in note for note in notes)  # already given


def test_a_tvm_ffi_projects_default_ignores_the_interpreters_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `kernelwheel dev --python PY` (or build), PY holding apache-tvm-ffi and no torch, was
    # refused: "--python PY has no usable torch"; an active venv without torch added a note
    from support.kinds import write_tvm_ffi_project

    from kernelwheel.plan.defaults import probe_machine

    root = write_tvm_ffi_project(tmp_path / "t")
    no_torch = tmp_path / "venv" / "bin" / "python"  # never run: nothing is asked of it
    no_torch.parent.mkdir(parents=True)
    no_torch.write_text("#!/bin/sh\nexit 1\n")
    no_torch.chmod(0o755)
    planned = plan_project(root, {"python": str(no_torch)}, env={})
    machine = probe_machine(
        planned.project, planned.options, {"VIRTUAL_ENV": str(no_torch.parents[1])}
    )
    assert machine.python is None and machine.venv is None
    got = default(root, machine)
    assert got.recipe.name == f"tvm-ffi01-cpu-{Arch.host().value}-linux"
    assert not any("torch" in note for note in got.notes), got.notes
