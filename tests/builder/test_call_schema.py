"""The package's Python calls of an op read against the op's schema (builder/call_schema.py,
through load_check.call_warnings): each call torch refuses is warned of, and no other."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.requests import build_request
from support.runners import Reply, ScriptedRunner
from support.tinykernel import write_tiny_kernel

from kernelwheel.builder.load_check import LoadReport, call_warnings
from kernelwheel.builder.steps import load_checked
from kernelwheel.log import SilentReporter
from kernelwheel.model.variant import Variant

NS = "_tiny_add_0123456789"
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
# as torch 2.13 prints them (str of each FunctionSchema)
SCHEMAS = (
    "add(Tensor x, Tensor y) -> Tensor",
    "kw(Tensor x, *, float alpha=1., bool flag) -> Tensor",
    "ov(Tensor x) -> Tensor",
    "ov.two(Tensor x, Tensor y) -> Tensor",
    "ov.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)",
)
# each call, and whether torch 2.13 refused it (the integration test below runs them again)
CALLS = {
    "ops.add(t)": True,  # missing value for argument 'y'
    "ops.add(t, t, t)": True,  # expected at most 2 argument(s)
    "ops.add(t, z=t)": True,
    "ops.add(t, x=t)": True,
    "ops.add(x=t, y=t)": False,
    "ops.kw(t, flag=True)": False,
    "ops.kw(t, 2.0, True)": True,  # takes 1 positional argument(s)
    "ops.kw(t)": True,
    "ops.ov(t)": False,
    "ops.ov(t, t)": False,  # the packet: ov.two takes it
    "ops.ov(t, t, t)": True,  # failed to match any schema
    "ops.ov(t, out=t)": False,
    "ops.ov.out(t, t)": True,
    "ops.ov.default(t, t)": True,
    "ops.ov.two(t)": True,
    "ops.ov.two(t, y=t)": False,
    'getattr(ops, "add")(t)': True,
}


def _warned(tmp_path: Path, calls: list[str], schemas: tuple[str, ...] = SCHEMAS) -> list[str]:
    package = tmp_path / "torch-ext" / "pkg"
    package.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"    {call}\n" for call in calls)
    (package / "__init__.py").write_text(f"from ._ops import ops\n\n\ndef f(t):\n{lines}")
    report = LoadReport(ops=tuple(f"{NS}::{s}" for s in schemas))
    return list(call_warnings(report, NS, package, tmp_path))


def test_each_call_torch_refuses_is_warned_of_with_its_line_schema_and_fix(tmp_path: Path) -> None:
    # ops.add(x) of add(Tensor x, Tensor y) built and loaded without a word: the author's
    # test met torch's RuntimeError
    warned = _warned(tmp_path, list(CALLS))
    refused = [f"torch-ext/pkg/__init__.py:{i}:" for i, c in enumerate(CALLS, 5) if CALLS[c]]
    assert [w.split(" ", 2)[1] for w in warned] == refused
    first = warned[0]
    assert first == (
        "warning: torch-ext/pkg/__init__.py:5: ops.add(...) raises RuntimeError, as no schema "
        "of the op accepts it: add(Tensor x, Tensor y) -> Tensor: the call leaves out y, which "
        "it gives no default; pass y=..., or give a default in the ops.def"
    )
    by_line = {w.split(" ", 2)[1]: w for w in warned}
    assert "pass alpha, flag by keyword" in by_line["torch-ext/pkg/__init__.py:11:"]
    assert (
        "passes z=, which it has no argument named (its arguments: x, y)"
        in (by_line["torch-ext/pkg/__init__.py:7:"])
    )
    assert "passes x both by position and by keyword" in by_line["torch-ext/pkg/__init__.py:8:"]
    packet = by_line["torch-ext/pkg/__init__.py:15:"]  # every overload's schema, each its fault
    assert "ov(Tensor x) -> Tensor: the call passes 3" in packet
    assert "ov.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!): the call passes 3" in packet


# the schemas real kernels use (tests/builder/test_cxx_signature.py's, as torch prints them)
# with calls torch accepts, and calls that are not read: no warning
REAL = (
    "lin(Tensor x, Tensor? bias=None) -> Tensor",
    "fill_out(Tensor(a!) out, float v) -> ()",
    "sum_dims(Tensor x, int[] dims, bool keepdim=False) -> Tensor",
    "narrow_sym(Tensor x, SymInt n) -> Tensor",
    "scale_eps(Tensor x, float eps=1.0000000000000001e-05) -> Tensor",
    "cast(Tensor x, ScalarType? dtype=None) -> Tensor",
    'moded(Tensor x, str mode="a, b") -> Tensor',
    "kwonly(Tensor x, *, float alpha=1., bool flag=False) -> Tensor",
    "split2(Tensor x) -> (Tensor, Tensor)",
    "cat_list(Tensor[] xs) -> Tensor",
    "unbind_list(Tensor x) -> Tensor[]",
    "noise(Tensor x, Generator? gen=None) -> Tensor",
    "add_one(Tensor x) -> Tensor",
    "add_one.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)",
    "pad(Tensor x, int[2] s=[1, 2], int? k=None) -> Tensor",
)
FINE = [
    "ops.lin(t)",
    "ops.lin(t, None)",
    "ops.lin(x=t, bias=t)",
    "ops.fill_out(t, 1.0)",
    "ops.sum_dims(t, [0], keepdim=True)",
    "ops.narrow_sym(t, 2)",
    "ops.scale_eps(t, eps=1e-3)",
    "ops.cast(t, dtype=None)",
    "ops.moded(t)",  # a string default with a comma: not read, not judged
    "ops.kwonly(t, alpha=2.0)",
    "ops.split2(t)",
    "ops.cat_list([t, t])",
    "ops.unbind_list(t)",
    "ops.noise(t, gen=None)",
    "ops.add_one(t)",
    "ops.add_one(t, out=t)",
    "ops.add_one.out(t, out=t)",
    "ops.add_one.default(t)",
    "ops.pad(t, [3, 4], 1)",
    "ops.add_one(*t)",  # *args, **kwargs: not judged
    "ops.lin(**t)",
    "ops.undefined(t)",  # no schema: the undefined-op warning's, not this one's
    'getattr(ops, "undefined(")(t)',  # any name getattr quotes
    "ops.add_one.overloads()",
    "ops.add_one",
]


def test_calls_torch_accepts_of_the_schemas_real_kernels_use_are_not_warned_of(
    tmp_path: Path,
) -> None:
    warned = _warned(tmp_path, FINE, REAL)
    assert len(warned) == 1 and warned[0].startswith("warning: the package calls ops.undefined")


# each call in torch itself, against the schemas: the ones it refuses (an accepted call reaches
# the dispatcher, which finds no kernel)
PROBE = """\
import json, sys, torch
lib = torch.library.Library("{ns}", "DEF")
for schema in {schemas!r}:
    lib.define(schema)
