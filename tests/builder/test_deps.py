"""Tests for kernelwheel.toolchain.deps: build.toml's ``depends`` put their headers on the include
path (issue 19 item 3). Planning refuses what cannot be provided before anything compiles;
providing downloads a pinned wheel once, hash-checked, and unpacks only its headers."""

from __future__ import annotations

import hashlib
import sys
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from support.layered import LayeredVenv
from support.variants import TORCH213_CPU, TORCH214_CU130

from kernelwheel.builder.reuse import build_key
from kernelwheel.cli import main
from kernelwheel.compile.compile_spec import CompileSpec
from kernelwheel.errors import ProjectError, ToolchainError, UsageError
from kernelwheel.model.deps import Dependency, HeaderWheel, Provider, load_deps
from kernelwheel.model.project import load_project
from kernelwheel.model.sources import PipSources
from kernelwheel.model.variant import Variant
from kernelwheel.plan.options import Options, resolve_options
from kernelwheel.toolchain.deps import (
    HeaderPlan,
    HeaderSource,
    checkout_version,
    plan_headers,
    provide_headers,
    unpack_headers,
)
from kernelwheel.toolchain.envs import EnvInfo

CUDA = Variant.parse(TORCH214_CU130)
CPU = Variant.parse(TORCH213_CPU)
TABLE = load_deps()


