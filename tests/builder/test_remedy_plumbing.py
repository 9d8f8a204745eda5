"""How a build carries the ABI remedies: the header probed through the compiler and written into
the stage, its flags for g++ and nvcc, its digest in the build id, the setting that turns it all
off, and a refusal that names the object and source pulling a symbol in."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from support.requests import build_request

from kernelwheel._util import RUNNER
from kernelwheel.abi.checker import check_shared_object
from kernelwheel.abi.remedies import NO_REMEDIES, remedy_flags
from kernelwheel.abi.report import WheelReport
from kernelwheel.abi.symver import read_version_table
from kernelwheel.builder import codegen
from kernelwheel.builder.compile_plan import Toolchain, plan_compile
from kernelwheel.builder.pipeline import _settings
from kernelwheel.builder.request import BuildRequest
from kernelwheel.builder.steps import (
    _target_libraries,
    pulled_in_by,
    remedy_header,
    write_remedies,
)
from kernelwheel.model.variant import Variant
from kernelwheel.plan.options import resolve_options

CPU = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
BUILD_TOML = """\
[general]
name = "probe"
backends = ["cpu"]

[torch]
src = ["torch-ext/binding.cpp"]

[kernel.host]
backend = "cpu"
depends = ["torch"]
src = ["host/host.cpp"]
"""


def project_with(root: Path) -> Path:
    for rel in ("torch-ext/binding.cpp", "host/host.cpp", "torch-ext/probe/__init__.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// x\n")
    (root / "build.toml").write_text(BUILD_TOML)
    return root


def request(root: Path, variant: Variant) -> BuildRequest:
    return build_request(root, variant)


@needs_gxx
def test_the_header_is_made_from_the_compilers_libc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CXX", "g++")
    names = ("libc.so.6", "libm.so.6", "libnothing.so.9")
    libs = _target_libraries(RUNNER, "g++", names, tmp_path / "cache")
    assert sorted(Path(p).name for p in libs) == ["libc.so.6", "libm.so.6"]
    # kept per file: the second read is the cache's, and the same tables
    assert len(list((tmp_path / "cache" / "abi-tables").glob("*.json"))) == 2
    assert _target_libraries(RUNNER, "g++", names, tmp_path / "cache") == libs
    assert libs == {path: read_version_table(path) for path in libs}
    req = request(project_with(tmp_path), CPU)
    header = remedy_header(req)
    assert header is not None and header.policy == "manylinux_2_28_x86_64"
    assert remedy_header(replace(req, compile=replace(req.compile, abi_remedies=False))) is None
    # Written into the stage, forced into every C++ and CUDA translation unit.
    rs = write_remedies(header, tmp_path / "stage" / "include")
    assert rs.header == tmp_path / "stage" / "include" / "kernelwheel_abi.h"
    assert rs.header.read_text() == header.text
    spec = plan_compile(req, "_x_0123456789", tmp_path / "stage", Toolchain(), rs).spec
    forced = ["-include", str(rs.header)]
    assert " ".join(forced) in " ".join(spec.cxx_flags)
    assert any(str(s).endswith("kernelwheel_compat.cpp") for s in spec.sources)
    assert write_remedies(None, tmp_path / "x") is NO_REMEDIES and not (tmp_path / "x").exists()


@needs_gxx
def test_the_build_id_records_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "g++")
    req = request(project_with(tmp_path), CPU)
    header = remedy_header(req)
    assert header is not None
    ids = {
        codegen.build_id(req.project, CPU, settings=_settings(req, h))
        for h in (header, replace(header, text=header.text + "/* another host */\n"), None)
    }
    assert len(ids) == 3  # another host's header, or none, is another build


def test_without_remedies_the_plan_adds_nothing(tmp_path: Path) -> None:
    req = request(project_with(tmp_path), CPU)
    spec = plan_compile(req, "_x_0123456789", tmp_path / "stage", Toolchain(), NO_REMEDIES).spec
    flags = " ".join(spec.cxx_flags)
    assert "-include" not in flags and "kernelwheel_libc_single_threaded" not in flags
    assert not any("kernelwheel_compat" in s for s in spec.sources)
    with_them = plan_compile(req, "_x_0123456789", tmp_path / "stage", Toolchain(), remedy_flags())
    assert any("kernelwheel_compat" in s for s in with_them.spec.sources)


def test_the_compat_source_links_second_but_compiles_last(tmp_path: Path) -> None:
    """Its object keeps its place in the link (the bytes do not change), but the kernels start
    before it (ninja's file order): it is the cheapest unit."""
    req = request(project_with(tmp_path), CPU)
    spec = plan_compile(req, "_x_0123456789", tmp_path / "stage", Toolchain(), remedy_flags()).spec
    names = [Path(s).name for s in spec.sources]
    assert names == ["binding.cpp", "kernelwheel_compat.cpp", "host.cpp"]
    assert [Path(s).name for s in spec.schedule] == [
        "binding.cpp",
        "host.cpp",
        "kernelwheel_compat.cpp",
    ]
    plain = plan_compile(req, "_x_0123456789", tmp_path / "stage", Toolchain(), NO_REMEDIES).spec
    assert plain.schedule == ()  # the sources' order


def test_the_setting_has_every_layer(tmp_path: Path) -> None:
    assert resolve_options(tmp_path, env={}).abi_remedies is True
    cli = resolve_options(tmp_path, env={}, cli={"abi_remedies": False})
    env = resolve_options(tmp_path, env={"KERNELWHEEL_ABI_REMEDIES": "off"})
    (tmp_path / "pyproject.toml").write_text("[tool.kernelwheel]\nabi-remedies = false\n")
    toml = resolve_options(tmp_path, env={})
    assert (cli.abi_remedies, env.abi_remedies, toml.abi_remedies) == (False, False, False)
    assert (cli.source("abi_remedies"), env.source("abi_remedies")) == (
        "--no-abi-remedies",
        "KERNELWHEEL_ABI_REMEDIES",
    )


@needs_gxx
def test_a_refusal_names_the_object_and_source(tmp_path: Path) -> None:
    """arc4random (glibc 2.36) has no older version: no remedy, so the build is refused, naming
    where it came from."""
    req = request(project_with(tmp_path / "p"), CPU)
    src = req.project.root / "host" / "host.cpp"  # kernel.host's source
    src.write_text(
        "#include <stdlib.h>\n"
        'extern "C" __attribute__((visibility("default"))) unsigned kw_rng() '
        "{ return arc4random(); }\n"
    )
    stage = req.outputs.work_dir / CPU.name
    obj = stage / "obj" / str(src.with_suffix(".o")).lstrip("/")  # where setuptools puts it
    obj.parent.mkdir(parents=True)
    subprocess.run(["g++", "-fPIC", "-c", str(src), "-o", str(obj)], check=True)
    so = tmp_path / "rng.so"
    subprocess.run(["g++", "-shared", "-o", str(so), str(obj)], check=True)
    report = check_shared_object(so, python_abi=None)
    if report.ok:
        pytest.skip("this glibc predates arc4random")
    (violation,) = report.violations
    assert violation.subject == "arc4random" and "manylinux_2_28" in violation.fix
    assert "a function without one needs the older glibc" in violation.fix
    wheel = WheelReport("w.whl", report.policy, "x86_64", None, "cxx11", (report,), (), False)
    where = pulled_in_by(req, wheel)
    rel = obj.relative_to(stage)
    assert where == f"\n  arc4random is pulled in by host/host.cpp (object {rel})"