ops, t = torch.ops.{ns}, torch.ones(1)
refused = []
for call in {calls!r}:
    try:
        eval(call)
    except NotImplementedError:
        pass
    except RuntimeError:
        refused.append(call)
printed = [str(s) for s in torch._C._jit_get_all_schemas() if s.name.startswith("{ns}")]
print(json.dumps([printed, refused]))
"""


@pytest.mark.integration
def test_the_calls_warned_of_are_those_torch_refuses() -> None:
    from support.builds import build_env
    from support.variants import TORCH213_CPU

    python = str(build_env(TORCH213_CPU).python)
    real = [c for c in FINE if c.endswith(")") and "*" not in c and "undefined" not in c]
    real.remove("ops.add_one.overloads()")
    for schemas, calls, expected in (
        (SCHEMAS, list(CALLS), [call for call, no in CALLS.items() if no]),
        (REAL, real, []),
    ):
        code = PROBE.format(ns=NS, schemas=schemas, calls=calls)
        run = subprocess.run([python, "-c", code], capture_output=True, check=True)
        printed, refused = json.loads(run.stdout)
        assert sorted(printed) == sorted(f"{NS}::{s}" for s in schemas)
        assert refused == expected


def test_the_build_and_every_reusing_run_warn_of_the_call_until_it_is_mended(
    tmp_path: Path,
) -> None:
    # the check's own run, then the dev loop reusing its record: the warning each time, with
    # the package's Python as it is then
    req = build_request(write_tiny_kernel(tmp_path / "p"), Variant.parse(CPU_VARIANT))
    req.log.parent.mkdir(parents=True, exist_ok=True)
    init = req.project.package_dir / "__init__.py"
    init.write_text("from ._ops import ops\n\n\ndef add_one(x):\n    return ops.add_one(x, 1)\n")
    found = {"ops": [f"{NS}::add_one(Tensor x) -> Tensor"]}
    runner = ScriptedRunner(lambda cmd, cwd: Reply(stdout=json.dumps(found) + "\n"))
    record = tmp_path / "dev" / "v.loaded"
    record.parent.mkdir()

    def warned() -> list[str]:
        reporter = SilentReporter()
        so = tmp_path / "x.so"
        load_checked(req, Path("py"), so, NS, reporter, runner, loaded=(record, "a"))
        return [m for _, m in reporter.messages if "RuntimeError" in m]

    first, reused = warned(), warned()
    assert first == reused and len(first) == 1
    assert first[0].startswith("warning: torch-ext/tiny_add/__init__.py:5: ops.add_one(...)")
    init.write_text("from ._ops import ops\n\n\ndef add_one(x):\n    return ops.add_one(x)\n")
    assert warned() == []