def project(root: Path, cuda_depends: str, *, extra: str = "") -> Path:
    """A CUDA + CPU kernel project; the CUDA kernel has ``depends = [cuda_depends]``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "build.toml").write_text(
        textwrap.dedent(
            f"""\
            [general]
            name = "gemm"
            version = "0.1.0"
            backends = ["cpu", "cuda"]

            [torch]
            src = ["torch-ext/torch_binding.cpp"]

            [kernel.gemm]
            backend = "cuda"
            src = ["csrc/gemm.cu"]
            depends = [{cuda_depends}]

            [kernel.gemm_cpu]
            backend = "cpu"
            src = ["csrc/gemm_cpu.cpp"]
            depends = ["torch"]
            """
        )
        + extra
    )
    for rel in ("csrc/gemm.cu", "csrc/gemm_cpu.cpp", "csrc/gemm_xpu.cpp", "torch-ext/t.cpp"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// source\n")
    (root / "torch-ext/torch_binding.cpp").write_text("// binding\n")
    (root / "torch-ext/gemm").mkdir(parents=True, exist_ok=True)
    (root / "torch-ext/gemm/__init__.py").write_text("")
    return root


def checkout(root: Path, version: str | None, *, util: bool = True) -> Path:
    """A CUTLASS source tree; ``version`` None: no include/cutlass/version.h (CUTLASS 2.10)."""
    (root / "include/cutlass").mkdir(parents=True)
    (root / "include/cutlass/cutlass.h").write_text("#pragma once\n")
    if version is not None:
        major, minor, patch = version.split(".")
        (root / "include/cutlass/version.h").write_text(
            f"#define CUTLASS_MAJOR {major}\n#define CUTLASS_MINOR {minor}\n"
            f"#define CUTLASS_PATCH {patch}\n"
        )
    if util:
        (root / "tools/util/include/cutlass/util").mkdir(parents=True)
    return root


def options(**env: str) -> Options:
    return resolve_options(None, env={f"KERNELWHEEL_{k.upper()}": v for k, v in env.items()})


def plan(root: Path, variant: Variant = CUDA, opts: Options | None = None) -> HeaderPlan:
    return plan_headers(load_project(root), variant, TABLE, opts or options())


# --- planning: where headers come from, refusals up front ------------------------------------


def test_a_pypi_release_comes_from_its_pinned_wheel_and_torch_needs_nothing(
    tmp_path: Path,
) -> None:
    root = project(tmp_path / "p", '"torch", "cutlass_3_8"')
    got = plan(root)
    assert [(s.dependency.name, s.kernels, s.local) for s in got.sources] == [
        ("cutlass_3_8", ("gemm",), None)
    ]
    dep = TABLE.get("cutlass_3_8")
    assert dep is not None and dep.wheel is not None and got.sources[0].wheel == dep.wheel
    assert plan(root, CPU).sources == ()  # the CPU variant does not compile the CUDA kernel


def test_the_plan_carries_the_index_options(tmp_path: Path) -> None:
    root = project(tmp_path / "p", '"cutlass_3_8"')
    got = plan(root, opts=options(no_index="1", find_links=str(tmp_path)))
    assert got.index == PipSources(None, (str(tmp_path),), True)


def test_unknown_name_is_refused_with_a_suggestion_even_in_a_kernel_not_compiled(
    tmp_path: Path,
) -> None:
    root = project(tmp_path / "p", '"cutlass_3_8"')
    with open(root / "build.toml", "a") as fh:
        fh.write('\n[kernel.gemm_xpu]\nbackend = "xpu"\nsrc = ["csrc/gemm_xpu.cpp"]\n')
        fh.write('depends = ["cutlas_3_8"]\n')
    with pytest.raises(ProjectError) as info:
        plan(root, CPU)
    text = str(info.value)
    assert "kernel.gemm_xpu.depends: unknown dependency 'cutlas_3_8'" in text
    assert "did you mean 'cutlass_3_8'?" in text


def test_a_release_pypi_lacks_is_refused_with_the_setting_that_fixes_it(tmp_path: Path) -> None:
    root = project(tmp_path / "p", '"torch", "cutlass_3_9"')
    with pytest.raises(ToolchainError) as info:
        plan(root)
    text = str(info.value)
    assert "depends on cutlass_3_9 (CUTLASS 3.9.2)" in text and "no PyPI wheel" in text
    assert "--branch v3.9.2" in text and "--cutlass-path DIR" in text
    assert "KERNELWHEEL_CUTLASS_PATH" in text and "cutlass_3_9=DIR" in text
    assert plan(root, CPU).sources == ()  # only variants compiling the kernel need it


def test_a_local_checkout_provides_any_release_and_overrides_pypi(tmp_path: Path) -> None:
    src = checkout(tmp_path / "cutlass-3.9.2", "3.9.2")
    root = project(tmp_path / "p", '"cutlass_3_9"')
    got = plan(root, opts=options(cutlass_path=str(src)))
    assert [(s.dependency.name, s.local, s.wheel) for s in got.sources] == [
        ("cutlass_3_9", src, None)
    ]
    pypi_one = project(tmp_path / "q", '"cutlass_3_8"')
    src38 = checkout(tmp_path / "cutlass-3.8.0", "3.8.0")
    assert plan(pypi_one, opts=options(cutlass_path=str(src38))).sources[0].local == src38


def test_a_checkout_of_another_release_is_refused(tmp_path: Path) -> None:
    src = checkout(tmp_path / "cutlass", "3.8.0")
    root = project(tmp_path / "p", '"cutlass_3_9"')
    with pytest.raises(UsageError) as info:
        plan(root, opts=options(cutlass_path=str(src)))
    text = str(info.value)
    assert text.startswith(f"KERNELWHEEL_CUTLASS_PATH {src} holds CUTLASS 3.8.0")
    assert "depends on cutlass_3_9 (CUTLASS 3.9.2)" in text
    assert f"git -C {src} checkout v3.9.2" in text and "cutlass_3_9=DIR" in text


def test_a_checkout_without_version_header_is_taken_as_named(tmp_path: Path) -> None:
    src = checkout(tmp_path / "cutlass-2.10", None)
    root = project(tmp_path / "p", '"cutlass_2_10"')
    assert checkout_version(src, "cutlass") is None
    assert plan(root, opts=options(cutlass_path=str(src))).sources[0].local == src


def test_a_named_checkout_wins_over_the_unnamed_one(tmp_path: Path) -> None:
    other = checkout(tmp_path / "cutlass-3.8.0", "3.8.0")
    named = checkout(tmp_path / "cutlass-3.9.2", "3.9.2")
    root = project(tmp_path / "p", '"cutlass_3_9"')
    setting = f"{other} cutlass_3_9={named}"
    assert plan(root, opts=options(cutlass_path=setting)).sources[0].local == named


def test_a_named_checkout_must_name_a_cutlass_dependency(tmp_path: Path) -> None:
    src = checkout(tmp_path / "cutlass", "3.9.2")
    root = project(tmp_path / "p", '"cutlass_3_9"')
    for name in ("torch", "cutlass_9_9"):
        with pytest.raises(UsageError, match=f"'{name}' is not a CUTLASS dependency"):
            plan(root, opts=options(cutlass_path=f"{name}={src}"))


@pytest.mark.parametrize("name", ["sycl_tla", "metal-cpp"])
def test_a_dependency_without_toolchain_is_refused_only_where_compiled(
    tmp_path: Path, name: str
) -> None:
    root = project(tmp_path / "p", f'"{name}"')
    with pytest.raises(ToolchainError) as info:
        plan(root)
    text = str(info.value)
    assert f"kernel.gemm of {root / 'build.toml'} depends on {name}" in text
    assert "kernelwheel builds no" in text and "kernel-builder" in text
    assert plan(root, CPU).sources == ()


# --- the option: bad local paths are refused where they are set --------------------------------


def test_bad_local_paths_are_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        options(cutlass_path=str(tmp_path / "missing"))
    assert str(info.value).startswith("KERNELWHEEL_CUTLASS_PATH: ")
    assert "missing: no such folder" in str(info.value) and "git clone" in str(info.value)
    src = checkout(tmp_path / "cutlass", "3.8.0")
    with pytest.raises(UsageError) as info:
        resolve_options(None, env={}, cli={"cutlass_path": [str(src / "include")]})
    assert "not a CUTLASS checkout" in str(info.value)
    assert f"pass the folder above it, {src}" in str(info.value)
    with pytest.raises(UsageError, match="twice"):
        options(cutlass_path=f"{src} {src}")
    (tmp_path / "k").mkdir()
    (tmp_path / "k/pyproject.toml").write_text('[tool.kernelwheel]\ncutlass-path = "nope"\n')
    with pytest.raises(ProjectError, match=r"kernelwheel\.cutlass-path: .*k/nope: no such folder"):
        resolve_options(tmp_path / "k", env={})


def test_the_option_in_each_layer(tmp_path: Path) -> None:
    src = checkout(tmp_path / "k/cutlass", "3.9.2")
    (tmp_path / "k/pyproject.toml").write_text(
        '[tool.kernelwheel]\ncutlass-path = ["cutlass_3_9=cutlass"]\n'
    )
    opts = resolve_options(tmp_path / "k", env={})
    assert [(e.dependency, e.path) for e in opts.cutlass_path] == [("cutlass_3_9", src)]
    assert opts.source("cutlass_path") == "[tool.kernelwheel] cutlass-path"
    flag = resolve_options(None, env={}, cli={"cutlass_path": [str(src)]})
    assert (
        flag.cutlass_path[0].dependency is None and flag.source("cutlass_path") == "--cutlass-path"
    )


# --- providing: download once, hash-checked, only the headers ----------------------------------


def fake_wheel(folder: Path, version: str = "9.9.0.0") -> tuple[Path, str]:
    """A nvidia-cutlass wheel with headers, utilities and Python files; (path, sha256)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"nvidia_cutlass-{version}-py3-none-any.whl"
    info = f"nvidia_cutlass-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("cutlass_library/__init__.py", "")
        zf.writestr("cutlass_library/source/include/cutlass/cutlass.h", "#pragma once\n")
        zf.writestr("cutlass_library/source/include/cute/tensor.hpp", "#pragma once\n")
        zf.writestr("cutlass_library/source/tools/util/include/cutlass/util/x.hpp", "//\n")
        zf.writestr("cutlass_library/source/examples/e.cu", "//\n")
        zf.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: nvidia-cutlass\nVersion: {version}\n",
        )
        zf.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr(f"{info}/RECORD", "")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


