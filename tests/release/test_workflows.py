"""The GitHub Actions release workflow, CI workflow and composite action, checked statically and by
running their steps here.

The release workflow must build exactly what ``kernelwheel matrix`` prints: the plan job's own
step is run (through scripts/run_matrix_entry.py's runner) and its output compared with the CLI
called in-process. The integration tests run one matrix entry's build steps, and the composite
action's, on this machine and compare the wheel with the one the entry names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from support.kinds import write_noarch_project
from support.tomlread import loads
from support.wheelread import read_wheel

from kernelwheel.cli import main
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Arch
from kernelwheel.plan.options import resolve_options
from kernelwheel.plan.toolchains import HOSTED_RUNNERS
from kernelwheel.plan.versioning import read_git_state, resolve_version, version_inputs

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / ".github" / "workflows" / "release.yml"
CI = REPO / ".github" / "workflows" / "ci.yml"
ACTION = REPO / "action.yml"
RUNNER_SCRIPT = REPO / "scripts" / "run_matrix_entry.py"
KERNEL = "kernels/img2gray"
SELECTION_VARIABLES = ("KERNELWHEEL_BUILD", "KERNELWHEEL_SKIP", "KERNELWHEEL_ARCHS")
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_matrix_entry", RUNNER_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rme = _load_runner()


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = rme.load_workflow(path)
    return data


@pytest.fixture(scope="module")
def release() -> dict[str, Any]:
    return load(RELEASE)


@pytest.fixture(scope="module")
def ci() -> dict[str, Any]:
    return load(CI)


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    return load(ACTION)


def step(job: dict[str, Any], step_id: str) -> dict[str, Any]:
    found = [s for s in job["steps"] if s.get("id") == step_id]
    assert len(found) == 1, f"one step with id {step_id!r}"
    return found[0]


def uses_steps(job: dict[str, Any], action_name: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").startswith(action_name + "@")]


def clean_env() -> dict[str, str]:
    """This process's environment, without selection variables, with its kernelwheel on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in SELECTION_VARIABLES}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def cli_matrix(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["matrix", str(REPO / KERNEL), "--json", *args]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


# --- release.yml: triggers, permissions, pins ------------------------------------------------


def test_release_runs_on_version_tags_and_manual_dispatch_with_dry_run(
    release: dict[str, Any],
) -> None:
    on = release["on"]
    assert set(on) == {"push", "workflow_dispatch"}
    assert on["push"] == {"tags": ["v*"]}
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["dry-run"]["type"] == "boolean" and inputs["dry-run"]["default"] is True
    assert {"build", "skip"} <= set(inputs)


def test_permissions_are_least_privilege(release: dict[str, Any], ci: dict[str, Any]) -> None:
    assert release["permissions"] == {"contents": "read"}
    assert ci["permissions"] == {"contents": "read"}
    for name, job in release["jobs"].items():
        expected = {"contents": "write"} if name == "publish" else None
        assert job.get("permissions") == expected, name
    for name, job in ci["jobs"].items():
        assert "permissions" not in job, name


@pytest.mark.parametrize("path", [RELEASE, CI, ACTION], ids=lambda p: p.name)
def test_actions_are_pinned_to_full_commit_shas_with_a_version_comment(path: Path) -> None:
    pins: dict[str, str] = {}
    lines = [line for line in path.read_text().splitlines() if re.match(r"\s*-?\s*uses:", line)]
    assert lines
    for line in lines:
        match = re.match(r"\s*-?\s*uses:\s*(\S+)\s*(?:#\s*(\S+))?\s*$", line)
        assert match, line
        ref, comment = match.groups()
        if ref == "./":
            continue
        assert SHA_PIN.match(ref), f"{path.name}: not pinned to a commit SHA: {line.strip()}"
        assert comment and re.fullmatch(r"v\d+(\.\d+)*", comment), f"no version: {line.strip()}"
        name, sha = ref.split("@")
        assert pins.setdefault(name, sha) == sha, f"{name} pinned to two commits"


def test_pins_agree_across_files() -> None:
    pins: dict[str, set[str]] = {}
    for path in (RELEASE, CI, ACTION):
        for ref in re.findall(r"uses:\s*([\w.-]+/[\w./-]+@[0-9a-f]{40})", path.read_text()):
            name, sha = ref.split("@")
            pins.setdefault(name, set()).add(sha)
    assert {"actions/checkout", "actions/upload-artifact", "actions/cache"} <= set(pins)
    assert all(len(shas) == 1 for shas in pins.values()), pins


