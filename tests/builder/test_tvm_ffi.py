"""tvm-ffi kernels: built against apache-tvm-ffi with no torch anywhere, one wheel per flavour
and arch (tvm-ffi01-cpu-x86_64-linux), installed into a venv without torch and called."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support.kinds import TVM_FFI_BUILD_TOML, write_tvm_ffi_project
from support.layered import LayeredVenv
from support.runners import Reply, ScriptedRunner

from kernelwheel.abi._elf import is_elf
from kernelwheel.builder import codegen
from kernelwheel.builder.tvm_ffi import TvmFfiEnv, _ready, _runtime_rpaths, wheel_requirements
from kernelwheel.cli import main
from kernelwheel.compile import unit_costs
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Arch, Variant
from kernelwheel.plan.options import ENV_VARS
from kernelwheel.toolchain.envs import READY_MARKER, CudaToolkit

HOST = Arch.host().value
CPU = f"tvm-ffi01-cpu-{HOST}-linux"
CUDA = f"tvm-ffi01-cu130-{HOST}-linux"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def test_the_wheel_requires_tvm_ffi_and_never_torch(tmp_path: Path) -> None:
    toml = TVM_FFI_BUILD_TOML.replace(
        'backends = ["cpu", "cuda"]',
        'backends = ["cpu", "cuda"]\npython-depends = ["tvm-ffi", "numpy>=1.26"]',
    )
    project = load_project(write_tvm_ffi_project(tmp_path / "p", toml))
    recipes = load_recipes()
    cpu = wheel_requirements(project, recipes.recipe_for(Variant.parse(CPU)), "0.1.9")
    assert cpu == ("apache-tvm-ffi>=0.1.9,<0.2", "numpy>=1.26")  # the bare name adds nothing
    cuda = wheel_requirements(project, recipes.recipe_for(Variant.parse(CUDA)), "0.1.15.post2")
    assert cuda[:2] == ("apache-tvm-ffi>=0.1.15,<0.2", "nvidia-cuda-runtime>=13.0,<14")
    assert not any(Requirement(r).name == "torch" for r in (*cpu, *cuda))


def test_the_runtime_rpath_points_from_the_package_into_site_packages(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    lib = site / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    store = tmp_path / "cache" / "toolkits"
    env = TvmFfiEnv(tmp_path / "python", site, "0.1.9", (), site / "tvm_ffi" / "lib")
    # the environment's toolchain packages, or their shared copy in the toolkit store
    for home in (site / "nvidia" / "cu13", store / "cu13-0123456789abcdef"):
        home.mkdir(parents=True, exist_ok=True)
        assert _runtime_rpaths(env, CudaToolkit(home, "13.0"), store) == ("../nvidia/cu13/lib",)
    # a system toolkit: the wheel relies on the system's runtime, no rpath into site-packages
    system = tmp_path / "usr-local-cuda"
    system.mkdir()
    assert _runtime_rpaths(env, CudaToolkit(system, "13.0"), store) == ()
    assert _runtime_rpaths(env, None, store) == ()


def test_a_copied_caches_environment_is_probed_where_it_is(tmp_path: Path) -> None:
    """A tvm-ffi environment's ready marker names where it was made; in a cache copied or
    moved while that place is still there, the environment is probed again where it is (once:
    the marker is rewritten), never compiled against the other one's headers."""
    old, root = tmp_path / "before", tmp_path / "now"
    for env_root in (old, root):
        (env_root / "bin").mkdir(parents=True)
        (env_root / "bin" / "python").write_text("")

    def env_of(where: Path) -> TvmFfiEnv:
        site = where / "site-packages"
        return TvmFfiEnv(where / "bin" / "python", site, "0.1.9", (site,), site / "tvm_ffi")

    marker = root / READY_MARKER
    marker.write_text(env_of(old).to_json())
    probed = json.dumps(json.loads(env_of(root).to_json()))  # the probe's one line
    runner = ScriptedRunner(lambda cmd, cwd: Reply(stdout=probed))
    found = _ready(marker, runner)
    assert found == replace(env_of(root), reused=True)
    assert [c[0] for c in runner.commands] == [str(root / "bin" / "python")]
    assert _ready(marker, runner) == found and len(runner.commands) == 1