INCLUDE = ("cutlass_library/source/include", "cutlass_library/source/tools/util/include")


def test_a_wheel_is_downloaded_once_checked_and_only_its_headers_unpacked(tmp_path: Path) -> None:
    wheel, sha = fake_wheel(tmp_path / "links")
    pin = HeaderWheel("nvidia-cutlass", "9.9.0.0", sha, INCLUDE)
    index = PipSources(None, (str(tmp_path / "links"),), True)
    log = tmp_path / "log"
    root = unpack_headers(pin, tmp_path / "cache", Path(sys.executable), index, log)
    assert root == tmp_path / "cache/deps" / f"nvidia-cutlass-9.9.0.0-{sha[:16]}"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == [
        "cutlass_library/source/include/cute/tensor.hpp",
        "cutlass_library/source/include/cutlass/cutlass.h",
        "cutlass_library/source/tools/util/include/cutlass/util/x.hpp",
    ]
    assert [p.name for p in (tmp_path / "cache/deps").iterdir() if p.is_dir()] == [root.name]
    wheel.unlink()  # a second build finds the headers unpacked: pip is not run again
    assert unpack_headers(pin, tmp_path / "cache", Path(sys.executable), index, log) == root


def test_a_hash_mismatch_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    fake_wheel(tmp_path / "links")
    pin = HeaderWheel("nvidia-cutlass", "9.9.0.0", "0" * 64, INCLUDE)
    index = PipSources(None, (str(tmp_path / "links"),), True)
    with pytest.raises(ToolchainError) as info:
        unpack_headers(pin, tmp_path / "cache", Path(sys.executable), index, tmp_path / "log")
    assert "failed to download nvidia-cutlass==9.9.0.0" in str(info.value)
    assert "recipes/deps.toml" in str(info.value) and "--cutlass-path" in str(info.value)
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in (tmp_path / "log").read_text()
    assert [p.name for p in (tmp_path / "cache/deps").iterdir() if p.is_dir()] == []


