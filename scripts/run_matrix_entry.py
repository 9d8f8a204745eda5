#!/usr/bin/env python3
"""Run one release-matrix entry's build steps on this machine, without the container.

    .venv/bin/python scripts/run_matrix_entry.py torch213-cxx11-cpu-x86_64-linux

This reads ``.github/workflows/release.yml`` and runs the workflow's own step scripts:

1. the ``plan`` job's ``matrix`` step (``kernelwheel matrix $KERNEL_PATH --json``), which gives the
   variant's matrix entry exactly as the build job receives it;
2. the ``build`` job's ``build``, ``check`` and ``wheel`` steps (``kernelwheel build --only NAME``,
   ``kernelwheel check``, then find the one wheel the entry names), with ``${{ matrix.* }}`` from
   that entry.

The build job's other steps are replaced by this machine: ``image`` (Python and compilers in the
container) and ``install`` (``pip install .``) by the interpreter running this script and the
``kernelwheel`` beside it; checkout, cache and upload (``uses:`` steps) by the working tree and
``--output-dir``. So the wheel has the name the workflow uploads. Differences that remain: the
host's compilers and glibc (outside the manylinux_2_28 image, the build's repair or ``kernelwheel
check`` may find symbol versions newer than glibc 2.28 allows: that is why the workflow builds in
the image), and for CUDA 11.8/12.x the host's CUDA toolkit instead of the image's.

Only ``${{ <context>.<key> }}`` references to matrix, env, steps, inputs, vars and secrets (this
machine's ``KERNELWHEEL_*`` variables) are evaluated (an unset input or variable is empty, as on a
tag push in a repository without variables); the shared steps must not use any other expression,
so any other is an error here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"

PLAN_JOB = "plan"
PLAN_STEPS = ("matrix",)  # the step whose output the build matrix is made of
BUILD_JOB = "build"
LOCAL_STEPS = ("build", "check", "wheel")  # run here exactly as in the build job
# prepare the container and choose the compiler cache's storage; replaced by this machine
SETUP_STEPS = ("image", "install", "ccache")

_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_REFERENCE = re.compile(r"([A-Za-z_][\w-]*)((?:\.[A-Za-z_][\w-]*)+)")
_STRICT = ("matrix", "steps")  # a missing key there is a mistake in the workflow
_HOST_ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_CI_UNSET = ("KERNELWHEEL_BUILD", "KERNELWHEEL_SKIP", "KERNELWHEEL_ARCHS", "KERNELWHEEL_RECIPES")


class WorkflowError(Exception):
    """The workflow uses something this runner cannot reproduce."""


class StepFailed(Exception):
    def __init__(self, job: str, step: str, returncode: int) -> None:
        super().__init__(f"step '{step}' of '{job}' failed (exit {returncode})")
        self.job, self.step, self.returncode = job, step, returncode


def load_workflow(path: Path = WORKFLOW) -> dict[str, Any]:
    """The workflow as a dict; YAML 1.1 reads the key ``on`` as True, so it is put back."""
    data: dict[Any, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:
        data["on"] = data.pop(True)
    return data


def to_string(value: Any) -> str:
    """An expression value as GitHub Actions writes it into a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def evaluate(text: Any, contexts: Mapping[str, Any], strict: Collection[str] = _STRICT) -> str:
    """Replace each ``${{ context.key[.key...] }}`` in ``text``; anything else is an error."""

    def replace(match: re.Match[str]) -> str:
        expression = match.group(1)
        reference = _REFERENCE.fullmatch(expression)
        if reference is None or reference.group(1) not in contexts:
            raise WorkflowError(
                f"unsupported expression '${{{{ {expression} }}}}' in a step run locally: "
                f"use a plain reference to {', '.join(contexts)}"
            )
        name = reference.group(1)
        value: Any = contexts[name]
        for key in reference.group(2)[1:].split("."):
            if isinstance(value, Mapping) and key in value:
                value = value[key]
            elif name in strict:
                raise WorkflowError(f"'${{{{ {expression} }}}}': no key {key!r}")
            else:
                return ""
        return to_string(value)

    return _EXPRESSION.sub(replace, to_string(text))


def read_commands_file(path: Path) -> dict[str, str]:
    """Parse a $GITHUB_OUTPUT / $GITHUB_ENV file: ``key=value`` and ``key<<DELIM`` blocks."""
    values: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            block: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                block.append(lines[i])
                i += 1
            if i == len(lines):
                raise WorkflowError(f"{path.name}: no closing {delimiter!r} for {key!r}")
            i += 1
            values[key] = "\n".join(block)
        elif "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
        else:
            raise WorkflowError(f"{path.name}: cannot read line {line!r}")
    return values


