"""Backends kernelwheel plans but does not compile (ROCm, XPU, Metal, Neuron, TPU, CANN): where
they must be built, and that a build of one stops before anything is made for it."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from support.requests import request_for

from kernelwheel.cli import main
from kernelwheel.compat.gpus import Gpus
from kernelwheel.errors import ToolchainError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.project import KernelProject, load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Arch, BackendKind, Variant
from kernelwheel.plan.defaults import Machine
from kernelwheel.plan.matrix import plan_matrix
from kernelwheel.plan.options import ENV_VARS, resolve_options
from kernelwheel.plan.planning import plan_project, select
from kernelwheel.plan.toolchains import (
    missing_toolchain,
    require_toolchains,
    runner_for,
)

KERNELS = {
    "cuda": "csrc/k.cu",
    "cpu": "csrc/k.cpp",
    "rocm": "csrc/k.hip",
    "xpu": "csrc/k.sycl",
    "metal": "csrc/k.metal",
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def project(tmp_path: Path, *backends: str) -> KernelProject:
    """A kernel 'multi' with one [kernel.*] section per backend."""
    root = tmp_path / "multi"
    for rel in [*KERNELS.values(), "torch-ext/torch_binding.cpp", "torch-ext/multi/__init__.py"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// x\n")
    sections = "".join(
        f'[kernel.k_{b}]\nbackend = "{b}"\nsrc = ["{KERNELS[b]}"]\n' for b in backends
    )
    listed = ", ".join(f'"{b}"' for b in backends)
    (root / "build.toml").write_text(
        textwrap.dedent(f"""\
            [general]
            name = "multi"
            version = "0.1.0"
            backends = [{listed}]

            [torch]
            src = ["torch-ext/torch_binding.cpp"]
            """)
        + sections
    )
    return load_project(root)


@pytest.mark.parametrize(
    ("name", "runner", "reason"),
    [
        ("torch213-cxx11-cu130-aarch64-linux", "ubuntu-24.04-arm", None),
        ("torch213-cxx11-cpu-x86_64-linux", "ubuntu-24.04", None),
        ("torch-metal", "ubuntu-24.04", None),  # noarch: nothing to compile
        (
            "torch213-cxx11-rocm71-x86_64-linux",
            "self-hosted-rocm",
            "no ROCm toolchain: build this variant on a ROCm runner "
            "(runner label self-hosted-rocm)",
        ),
        (
            "torch213-cxx11-xpu20260-x86_64-linux",
            "self-hosted-xpu",
            "no XPU toolchain: build this variant on an XPU runner (runner label self-hosted-xpu)",
        ),
        (
            "torch213-metal-aarch64-darwin",
            "self-hosted-metal",
            "no Metal toolchain: build this variant on a macOS (Metal) runner "
            "(runner label self-hosted-metal)",
        ),
        ("torch29-cxx11-cann83-aarch64-linux", "self-hosted-cann", "no CANN toolchain"),
        ("torch211-cxx11-tpu-x86_64-linux", "self-hosted-tpu", "no TPU toolchain"),
        ("torch29-cxx11-neuron-x86_64-linux", "self-hosted-neuron", "no Neuron toolchain"),
    ],
)
def test_runner_and_reason_per_backend(name: str, runner: str, reason: str | None) -> None:
    variant = Variant.parse(name)
    assert runner_for(variant) == runner
    if reason is None:
        assert missing_toolchain(variant) is None
        require_toolchains([variant])
    else:
        assert (missing_toolchain(variant) or "").startswith(reason)
        with pytest.raises(ToolchainError, match=name) as info:
            require_toolchains([variant])
        assert reason in str(info.value)


def test_require_toolchains_names_every_refused_variant_with_the_skip_that_drops_it() -> None:
    names = [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch212-cxx11-rocm71-x86_64-linux",
        "torch213-cxx11-rocm72-x86_64-linux",
        "torch213-metal-aarch64-darwin",
    ]
    with pytest.raises(ToolchainError) as info:
        require_toolchains(Variant.parse(n) for n in names)
    message = str(info.value)
    assert message.startswith("3 selected variant(s) need a toolchain")
    assert (
        "no ROCm toolchain: build torch212-cxx11-rocm71-x86_64-linux, "
        "torch213-cxx11-rocm72-x86_64-linux on a ROCm runner" in message
    )
    assert "no Metal toolchain: build torch213-metal-aarch64-darwin" in message
    assert "torch213-cxx11-cpu-x86_64-linux" not in message
    assert "--skip '*-rocm*' --skip '*-metal-*'" in message
    require_toolchains(Variant.parse(n) for n in names[:1])  # CPU/CUDA only: no error


def test_request_for_refuses_before_making_anything(tmp_path: Path) -> None:
    kernel = project(tmp_path, "rocm", "cpu")
    recipes = load_recipes()
    options = resolve_options(kernel.root, cli={"cache_dir": str(tmp_path / "cache")})
    recipe = recipes.recipe_for(Variant.parse("torch213-cxx11-rocm71-x86_64-linux"))
    with pytest.raises(ToolchainError, match="no ROCm toolchain"):
        request_for(kernel, recipe, "0.1.0", options, recipes)
    assert not (tmp_path / "cache").exists()


def test_bundled_recipes_plan_rocm_xpu_metal_variants_with_notes(tmp_path: Path) -> None:
    plan = plan_matrix(project(tmp_path, "cpu", "cuda", "rocm", "xpu", "metal"), load_recipes())
    by_kind: dict[str, list[str]] = {}
    for recipe in plan.selected:
        assert recipe.variant.backend is not None
        by_kind.setdefault(recipe.variant.backend.kind.value, []).append(recipe.name)
    assert by_kind["rocm"] == [
        "torch212-cxx11-rocm71-x86_64-linux",
        "torch212-cxx11-rocm72-x86_64-linux",
        "torch213-cxx11-rocm71-x86_64-linux",
        "torch213-cxx11-rocm72-x86_64-linux",
    ]
    assert by_kind["xpu"] == [
        "torch212-cxx11-xpu20253-x86_64-linux",
        "torch213-cxx11-xpu20260-x86_64-linux",
    ]
    assert by_kind["metal"] == ["torch212-metal-aarch64-darwin", "torch213-metal-aarch64-darwin"]
    # A rocm variant compiles the rocm kernels and the CPU ones, as a CUDA variant does.
    assert plan.kernels_for("torch213-cxx11-rocm71-x86_64-linux") == ("k_rocm",)
    notes = "\n".join(plan.notes)
    assert "4 rocm variant(s) planned but not built by kernelwheel (no ROCm toolchain)" in notes
    assert "runner labelled self-hosted-metal" in notes
    cpu_only = plan_matrix(project(tmp_path / "c", "cpu"), load_recipes())
    assert not any("not built by kernelwheel" in note for note in cpu_only.notes)


def test_default_variant_never_picks_a_backend_the_project_lacks(tmp_path: Path) -> None:
    machine = Machine(Arch.X86_64, Gpus(parse_all(["9.0"]), "a test"))

    def default(root: KernelProject) -> Variant:
        (recipe,) = select(plan_project(root.root, {}), machine=machine).recipes
        return recipe.variant

    with pytest.raises(ToolchainError) as info:
        default(project(tmp_path / "m", "metal"))
    message = str(info.value)
    assert message.startswith("multi: none of its backends (metal) can be built here")
    assert "no Metal toolchain: build its variants on a macOS (Metal) runner" in message
    with pytest.raises(ToolchainError, match=r"\(rocm, xpu\)"):
        default(project(tmp_path / "r", "rocm", "xpu"))
    cpu = default(project(tmp_path / "cm", "cpu", "metal"))
    assert cpu.backend is not None and cpu.backend.kind is BackendKind.CPU
    cuda = default(project(tmp_path / "rc", "rocm", "cuda"))
    assert cuda.name == "torch215-cxx11-cu132-x86_64-linux"


# -- the commands --------------------------------------------------------------------------------


def test_matrix_json_lists_the_others_under_elsewhere_with_their_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = project(tmp_path, "cpu", "rocm", "metal")
    assert main(["matrix", str(kernel.root), "--json", "--build", "torch213-*"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in data["include"]] == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cpu-aarch64-linux",
    ]
    elsewhere = {e["name"]: e for e in data["elsewhere"]}
    assert sorted(elsewhere) == [
        "torch213-cxx11-rocm71-x86_64-linux",
        "torch213-cxx11-rocm72-x86_64-linux",
        "torch213-metal-aarch64-darwin",
    ]
    rocm = elsewhere["torch213-cxx11-rocm71-x86_64-linux"]
    assert rocm["runner"] == "self-hosted-rocm"
    assert rocm["reason"].startswith("no ROCm toolchain: build this variant on a ROCm runner")
    assert rocm["torch_requirement"] == "torch==2.13.0+rocm7.1"
    metal = elsewhere["torch213-metal-aarch64-darwin"]
    assert (metal["os"], metal["cxxabi"], metal["local_version"]) == (
        "darwin",
        None,
        "torch2.13.metal",
    )


def test_build_of_such_a_variant_exits_5_before_any_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = project(tmp_path, "cpu", "rocm")
    cache, out = tmp_path / "cache", tmp_path / "wheelhouse"
    common = ["--cache-dir", str(cache), "--output-dir", str(out)]
    code = main(["build", str(kernel.root), "--build", "torch213-*-x86_64-*", *common])
    err = capsys.readouterr().err
    assert code == 5
    assert "2 selected variant(s) need a toolchain kernelwheel does not have" in err
    assert "--skip '*-rocm*'" in err and "Traceback" not in err
    assert not cache.exists() and not out.exists()  # nothing built, not even the CPU variant
    # --print-build-identifiers still lists what the selection names.
    assert main(["build", str(kernel.root), "--build", "torch213-*-x86_64-*", *common[:2],
                 "--print-build-identifiers"]) == 0  # fmt: skip
    assert "torch213-cxx11-rocm71-x86_64-linux" in capsys.readouterr().out


def test_a_project_with_no_backend_built_here_says_so_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = project(tmp_path, "metal")
    for extra in ([], ["--print-build-identifiers"]):
        code = main(["build", str(kernel.root), "--cache-dir", str(tmp_path / "cache"), *extra])
        err = capsys.readouterr().err
        assert code == 5
        assert "multi: none of its backends (metal) can be built here" in err
        assert "Traceback" not in err
    assert not (tmp_path / "cache").exists()


def test_neuron_tpu_cann_are_noarch_only(tmp_path: Path) -> None:
    """Their torch comes from the vendors: a noarch project gets torch-neuron, torch-tpu and
    torch-npu (CANN's name); a compiled project listing one gets a note, no variant."""
    noarch = tmp_path / "na"
    (noarch / "torch-ext" / "na").mkdir(parents=True)
    (noarch / "torch-ext" / "na" / "__init__.py").write_text("")
    (noarch / "build.toml").write_text(
        '[general]\nname = "na"\nversion = 1\nlicense = "MIT"\n'
        'backends = ["neuron", "tpu", "cann"]\n[torch-noarch]\n'
    )
    plan = plan_matrix(load_project(noarch), load_recipes())
    assert sorted(plan.names) == ["torch-neuron", "torch-npu", "torch-tpu"]
    assert all(missing_toolchain(r.variant) is None for r in plan.selected)  # nothing compiles
    mixed = project(tmp_path, "cuda")
    mixed = dataclasses.replace(mixed, backends=("cuda", "neuron"))
    plan = plan_matrix(mixed, load_recipes())
    assert all(
        r.variant.backend and r.variant.backend.kind is BackendKind.CUDA for r in plan.selected
    )
    (note,) = [n for n in plan.notes if n.startswith("backend neuron")]
    assert "noarch variant torch-neuron, so no compiled neuron variant is planned" in note