def test_concurrency_and_timeouts(release: dict[str, Any], ci: dict[str, Any]) -> None:
    assert "github.ref" in release["concurrency"]["group"]
    assert release["concurrency"]["cancel-in-progress"] is False  # never cut a publish short
    assert ci["concurrency"]["cancel-in-progress"] is True
    for workflow in (release, ci):
        for name, job in workflow["jobs"].items():
            assert isinstance(job.get("timeout-minutes"), int), name


@pytest.mark.parametrize("path", [RELEASE, CI, ACTION], ids=lambda p: p.name)
def test_run_scripts_take_values_through_env_not_expressions(path: Path) -> None:
    """No ${{ }} inside run: (script injection; and the local runner runs them verbatim)."""
    data = load(path)
    steps = (
        data["runs"]["steps"]
        if path == ACTION
        else [s for job in data["jobs"].values() for s in job["steps"]]
    )
    for s in steps:
        if "run" in s:
            assert not EXPRESSION.search(s["run"]), s.get("name", s.get("id"))


# --- release.yml: the plan job and the matrix it feeds ----------------------------------------


def test_plan_job_runs_kernelwheel_matrix_json(release: dict[str, Any]) -> None:
    assert release["env"]["KERNEL_PATH"] == KERNEL
    plan = release["jobs"]["plan"]
    matrix_step = step(plan, "matrix")
    assert 'kernelwheel matrix "$KERNEL_PATH" --json' in matrix_step["run"]
    # Dispatch inputs narrow the plan through kernelwheel's own environment layer.
    assert matrix_step["env"] == {
        "KERNELWHEEL_BUILD": "${{ inputs.build }}",
        "KERNELWHEEL_SKIP": "${{ inputs.skip }}",
    }
    assert plan["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"
    assert plan["outputs"]["images"] == "${{ steps.images.outputs.images }}"


def test_build_job_is_the_plans_include_list(release: dict[str, Any]) -> None:
    build = release["jobs"]["build"]
    assert build["needs"] == "plan"
    assert build["strategy"]["matrix"] == {
        "include": "${{ fromJSON(needs.plan.outputs.matrix).include }}"
    }
    assert build["strategy"]["fail-fast"] is False
    assert build["runs-on"] == "${{ matrix.runner }}"
    assert build["container"]["image"] == "${{ fromJSON(needs.plan.outputs.images)[matrix.name] }}"


def test_build_step_builds_exactly_the_entry_then_checks(release: dict[str, Any]) -> None:
    build = release["jobs"]["build"]
    build_step = step(build, "build")
    assert build_step["env"]["VARIANT"] == "${{ matrix.name }}"
    assert re.search(
        r'only=\(--only "\$VARIANT"\)\n.*\n *kernelwheel build "\$KERNEL_PATH" "\$\{only\[@\]\}" '
        r'--output-dir "\$WHEELHOUSE"',
        build_step["run"],
    )
    assert step(build, "check")["run"].strip() == 'kernelwheel check "$WHEELHOUSE"/*.whl'
    wheel_step = step(build, "wheel")
    assert wheel_step["env"]["LOCAL_VERSION"] == "${{ matrix.local_version }}"
    uploads = uses_steps(build, "actions/upload-artifact")
    wheel_upload = [u for u in uploads if u["with"]["name"] == "wheel-${{ matrix.name }}"]
    assert wheel_upload and wheel_upload[0]["with"]["path"] == "${{ steps.wheel.outputs.wheel }}"
    assert wheel_upload[0]["with"]["if-no-files-found"] == "error"
    order = [s.get("id") for s in build["steps"]]
    assert order.index("build") < order.index("check") < order.index("wheel")


def test_each_job_of_a_noarch_project_builds_its_one_wheel_with_every_extra(
    release: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # each job built --only its variant, so the cpu and cuda jobs uploaded two different
    # scale_noarch-1.0.0-py3-none-any.whl, one extra each, and publish kept either
    project = write_noarch_project(tmp_path / "scale")
    assert main(["matrix", str(project), "--json"]) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    assert [e["name"] for e in include] == ["torch-cpu", "torch-cuda"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kernelwheel").write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO / "src"} exec {sys.executable} -m kernelwheel "$@"\n'
    )
    (bin_dir / "kernelwheel").chmod(0o755)
    built = []
    for entry in include:
        house = tmp_path / entry["name"]
        env = {**clean_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}", "HF_REPO_ID": ""}
        env |= {"KERNEL_PATH": str(project), "WHEELHOUSE": str(house), "VARIANT": entry["name"]}
        env["LOCAL_VERSION"] = entry["local_version"] or ""  # null reaches a step as ""
        script = step(release["jobs"]["build"], "build")["run"]
        subprocess.run(["bash", "-e", "-c", script], env=env, check=True, capture_output=True)
        (wheel,) = house.glob("*.whl")
        built.append(wheel.read_bytes())
    assert built[0] == built[1]
    metadata = read_wheel(wheel).metadata
    assert metadata.get_all("Provides-Extra") == ["cpu", "cuda"]


def test_build_environments_are_cached_on_env_digest(release: dict[str, Any]) -> None:
    envs, ccache = uses_steps(release["jobs"]["build"], "actions/cache")
    assert "${{ matrix.env_digest }}" in envs["with"]["key"]
    assert envs["with"]["path"] == "~/.cache/kernelwheel/envs"
    # the local ccache folder per variant, only without the remote storage secret
    assert ccache["with"]["path"] == "~/.cache/kernelwheel/ccache"
    assert "${{ matrix.name }}" in ccache["with"]["key"]
    assert ccache["if"] == "${{ steps.ccache.outputs.remote != 'true' }}"


def test_build_uses_the_remote_compiler_cache_when_a_secret_names_one(
    release: dict[str, Any],
) -> None:
    build = step(release["jobs"]["build"], "build")
    assert build["env"]["KERNELWHEEL_CCACHE_REMOTE"] == "${{ secrets.KERNELWHEEL_CCACHE_REMOTE }}"


def test_every_build_step_is_run_locally_or_replaced_by_this_machine(
    release: dict[str, Any],
) -> None:
    """scripts/run_matrix_entry.py runs LOCAL_STEPS; every other run: step is setup it replaces."""
    ids = [s.get("id") for s in release["jobs"]["build"]["steps"] if "run" in s]
    assert sorted(ids) == sorted(rme.LOCAL_STEPS + rme.SETUP_STEPS)
    for step_id in rme.LOCAL_STEPS:
        assert "if" not in step(release["jobs"]["build"], step_id)


@pytest.mark.parametrize(
    ("inputs", "flags"),
    [
        ({}, []),  # a tag push: the whole matrix
        ({"build": "", "skip": ""}, []),  # a dispatch with the inputs left empty
        (
            {"build": "torch2{13,14}-*", "skip": "*-aarch64-*"},
            ["--build", "torch2{13,14}-*", "--skip", "*-aarch64-*"],
        ),
    ],
    ids=["tag", "dispatch-all", "dispatch-selected"],
)
def test_the_workflow_builds_exactly_the_variants_the_cli_prints(
    release: dict[str, Any],
    inputs: dict[str, str],
    flags: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in SELECTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    runner = rme.Runner(
        release,
        workdir=REPO,
        temp_dir=tmp_path,
        base_env=clean_env(),
        inputs=inputs,
        echo=lambda _: None,
    )
    outputs = runner.run_job("plan", ["matrix", "images"])
    job_outputs = {
        key: rme.evaluate(value, {"steps": {k: {"outputs": v} for k, v in outputs.items()}})
        for key, value in release["jobs"]["plan"]["outputs"].items()
    }
    workflow_plan = json.loads(job_outputs["matrix"])
    # The CLI in-process, filtered as the workflow filters: the inputs become KERNELWHEEL_BUILD/
    # KERNELWHEEL_SKIP (empty counts as unset). The plan, reasons included, is the same.
    for key, value in inputs.items():
        monkeypatch.setenv(f"KERNELWHEEL_{key.upper()}", value)
    assert workflow_plan == cli_matrix([], capsys)
    # ... and the variants are those the equivalent flags select.
    for name in SELECTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert workflow_plan["include"] == cli_matrix(flags, capsys)["include"]
    names = [e["name"] for e in workflow_plan["include"]]
    assert names and len(set(names)) == len(names)
    # Every entry gets an image that carries its toolchain, and a runner of its arch.
    images = json.loads(job_outputs["images"])
    assert sorted(images) == sorted(names)
    for entry in workflow_plan["include"]:
        image = images[entry["name"]]
        assert image == entry["image"], entry["name"]  # the recipes' image, passed through
        assert entry["runner"] in ("ubuntu-24.04", "ubuntu-24.04-arm")
        if entry["toolchain"] == "system":
            assert image.startswith(f"nvidia/cuda:{entry['cuda']}."), entry["name"]
        else:
            assert image.startswith(f"quay.io/pypa/manylinux_2_28_{entry['arch']}:"), entry["name"]


def other_backends_kernel(root: Path, *backends: str) -> Path:
    """A kernel with one [kernel.*] section per backend (cpu, rocm, metal...)."""
    (root / "torch-ext" / "multi").mkdir(parents=True)
    (root / "torch-ext" / "torch_binding.cpp").write_text("")
    (root / "torch-ext" / "multi" / "__init__.py").write_text("")
    sections = ""
    for backend in backends:
        (root / f"k_{backend}.cc").write_text("")
        sections += f'[kernel.k_{backend}]\nbackend = "{backend}"\nsrc = ["k_{backend}.cc"]\n'
    listed = ", ".join(f'"{b}"' for b in backends)
    (root / "build.toml").write_text(
        f'[general]\nname = "multi"\nversion = "0.1.0"\nbackends = [{listed}]\n'
        f'[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n{sections}'
    )
    return root


def test_variants_without_a_toolchain_here_are_listed_not_built(
    release: dict[str, Any], tmp_path: Path
) -> None:
    """ROCm/Metal variants reach the plan's 'elsewhere' list with a placeholder runner label and
    the summary; the build matrix ('include') and the images hold only what the runners build."""
    kernel = other_backends_kernel(tmp_path / "multi", "cpu", "rocm", "metal")
    runner = rme.Runner(
        release,
        workdir=REPO,
        temp_dir=tmp_path,
        base_env=clean_env(),
        inputs={"build": "torch213-*"},
        echo=lambda _: None,
    )
    outputs = runner.run_job("plan", ["matrix", "images"], overrides={"KERNEL_PATH": str(kernel)})
    plan = json.loads(outputs["matrix"]["matrix"])
    assert {e["runner"] for e in plan["include"]} == {"ubuntu-24.04", "ubuntu-24.04-arm"}
    assert all(e["backend"] == "cpu" for e in plan["include"])
    assert {e["name"]: e["runner"] for e in plan["elsewhere"]} == {
        "torch213-cxx11-rocm71-x86_64-linux": "self-hosted-rocm",
        "torch213-cxx11-rocm72-x86_64-linux": "self-hosted-rocm",
        "torch213-metal-aarch64-darwin": "self-hosted-metal",
    }
    assert sorted(json.loads(outputs["images"]["images"])) == sorted(
        e["name"] for e in plan["include"]
    )
    summary = runner.summary.read_text()
    assert "3 variant(s) planned for other runners, not built here" in summary
    assert "| `torch213-metal-aarch64-darwin` | `self-hosted-metal` | no Metal toolchain" in summary
    # A kernel with only such backends fails the plan job, naming the runners they need.
    rocm_only = other_backends_kernel(tmp_path / "rocm", "rocm")
    with pytest.raises(rme.StepFailed) as info:
        runner.run_job("plan", ["matrix"], overrides={"KERNEL_PATH": str(rocm_only)})
    assert info.value.step == "matrix"


def test_an_empty_plan_fails_the_plan_job(release: dict[str, Any], tmp_path: Path) -> None:
    runner = rme.Runner(
        release,
        workdir=REPO,
        temp_dir=tmp_path,
        base_env=clean_env(),
        inputs={"build": "torch999-*"},
        echo=lambda _: None,
    )
    with pytest.raises(rme.StepFailed) as info:
        runner.run_job("plan", ["matrix"])
    assert info.value.step == "matrix"


def test_images_cover_every_toolchain_the_recipes_can_plan() -> None:
    recipes = load_recipes()
    for recipe in recipes.cuda:
        if recipe.source == "system":
            image = recipe.image
            assert image, f"no build image for the system CUDA {recipe.version}"
            # NVIDIA's Rocky Linux 8 images: glibc 2.28, amd64 and arm64.
            assert re.fullmatch(
                rf"nvidia/cuda:{re.escape(recipe.version)}\.\d+-devel-rockylinux8", image
            )
    images = dict(recipes.build_images)
    for arch in HOSTED_RUNNERS:
        image = images[arch]
        assert re.fullmatch(rf"quay\.io/pypa/manylinux_2_28_{arch.value}:[\w.-]+", image)
        assert not image.endswith(":latest")
    # and every variant the recipes describe that kernelwheel compiles has one
    for variant in recipes.variants():
        recipe = recipes.recipe_for(variant)
        if variant.backend is not None and variant.backend.kind.value in ("cpu", "cuda"):
            assert recipe.image, variant.name


def test_publish_gathers_indexes_checksums_and_gates_publishing(release: dict[str, Any]) -> None:
    publish = release["jobs"]["publish"]
    assert publish["needs"] == ["plan", "build"]
    (download_wheels, download_hub) = uses_steps(publish, "actions/download-artifact")
    assert download_wheels["with"]["pattern"] == "wheel-*"
    assert download_wheels["with"]["merge-multiple"] is True
    runs = "\n".join(s.get("run", "") for s in publish["steps"])
    assert "kernelwheel index dist --output" in runs
    assert "sha256sum -- *.whl > SHA256SUMS" in runs
    assert "gh release upload" in runs and "dist/SHA256SUMS" in runs
    dry_run = publish["env"]["DRY_RUN"]
    assert "inputs.dry-run" in dry_run and "refs/tags/v" in dry_run
    release_step = next(s for s in publish["steps"] if "gh release" in s.get("run", ""))
    assert release_step["if"] == "${{ env.DRY_RUN == 'false' }}"
    assert "upload_folder" not in runs and "HfApi" not in runs  # the command, not inline Python
    uploads = [s for s in publish["steps"] if "kernelwheel upload hub" in s.get("run", "")]
    (hub_step,) = [s for s in uploads if "--dry-run" not in s["run"]]
    (plan_step,) = [s for s in uploads if "--dry-run" in s["run"]]
    assert (
        "env.HAS_HF_TOKEN == 'true'" in hub_step["if"]
        and "env.DRY_RUN == 'false'" in hub_step["if"]
    )
    assert '--repo "$HF_REPO_ID"' in hub_step["run"]
    assert hub_step["env"] == {"HF_TOKEN": "${{ secrets.HF_TOKEN }}"}
    assert plan_step["if"] == "${{ env.DRY_RUN == 'true' && env.HF_REPO_ID != '' }}"
    assert "env" not in plan_step  # a dry run needs no token
    assert "env.HF_REPO_ID != ''" in download_hub["if"]


# --- ci.yml and the test command --------------------------------------------------------------


def test_ci_runs_the_readme_test_command_on_pull_requests(ci: dict[str, Any]) -> None:
    assert {"pull_request", "push"} <= set(ci["on"])
    runs = [s["run"].strip() for job in ci["jobs"].values() for s in job["steps"] if "run" in s]
    assert "bash scripts/test.sh" in runs
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in (REPO / "README.md").read_text()


def test_test_script_lints_the_workflows_before_the_tests() -> None:
    lines = [line.strip() for line in (REPO / "scripts" / "test.sh").read_text().splitlines()]
    actionlint = next(i for i, line in enumerate(lines) if line.startswith(".venv/bin/actionlint"))
    pytest_line = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert actionlint < pytest_line


def test_plain_pytest_is_fast_and_the_test_script_runs_everything() -> None:
    """pyproject's addopts leave the integration tests out of a plain `pytest`; scripts/test.sh,
    the README's and CI's command, runs every tier, each with its own marker (a later -m wins;
    tests/release/test_test_script.py runs it). The run is strict: unknown markers and
    settings, warnings and hangs fail it."""
    pytest_ini = loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert shlex.split(pytest_ini["addopts"]) == [
        "-ra",
        "-m",
        "not integration",
        "--strict-markers",
        "--strict-config",
    ]
    assert pytest_ini["filterwarnings"][0] == "error" and pytest_ini["timeout"] > 0
    script = (REPO / "scripts" / "test.sh").read_text()
    assert '-m pytest -m "$marks" -n "$workers" --dist "$dist" --durations=25 "$@"' in script


def test_ci_action_job_uses_the_release_image(ci: dict[str, Any], release: dict[str, Any]) -> None:
    job = ci["jobs"]["action"]
    assert job["container"]["image"] == dict(load_recipes().build_images)[Arch.X86_64]
    assert any(s.get("uses") == "./" for s in job["steps"])


# --- action.yml --------------------------------------------------------------------------------


def test_action_is_composite_and_uses_every_input(action: dict[str, Any]) -> None:
    runs = action["runs"]
    assert runs["using"] == "composite"
    text = yaml.safe_dump(runs)
    for name in action["inputs"]:
        assert f"inputs.{name} " in text or f"inputs.{name}}}" in text, f"input {name} unused"
    used = set(re.findall(r"inputs\.([\w-]+)", text))
    assert used <= set(action["inputs"]), used - set(action["inputs"])
    assert {"path", "build", "skip", "only", "arch", "output-dir"} <= set(action["inputs"])


def test_action_outputs_and_step_references_exist(action: dict[str, Any]) -> None:
    steps = action["runs"]["steps"]
    ids = [s.get("id") for s in steps]
    for name, output in action["outputs"].items():
        match = re.fullmatch(r"\$\{\{ steps\.([\w-]+)\.outputs\.([\w-]+) \}\}", output["value"])
        assert match and match.group(1) in ids, name
    for i, s in enumerate(steps):
        for ref in re.findall(r"steps\.([\w-]+)\.outputs", yaml.safe_dump(s)):
            assert ref in ids[:i], f"step {s.get('name')} reads a later or unknown step {ref}"
        if "run" in s:
            assert s["shell"] == "bash"
    assert {"wheels", "wheel-dir", "variants"} <= set(action["outputs"])


def test_action_plan_step_selects_what_kernelwheel_build_would(
    action: dict[str, Any], tmp_path: Path
) -> None:
    def plan(**inputs: str) -> dict[str, str]:
        defaults = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
        runner = rme.Runner(
            action, workdir=REPO, temp_dir=tmp_path, base_env=clean_env(), echo=lambda _: None
        )
        contexts = {
            "inputs": {**defaults, "path": KERNEL, **inputs},
            "steps": {"install": {"outputs": {"bin": str(Path(sys.executable).parent)}}},
        }
        (plan_step,) = [s for s in action["runs"]["steps"] if s.get("id") == "plan"]
        outputs: dict[str, str] = runner.run_steps("action", [plan_step], contexts)["plan"]
        return outputs

    only = plan(only="torch213-cxx11-cpu-x86_64-linux")
    assert json.loads(only["variants"]) == ["torch213-cxx11-cpu-x86_64-linux"]
    cache = os.environ.get("KERNELWHEEL_CACHE_DIR") or os.path.expanduser("~/.cache/kernelwheel")
    assert only["envs-dir"] == os.path.join(cache, "envs")
    selected = plan(build="torch2{13,14}-*", skip="*-cu1*", arch="x86_64")
    assert json.loads(selected["variants"]) == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch214-cxx11-cpu-x86_64-linux",
    ]
    assert re.fullmatch(r"[0-9a-f]{32}", selected["cache-key"])
    assert selected["cache-key"] != only["cache-key"]
    assert plan(only="torch213-cxx11-cpu-x86_64-linux")["cache-key"] == only["cache-key"]
    # only ignores build, skip and arch, as the input says (kernelwheel refused them together)
    ignored = plan(only="torch213-cxx11-cpu-x86_64-linux", arch="aarch64", build="torch27-*")
    assert ignored["cache-key"] == only["cache-key"]


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_action_scripts_pass_shellcheck(action: dict[str, Any]) -> None:
    """actionlint checks the workflows' scripts, not a composite action's."""
    for s in action["runs"]["steps"]:
        if "run" in s:
            proc = subprocess.run(
                ["shellcheck", "--shell=bash", "-"],
                input=s["run"],
                capture_output=True,
                text=True,
                check=False,
            )
            assert proc.returncode == 0, f"{s['name']}:\n{proc.stdout}"


# --- the local runner's expression and file handling ------------------------------------------


def test_runner_evaluates_only_plain_context_references() -> None:
    contexts = {"matrix": {"name": "n", "kernels": ["a"]}, "vars": {}, "env": {"X": "1"}}
    assert rme.evaluate("--only ${{ matrix.name }} ${{env.X}}", contexts) == "--only n 1"
    assert rme.evaluate("${{ vars.HF_REPO_ID }}", contexts) == ""
    assert rme.evaluate("${{ matrix.kernels }}", contexts) == '["a"]'
    with pytest.raises(rme.WorkflowError, match="no key"):
        rme.evaluate("${{ matrix.nmae }}", contexts)
    with pytest.raises(rme.WorkflowError, match="unsupported expression"):
        rme.evaluate("${{ github.ref }}", contexts)
    with pytest.raises(rme.WorkflowError, match="unsupported expression"):
        rme.evaluate("${{ matrix.name == 'x' }}", contexts)


def test_runner_reads_github_output_files(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text("a=1\nb<<EOF\nline 1\nline=2\nEOF\nc=x=y\n")
    assert rme.read_commands_file(path) == {"a": "1", "b": "line 1\nline=2", "c": "x=y"}
    path.write_text("b<<EOF\nno end\n")
    with pytest.raises(rme.WorkflowError, match="no closing"):
        rme.read_commands_file(path)


# --- integration: one matrix entry's steps, and the action's, on this machine -----------------


def host_cpu_variant() -> str:
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
        platform.machine().lower()
    )
    if arch is None:
        pytest.skip(f"no CPU variant for {platform.machine()}")
    return f"torch213-cxx11-cpu-{arch}-linux"


def expected_name_prefix(entry: dict[str, Any]) -> str:
    """``<package>-<version>+<local version>-<python abi>-abi3-``: the platform tag follows."""
    project = load_project(REPO / KERNEL)
    # The wheel version by the build's own rules (img2gray: version = 0 and a VERSION file).
    options = resolve_options(project.root, env={})
    inputs = version_inputs(project, options, read_git_state(project.root))
    version = resolve_version(inputs).version
    return f"{project.package}-{version}+{entry['local_version']}-{entry['python_abi']}-abi3-"


def check_wheel_matches_entry(wheel: Path, entry: dict[str, Any]) -> None:
    prefix = expected_name_prefix(entry)
    arch = entry["arch"]
    assert wheel.name in (
        f"{prefix}manylinux_2_28_{arch}.whl",  # repaired and proven (the default)
        f"{prefix}linux_{arch}.whl",
    )
    metadata = read_wheel(wheel).metadata  # verifies RECORD hashes too
    assert metadata["Version"].endswith("+" + entry["local_version"])


def entry_for(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    (entry,) = [e for e in cli_matrix([], capsys)["include"] if e["name"] == name]
    return entry


@pytest.mark.integration
def test_run_matrix_entry_builds_the_wheel_the_entry_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = host_cpu_variant()
    out = tmp_path / "wheelhouse"
    proc = subprocess.run(
        [sys.executable, str(RUNNER_SCRIPT), name, "--output-dir", str(out)],
        cwd=tmp_path,  # the script finds the repository itself
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for header in ("==> plan / kernelwheel matrix", "==> build / Build", "==> build / Check"):
        assert header in proc.stdout
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1
    wheel = wheels[0]
    # The runner's last line names the wheel; `kernelwheel build --only NAME` printed the same.
    assert proc.stdout.rstrip().splitlines()[-1] == f"{name}: {wheel}"
    assert str(wheel) in proc.stdout.splitlines()
    check_wheel_matches_entry(wheel, entry_for(name, capsys))


@pytest.mark.integration
def test_composite_action_builds_and_checks_one_variant(
    action: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = host_cpu_variant()
    defaults = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    out = tmp_path / "wheelhouse"
    inputs = {**defaults, "path": KERNEL, "only": name, "output-dir": str(out)}
    run_steps = [
        dict(s) for s in action["runs"]["steps"] if "run" in s and s.get("id") != "install"
    ]
    for s in run_steps:
        assert s.pop("if", "${{ inputs.check == 'true' }}") == "${{ inputs.check == 'true' }}"
        s.setdefault("id", "check")
    runner = rme.Runner(
        action, workdir=REPO, temp_dir=tmp_path, base_env=clean_env(), echo=lambda _: None
    )
    contexts = {
        "inputs": inputs,
        "steps": {"install": {"outputs": {"bin": str(Path(sys.executable).parent)}}},
    }
    outputs = runner.run_steps("action", run_steps, contexts)
    wheels = outputs["build"]["wheels"].splitlines()
    assert json.loads(outputs["plan"]["variants"]) == [name]
    assert len(wheels) == 1 and outputs["build"]["wheel-dir"] == str(out)
    check_wheel_matches_entry(Path(wheels[0]), entry_for(name, capsys))


def test_the_test_script_uses_a_cache_of_its_own_sharing_the_environments(tmp_path: Path) -> None:
    """Issue 30: the suite's builds must not evict the user's reuse records: scripts/test.sh
    points KERNELWHEEL_CACHE_DIR at a cache of its own, whose envs/, toolkits/ and tools/ are
    the user's (immutable once ready, made under a lock)."""
    import subprocess

    script = (REPO / "scripts" / "test.sh").read_text()
    start = script.index("USER_CACHE=")
    setup = script[start : script.index("done", start) + len("done")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWHEEL_")}
    env["HOME"] = str(tmp_path)
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", setup + "\necho $KERNELWHEEL_CACHE_DIR"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tests_cache, user_cache = Path(out), tmp_path / ".cache" / "kernelwheel"
    assert tests_cache != user_cache and tests_cache.is_dir()
    for shared in ("envs", "toolkits", "tools"):
        assert (tests_cache / shared).resolve() == (user_cache / shared).resolve()
    assert not (tests_cache / "work").is_symlink()


@pytest.mark.parametrize(
    ("ref_type", "tag", "ok"),
    [("tag", "v0.1.0", True), ("tag", "v0.2.0", False), ("tag", "vnext", False),
     ("branch", "main", True)],
)  # fmt: skip
def test_a_tags_release_refuses_wheels_of_another_version(
    release: dict[str, Any], tmp_path: Path, ref_type: str, tag: str, ok: bool
) -> None:
    """A VERSION file (0.1.0) that the tag (v0.2.0) disagrees with: nothing is published."""
    entry = {"local_version": "torch2.14.cpu.cxx11", "arch": "x86_64"}
    (tmp_path / "dist").mkdir()
    wheel = "img2gray-0.1.0+torch2.14.cpu.cxx11-cp310-abi3-manylinux_2_28_x86_64.whl"
    (tmp_path / "dist" / wheel).write_bytes(b"")
    env = {**clean_env(), "MATRIX": json.dumps({"include": [entry]}), "TAG": tag}
    env["GITHUB_REF_TYPE"] = ref_type
    script = step(release["jobs"]["publish"], "wheels")["run"]
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True)
    assert (done.returncode == 0) == ok, done.stdout
    assert ok or b"do not have the version tag" in done.stdout


def test_a_hub_push_without_its_token_fails_before_anything_is_published(
    release: dict[str, Any],
) -> None:
    """HF_REPO_ID set and HF_TOKEN missing on a real release: no GitHub release, then no push."""
    steps = release["jobs"]["publish"]["steps"]
    guard = step(release["jobs"]["publish"], "hub-token")
    cond = guard["if"]
    assert "env.DRY_RUN == 'false'" in cond and "env.HF_REPO_ID != ''" in cond
    assert "env.HAS_HF_TOKEN != 'true'" in cond
    first_publish = next(i for i, s in enumerate(steps) if "gh release" in s.get("run", ""))
    assert steps.index(guard) < first_publish
    env = {**clean_env(), "HF_REPO_ID": "acme/relu"}
    done = subprocess.run(["bash", "-c", guard["run"]], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "HF_TOKEN is not set" in done.stdout


@pytest.mark.parametrize(("check", "ok"), [("true", True), ("false", True), ("yes", False)])
def test_action_refuses_an_on_off_input_that_is_neither(
    action: dict[str, Any], check: str, ok: bool
) -> None:
    """check: yes compared unequal to 'true': the wheels went unchecked in silence."""
    guard = step({"steps": action["runs"]["steps"]}, "inputs")
    env = {**clean_env(), "CHECK": check, "CACHE": "true"}
    done = subprocess.run(["bash", "-c", guard["run"]], env=env, capture_output=True, text=True)
    assert (done.returncode == 0) == ok
    assert ok or "input check: expected true or false, got 'yes'" in done.stdout


def test_the_copy_instructions_name_every_step_that_installs_this_repository() -> None:
    """docs/release.md tells an author copying release.yml how many `Install kernelwheel` steps
    to change: every step that installs this checkout (`pip install .`) is one of them."""
    doc = " ".join((REPO / "docs" / "release.md").read_text().split())
    said = re.search(r"in its (\d+) `Install kernelwheel` steps", doc)
    assert said is not None
    release = yaml.safe_load(RELEASE.read_text())
    installs = [
        step
        for job in release["jobs"].values()
        for step in job["steps"]
        if re.search(r"pip install [^\n]*\s\.$", step.get("run", "").strip())
    ]
    assert {step["name"] for step in installs} == {"Install kernelwheel"}
    assert len(installs) == int(said.group(1))
    assert "KERNEL_PATH" in release["env"]