class Runner:
    """Runs chosen ``run:`` steps of one workflow's jobs, in order, with GitHub's bash."""

    def __init__(
        self,
        workflow: Mapping[str, Any],
        *,
        workdir: Path,
        temp_dir: Path,
        base_env: Mapping[str, str] | None = None,
        inputs: Mapping[str, Any] | None = None,
        variables: Mapping[str, str] | None = None,
        echo: Callable[[str], None] = print,
    ) -> None:
        self.workflow = workflow
        self.workdir = workdir
        self.temp_dir = temp_dir
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.inputs = dict(inputs or {})
        self.variables = dict(variables or {})
        self.echo = echo
        self.summary = temp_dir / "step-summary.md"

    def job(self, job_id: str) -> Mapping[str, Any]:
        jobs: Mapping[str, Any] = self.workflow["jobs"]
        if job_id not in jobs:
            raise WorkflowError(f"the workflow has no job {job_id!r}")
        job: Mapping[str, Any] = jobs[job_id]
        return job

    def run_job(
        self,
        job_id: str,
        step_ids: Iterable[str],
        *,
        matrix: Mapping[str, Any] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> dict[str, dict[str, str]]:
        """Run the steps of ``job_id`` whose ids are in ``step_ids``; return their outputs.

        ``overrides`` replace variables of the workflow's and the job's ``env``."""
        job = self.job(job_id)
        wanted = tuple(step_ids)
        steps = [s for s in job.get("steps", []) if s.get("id") in wanted]
        missing = set(wanted) - {s["id"] for s in steps}
        if missing:
            raise WorkflowError(f"job {job_id!r} has no step with id {sorted(missing)}")
        shell = (
            job.get("defaults", {}).get("run", {}).get("shell")
            or self.workflow.get("defaults", {}).get("run", {}).get("shell")
            or "bash"
        )
        if shell != "bash":
            raise WorkflowError(f"job {job_id!r} runs its steps with {shell!r}; only bash is run")
        contexts: dict[str, Any] = {
            "matrix": dict(matrix or {}),
            "inputs": self.inputs,
            "vars": self.variables,
            # A secret the steps read (KERNELWHEEL_CCACHE_REMOTE): this machine's own variable
            "secrets": {k: v for k, v in os.environ.items() if k.startswith("KERNELWHEEL_")},
            "steps": {},
            "env": {},
        }
        for layer in (self.workflow.get("env", {}), job.get("env", {})):
            for key, value in layer.items():
                contexts["env"][key] = evaluate(value, contexts)
        contexts["env"].update(overrides or {})
        return self.run_steps(job_id, steps, contexts)

    def run_steps(
        self, label: str, steps: Iterable[Mapping[str, Any]], contexts: dict[str, Any]
    ) -> dict[str, dict[str, str]]:
        """Run ``run:`` steps in order (a job's, or a composite action's) with ``contexts``;
        ``contexts["env"]`` holds the variables of the enclosing levels (workflow, job)."""
        env = dict(self.base_env)
        env.update(RUNNER_TEMP=str(self.temp_dir), GITHUB_WORKSPACE=str(self.workdir))
        env["GITHUB_STEP_SUMMARY"] = str(self.summary)
        env.update(contexts.setdefault("env", {}))
        contexts.setdefault("steps", {})
        outputs: dict[str, dict[str, str]] = {}
        for step in steps:
            step_id = step["id"]
            if "run" not in step or "uses" in step:
                raise WorkflowError(f"step {step_id!r} of {label!r} is not a run: step")
            if "if" in step:
                raise WorkflowError(f"step {step_id!r} of {label!r} is conditional")
            step_env = dict(env)
            for key, value in step.get("env", {}).items():
                step_env[key] = evaluate(value, contexts)
            outputs[step_id] = self._run_step(label, step, step_env, env, contexts)
            contexts["steps"][step_id] = {"outputs": outputs[step_id]}
        return outputs

    def _run_step(
        self,
        label: str,
        step: Mapping[str, Any],
        step_env: dict[str, str],
        job_env: dict[str, str],
        contexts: dict[str, Any],
    ) -> dict[str, str]:
        step_id = step["id"]
        script_text = evaluate(step["run"], contexts)
        files = {
            name: self.temp_dir / f"{label}-{step_id}.{name.lower()}"
            for name in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH")
        }
        for name, path in files.items():
            path.write_text("")
            step_env[name] = str(path)
        script = self.temp_dir / f"{label}-{step_id}.sh"
        script.write_text(script_text, encoding="utf-8")
        cwd = self.workdir / evaluate(step.get("working-directory", "."), contexts)
        self.echo(f"==> {label} / {step.get('name', step_id)}")
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=cwd,
            env=step_env,
            check=False,
        )
        if proc.returncode != 0:
            raise StepFailed(label, step_id, proc.returncode)
        # What a step writes to $GITHUB_ENV / $GITHUB_PATH holds for the job's later steps.
        for key, value in read_commands_file(files["GITHUB_ENV"]).items():
            job_env[key] = contexts["env"][key] = value
        added = [p for p in files["GITHUB_PATH"].read_text().splitlines() if p.strip()]
        if added:
            job_env["PATH"] = os.pathsep.join([*reversed(added), job_env.get("PATH", "")])
        return read_commands_file(files["GITHUB_OUTPUT"])