def test_a_pin_naming_folders_the_wheel_lacks_is_refused(tmp_path: Path) -> None:
    _, sha = fake_wheel(tmp_path / "links")
    pin = HeaderWheel("nvidia-cutlass", "9.9.0.0", sha, ("cutlass_library/include",))
    index = PipSources(None, (str(tmp_path / "links"),), True)
    with pytest.raises(ToolchainError, match="has no files under cutlass_library/include"):
        unpack_headers(pin, tmp_path / "cache", Path(sys.executable), index, tmp_path / "log")


def test_include_dirs_of_local_checkouts_and_wheels_in_plan_order(tmp_path: Path) -> None:
    src = checkout(tmp_path / "cutlass", "3.9.2")
    bare = checkout(tmp_path / "installed", "3.8.0", util=False)
    _, sha = fake_wheel(tmp_path / "links")
    dep = TABLE.get("cutlass_3_9")
    assert dep is not None
    pin = HeaderWheel("nvidia-cutlass", "9.9.0.0", sha, INCLUDE)
    plan_ = HeaderPlan(
        (
            HeaderSource(dep, ("gemm",), local=src),
            HeaderSource(Dependency("x", Provider.HEADERS, "cutlass", "9.9.0"), ("a",), wheel=pin),
            HeaderSource(dep, ("gemm2",), local=bare),
        ),
        PipSources(None, (str(tmp_path / "links"),), True),
    )
    log = tmp_path / "log"
    dirs = provide_headers(plan_, tmp_path / "cache", None, log)
    root = tmp_path / "cache/deps" / f"nvidia-cutlass-9.9.0.0-{sha[:16]}"
    assert dirs == (
        src / "include",
        src / "tools/util/include",
        root / INCLUDE[0],
        root / INCLUDE[1],
        bare / "include",
    )
    assert f"headers: cutlass_3_9 (CUTLASS 3.9.2) from local checkout {src}" in log.read_text()
    assert provide_headers(HeaderPlan(), tmp_path / "cache", None, log) == ()


def test_another_dependency_gives_another_reuse_key(tmp_path: Path) -> None:
    """The include folders are part of the compile spec, so of the reuse key: a build whose
    dependency changed (another pin, another checkout) compiles again."""
    env = EnvInfo(Path("/py"), "3.11", "x86_64", Path("/site"), "2.14.1", "13.0", None, True)
    worker = tmp_path / "worker.py"
    worker.write_text("")

    def key(include: str) -> str:
        spec = CompileSpec("n", ("a.cu",), (include,), (), (), (), True, None, "t", "l", 1, "x")
        return build_key(spec, env, {}, worker)

    assert key("/c/deps/nvidia-cutlass-3.8.0.0-aaaa/inc") != key(
        "/c/deps/nvidia-cutlass-3.6.0.0-bbbb/inc"
    )