def test_generated_ops_exposes_what_tvm_ffi_packages_import() -> None:
    source = codegen.tvm_ffi_ops_py("_add_one_abc")
    names = {
        line.split("(")[0].removeprefix("def ").split(" ")[0]
        for line in source.splitlines()
        if line.startswith(("def ", "ops", "has_"))
    }
    assert names == {
        "ops",
        "has_torch",
        "has_jax",
        "torch_add_op_namespace_prefix",
        "jax_add_ffi_target_name_prefix",
        "jax_register_ffi_target",
        "jax_ffi_call",
    }
    assert "import torch" not in source


def built_wheel(tmp_path: Path, variant: str) -> Path:
    root = write_tvm_ffi_project(tmp_path / "add-one")
    out = tmp_path / "out"
    code = main(
        ["build", str(root), "--variant", variant, "--version", "1.0.0", "--output-dir", str(out)]
    )
    assert code == 0
    local = Variant.parse(variant).local_version
    (wheel,) = out.glob(f"add_one-1.0.0+{local}-py3-none-manylinux_2_28_{HOST}.whl")
    return wheel


def requires_of(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode()
    return [
        line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Requires-Dist")
    ]


CHECK = r"""
import importlib.util, numpy as np, add_one
from add_one import _ops
assert importlib.util.find_spec("torch") is None and not _ops.has_torch
assert _ops.torch_add_op_namespace_prefix("add") == _ops._NAMESPACE + "::add"
assert _ops.jax_add_ffi_target_name_prefix("add") == _ops._NAMESPACE + ".add"
assert _ops.jax_register_ffi_target("add") is None and not _ops.has_jax
rng = np.random.default_rng()
for n in (0, 1, 7, 1000, 65537):
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full_like(x, 42.0)
    add_one.add_one(x, out)
    assert np.array_equal(out, x + np.float32(1)), n
x = rng.standard_normal((33, 5)).astype(np.float32)
out = np.empty_like(x)
assert add_one.add_one(x, out) is out and np.array_equal(out, x + 1)
strided = np.zeros((4, 4), np.float32)[:, ::2]
for bad, kind in ((np.zeros(4, np.float64), TypeError), (strided, ValueError)):
    try:
        add_one.add_one(bad, np.zeros_like(bad))
    except kind as exc:
        print("refused:", kind.__name__, exc)
    else:
        raise AssertionError("accepted " + repr(bad.dtype))
print("OK", _ops._NAMESPACE)
"""


@pytest.mark.integration
def test_cpu_kernel_runs_in_a_venv_without_torch(tmp_path: Path) -> None:
    wheel = built_wheel(tmp_path, CPU)
    requires = requires_of(wheel)
    assert requires == ["apache-tvm-ffi<0.2,>=0.1.9"]
    venv = LayeredVenv(tmp_path / "venv", None)
    venv.pip(str(wheel), "numpy")  # apache-tvm-ffi (the newest 0.1.x) and numpy from the index
    result = venv.run("-c", CHECK)
    assert "OK _add_one_" in result.stdout, result.stdout + result.stderr
    assert "refused: TypeError" in result.stdout and "refused: ValueError" in result.stdout


@pytest.mark.integration
def test_cuda_variant_links_the_runtime_package_it_requires(tmp_path: Path) -> None:
    wheel = built_wheel(tmp_path, CUDA)
    assert requires_of(wheel) == ["apache-tvm-ffi<0.2,>=0.1.9", "nvidia-cuda-runtime<14,>=13.0"]
    with zipfile.ZipFile(wheel) as zf:
        (so,) = [n for n in zf.namelist() if n.endswith(".so")]
        data = zf.read(so)
    assert is_elf(data[:4])
    assert b"libcudart.so.13" in data and b"$ORIGIN/../nvidia/cu13/lib" in data
    assert b"libtorch" not in data


# The CUDA kernel of the fixture, using CUTLASS's numeric types (issue 28: a tvm-ffi build had
# no CUTLASS, "fatal error: cutlass/gemm/device/gemm.h").
CUTLASS_CUDA = """\
#include <tvm/ffi/tvm_ffi.h>
#include <cuda_runtime.h>
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>
#include <cutlass/version.h>

static_assert(CUTLASS_MAJOR == 3 && CUTLASS_MINOR == 8, "the cutlass_3_8 headers");

__global__ void add_one_kernel(float* out, const float* in, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = float(cutlass::half_t(in[i]) + cutlass::half_t(1.0f));
}

void add_one_cuda(tvm::ffi::TensorView out, tvm::ffi::TensorView in) {
  int64_t n = in.numel();
  if (n == 0) return;
  add_one_kernel<<<(n + 255) / 256, 256>>>(
      static_cast<float*>(out.data_ptr()), static_cast<const float*>(in.data_ptr()), n);
}
"""


def cutlass_project(root: Path) -> Path:
    toml = TVM_FFI_BUILD_TOML.replace(
        'backend = "cuda"\ndepends = []', 'backend = "cuda"\ndepends = ["cutlass_3_8"]'
    )
    write_tvm_ffi_project(root, toml)
    (root / "csrc" / "add_one_cuda.cu").write_text(CUTLASS_CUDA)
    return root


def test_a_cuda_kernels_depends_are_planned_for_the_tvm_ffi_build(tmp_path: Path) -> None:
    from support.requests import request_for

    from kernelwheel.plan.options import resolve_options

    project = load_project(cutlass_project(tmp_path / "add-one"))
    recipes = load_recipes()
    options = resolve_options(None, env={}, cli={})
    cuda = request_for(project, recipes.recipe_for(Variant.parse(CUDA)), "1.0.0", options, recipes)
    (source,) = cuda.compile.headers.sources
    assert source.kernels == ("add_one_cuda",) and source.wheel is not None
    assert source.describe().startswith("cutlass_3_8 (CUTLASS 3.8.0) from nvidia-cutlass 3.8.0.0")
    cpu = request_for(project, recipes.recipe_for(Variant.parse(CPU)), "1.0.0", options, recipes)
    assert cpu.compile.headers.sources == ()  # the cpu kernel depends on nothing


@pytest.mark.integration
def test_a_cuda_kernel_with_cutlass_depends_builds(tmp_path: Path) -> None:
    root = cutlass_project(tmp_path / "add-one")
    out = tmp_path / "out"
    code = main(["build", str(root), "--variant", CUDA, "--version", "1.0.0", "-o", str(out)])
    log = (out / "logs" / f"{CUDA}.log").read_text()
    assert code == 0, log[-3000:]
    assert "headers: cutlass_3_8" in log
    (wheel,) = out.glob("add_one-1.0.0+*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (so,) = [n for n in zf.namelist() if n.endswith(".so")]
        assert b"libcudart.so.13" in zf.read(so)


@pytest.mark.integration
def test_rebuilds_skip_the_compile_or_take_it_from_the_compiler_cache_into_the_same_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tvm-ffi builds get the torch builds' reuse and compiler cache. Built again unchanged, the
    variant skips its compile (its inputs: the units' depfiles); with that record gone, it takes
    every object from the compiler cache; after an edit it compiles again. Each wheel but the
    edited one is the same bytes, and so is a build without the compiler cache (whose
    compilers see absolute paths where ccache's base_dir gives relative ones)."""
    root = write_tvm_ffi_project(tmp_path / "add-one")
    cache = tmp_path / "cache"
    runs = ("one", "unchanged", "no-record", "uncached", "edited")
    wheels, outputs, logs = [], [], []
    for run in runs:
        if run == "no-record":
            shutil.rmtree(cache / "work" / "add_one" / "reuse")
        if run == "edited":
            kernel = root / "csrc" / "add_one_cpu.cpp"
            kernel.write_text(kernel.read_text().replace("+ 1.0f", "+ 2.0f"))
        out = tmp_path / run
        args = ["build", str(root), "--variant", CPU, "--version", "1.0.0", "-o", str(out)]
        args += ["--cache-dir", str(cache)] + (["--no-ccache"] if run == "uncached" else [])
        assert main(args) == 0
        outputs.append(capsys.readouterr().out)
        logs.append((out / "logs" / f"{CPU}.log").read_text())
        (wheel,) = out.glob("add_one-*.whl")
        wheels.append(wheel.read_bytes())
    one, unchanged, no_record, uncached, edited = range(len(runs))
    assert "ccache 0/" in outputs[one] and "compile skipped" not in logs[one]
    assert "unchanged: compile skipped" in outputs[unchanged]
    assert "compile skipped" in logs[unchanged] and "_compile_worker" not in logs[unchanged]
    hits = re.search(r"ccache (\d+)/(\d+) hit", outputs[no_record])
    assert hits is not None, outputs[no_record]
    assert int(hits.group(1)) == int(hits.group(2)) >= 2  # the binding and the kernel at least
    assert "compiler cache: ccache" in logs[no_record] and f"[1/{hits.group(2)}]" in logs[no_record]
    assert wheels[one] == wheels[unchanged] == wheels[no_record] == wheels[uncached]
    assert "compile skipped" not in logs[edited] and wheels[edited] != wheels[one]
    # each unit's seconds and peak recorded by its path in the project, for the next plan
    units = {"tvm-ffi-ext/binding.cpp", "csrc/add_one_cpu.cpp"}
    record = unit_costs.store_path(cache, root)
    assert set(unit_costs.read_costs(record)) == units
    assert set(unit_costs.read_costs(record.with_suffix(".peaks.json"))) == units


def test_a_tvm_ffi_folder_in_the_current_folder_is_not_probed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -c`` puts the current folder first on sys.path: a ``tvm_ffi/`` there (a
    checkout's) was probed as the interpreter's apache-tvm-ffi, its paths taken for the build."""
    import sys

    from kernelwheel.builder.tvm_ffi import probe_tvm_ffi
    from kernelwheel.errors import ToolchainError

    fake = tmp_path / "tvm_ffi"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "0.0.fake"\n')
    (fake / "libinfo.py").write_text(
        "def include_paths():\n    return ['/fake']\n"
        "def find_libtvm_ffi():\n    return '/fake/libtvm_ffi.so'\n"
    )
    monkeypatch.chdir(tmp_path)
    try:
        found = probe_tvm_ffi(Path(sys.executable))
    except ToolchainError as exc:  # this interpreter has none: refused, not the fake taken
        assert "cannot import tvm_ffi" in exc.message
    else:
        assert found.version != "0.0.fake"  # before: the fake's paths went into the build


def _fake_tvm_ffi(site: Path, *, version_file: bool) -> None:
    """A tvm_ffi whose package import fails loudly (the real one imports torch: seconds)."""
    package = site / "tvm_ffi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the package was imported')\n")
    (package / "libinfo.py").write_text(
        "import os\n"
        "HERE = os.path.dirname(__file__)\n"
        "def include_paths():\n    return [os.path.join(HERE, 'include')]\n"
        "def find_libtvm_ffi():\n    return os.path.join(HERE, 'lib', 'x.so')\n"
    )
    if version_file:
        (package / "_version.py").write_text("__version__ = '0.1.42'\n")


def test_the_tvm_ffi_probe_reads_libinfo_without_importing_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from kernelwheel.builder.tvm_ffi import probe_tvm_ffi

    _fake_tvm_ffi(tmp_path / "site", version_file=True)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    found = probe_tvm_ffi(Path(sys.executable))
    assert found.version == "0.1.42"
    assert found.include_dirs == (tmp_path / "site" / "tvm_ffi" / "include",)
    assert found.lib_dir == tmp_path / "site" / "tvm_ffi" / "lib"


def test_the_tvm_ffi_probe_imports_the_package_where_its_files_are_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from kernelwheel.builder.tvm_ffi import probe_tvm_ffi
    from kernelwheel.errors import ToolchainError

    _fake_tvm_ffi(tmp_path / "site", version_file=False)  # an apache-tvm-ffi without _version
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    with pytest.raises(ToolchainError) as caught:
        probe_tvm_ffi(Path(sys.executable))
    assert "cannot import tvm_ffi: RuntimeError: the package was imported" in caught.value.message