def plan_matrix(runner: Runner) -> dict[str, Any]:
    """The plan job's ``matrix`` output: ``kernelwheel matrix --json`` as the workflow runs it."""
    outputs = runner.run_job(PLAN_JOB, PLAN_STEPS)
    plan_job = runner.job(PLAN_JOB)
    expression = plan_job["outputs"]["matrix"]
    text = evaluate(expression, {"steps": {k: {"outputs": v} for k, v in outputs.items()}})
    matrix: dict[str, Any] = json.loads(text)
    return matrix


def find_entry(matrix: Mapping[str, Any], name: str) -> dict[str, Any]:
    for entry in matrix["include"]:
        if entry["name"] == name:
            found: dict[str, Any] = entry
            return found
    for rejected in matrix.get("rejected", []):
        if rejected["name"] == name:
            raise WorkflowError(f"{name} is left out of the matrix: {rejected['reason']}")
    names = "\n  ".join(e["name"] for e in matrix["include"])
    raise WorkflowError(f"{name} is not in the release matrix; its variants are:\n  {names}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_matrix_entry.py",
        description="Run one release-matrix entry's build steps (build, check, record the "
        "wheel) from .github/workflows/release.yml on this machine, without the container.",
        epilog="example: .venv/bin/python scripts/run_matrix_entry.py "
        "torch213-cxx11-cpu-x86_64-linux",
    )
    parser.add_argument("name", nargs="?", help="the variant (a matrix entry's name)")
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="where the wheel and logs/ go (default: wheelhouse/NAME); its old wheels are removed",
    )
    parser.add_argument("--workflow", type=Path, default=WORKFLOW, help=argparse.SUPPRESS)
    parser.add_argument(
        "--list", action="store_true", help="print the matrix entries' names and exit"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.list and not args.name:
        _parser().error("give a variant NAME (or --list)")
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "kernelwheel").exists():
        print(
            f"error: no kernelwheel beside {sys.executable}\n"
            "  fix: run this with the Python that has kernelwheel installed, e.g. "
            ".venv/bin/python scripts/run_matrix_entry.py NAME (after bash scripts/test.sh)",
            file=sys.stderr,
        )
        return 2
    # As on a runner: no selection from this shell's environment (the plan would differ).
    env = {k: v for k, v in os.environ.items() if k not in _CI_UNSET}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    with tempfile.TemporaryDirectory(prefix="run-matrix-entry-") as tmp:
        runner = Runner(
            load_workflow(args.workflow),
            workdir=REPO,
            temp_dir=Path(tmp),
            base_env=env,
            echo=lambda line: print(line, flush=True),
        )
        try:
            matrix = plan_matrix(runner)
            if args.list:
                print("\n".join(e["name"] for e in matrix["include"]))
                return 0
            entry = find_entry(matrix, args.name)
            host = _HOST_ARCHES.get(platform.machine().lower(), platform.machine())
            if entry["arch"] != host:
                raise WorkflowError(
                    f"{args.name} builds on {entry['arch']} (runner {entry['runner']}); "
                    f"this machine is {host}"
                )
            out_dir = (args.output_dir or REPO / "wheelhouse" / args.name).resolve()
            out_dir.mkdir(parents=True, exist_ok=True)
            for stale in out_dir.glob("*.whl"):
                stale.unlink()  # the job starts from an empty wheelhouse
            outputs = runner.run_job(
                BUILD_JOB, LOCAL_STEPS, matrix=entry, overrides={"WHEELHOUSE": str(out_dir)}
            )
        except WorkflowError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except StepFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            if exc.step in ("build", "check"):
                print(
                    "  note: outside the manylinux_2_28 image the host's compilers and glibc may "
                    "be newer than manylinux_2_28 allows; the release workflow builds in the image",
                    file=sys.stderr,
                )
            return exc.returncode
        print(f"{entry['name']}: {outputs['wheel']['wheel']}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