# --- the CLI: refused before anything is built -------------------------------------------------


def test_build_refuses_a_missing_dependency_before_building_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p", '"torch", "cutlass_4_0"')
    out = tmp_path / "wheelhouse"
    args = ["build", str(root), "--output-dir", str(out), "--cache-dir", str(tmp_path / "c")]
    code = main([*args, "--variant", CPU.name, "--variant", CUDA.name])
    err = capsys.readouterr().err
    assert code == ToolchainError.exit_code
    assert "cutlass_4_0 (CUTLASS 4.0.0)" in err and "--cutlass-path" in err
    assert not out.exists() and not (tmp_path / "c").exists()  # not even the CPU variant ran


# --- integration: the real nvidia-cutlass wheel from PyPI, a real compile ---------------------

PROBE_CU = """\
#include <cstdint>
#include <cutlass/cutlass.h>
#include <cutlass/version.h>
#include <cute/tensor.hpp>

// Device code through CuTe, and host functions naming the CUTLASS release compiled against.
__global__ void fill(float* out) {
  auto t = cute::make_tensor(cute::make_gmem_ptr(out), cute::make_shape(cute::Int<4>{}));
  t(threadIdx.x % 4) = 1.0f;
}
int64_t cutlass_release() { return CUTLASS_MAJOR * 10000 + CUTLASS_MINOR * 100 + CUTLASS_PATCH; }
int64_t cute_layout_size() {
  return cute::size(cute::make_layout(cute::make_shape(cute::Int<4>{}, cute::Int<8>{})));
}
"""

PROBE_BINDING = """\
#include <torch/library.h>
#include "registration.h"

int64_t cutlass_release();
int64_t cute_layout_size();

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("cutlass_release() -> int", &cutlass_release);
  ops.def("cute_layout_size() -> int", &cute_layout_size);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""

PROBE_TOML = """\
[general]
name = "cutlass-probe"
version = "0.1.0"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.probe]
backend = "cuda"
src = ["csrc/probe.cu"]
depends = ["torch", "cutlass_3_8"]
cuda-capabilities = ["8.0"]
"""


@pytest.mark.integration
def test_cutlass_3_8_headers_come_from_the_real_pypi_wheel(tmp_path: Path) -> None:
    dep = TABLE.get("cutlass_3_8")
    assert dep is not None and dep.wheel is not None
    log = tmp_path / "log"
    root = unpack_headers(dep.wheel, tmp_path / "cache", None, PipSources(), log)
    include = root / dep.wheel.include[0]
    assert checkout_version(include.parent, "cutlass") == "3.8.0"  # version.h of the wheel
    assert (include / "cute/tensor.hpp").is_file()
    assert (root / dep.wheel.include[1] / "cutlass/util/packed_stride.hpp").is_file()
    assert not list(root.rglob("*.py"))  # only the headers were unpacked


@pytest.mark.integration
def test_a_kernel_depending_on_cutlass_3_8_builds_against_those_headers(
    tmp_path: Path, venv_for: Callable[[str | None], LayeredVenv]
) -> None:
    root = tmp_path / "cutlass-probe"
    for rel, text in {
        "build.toml": PROBE_TOML,
        "csrc/probe.cu": PROBE_CU,
        "torch-ext/torch_binding.cpp": PROBE_BINDING,
        "torch-ext/cutlass_probe/__init__.py": "from ._ops import ops\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    out = tmp_path / "wheelhouse"
    code = main(["build", str(root), "--variant", CUDA.name, "-o", str(out), "--no-repair"])
    log = (out / "logs" / f"{CUDA.name}.log").read_text()
    assert code == 0, log[-3000:]
    assert "headers: cutlass_3_8 (CUTLASS 3.8.0) from nvidia-cutlass 3.8.0.0 from PyPI" in log
    venv = venv_for(CUDA.name)
    venv.pip_install(str(next(out.glob("cutlass_probe-*.whl"))), "--no-deps")
    ops = "import cutlass_probe as p; print(p.ops.cutlass_release(), p.ops.cute_layout_size())"
    assert venv.run("-c", ops).stdout.split() == ["30800", "32"]
