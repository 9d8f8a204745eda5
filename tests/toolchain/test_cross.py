"""kernelwheel.toolchain.cross without network: planning, the target sysroot (real pip download
from a local folder of small fake wheels holding real ELF libraries), and how a cross build
extends the compile spec and the compiler's environment."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest
from support.requests import request_for
from support.variants import TORCH29_CPU_AARCH64, TORCH214_CU130_AARCH64

from kernelwheel.compile.compile_spec import CompileSpec, CrossInfo
from kernelwheel.errors import ToolchainError
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.sources import PipSources
from kernelwheel.model.variant import Arch, Variant
from kernelwheel.plan.options import resolve_options
from kernelwheel.toolchain import cross
from kernelwheel.toolchain.envs import EnvInfo, EnvSpec

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
CUDA_AARCH64 = Variant.parse(TORCH214_CU130_AARCH64)
CPU29_AARCH64 = Variant.parse(TORCH29_CPU_AARCH64)
HAVE_CROSS = shutil.which("aarch64-linux-gnu-gcc") is not None
HAVE_GCC = shutil.which("gcc") is not None


def _fake_compiler_dir(tmp_path: Path, triple: str = "aarch64-linux-gnu") -> Path:
    """A PATH folder with <triple>-gcc/-g++ scripts that only answer -dumpfullversion."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("gcc", "g++"):
        script = bin_dir / f"{triple}-{tool}"
        script.write_text("#!/bin/sh\necho 12.2.0\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


# --- planning --------------------------------------------------------------------------------


def test_only_a_variant_of_another_arch_is_cross() -> None:
    """(A variant for another arch gets a plan: the test below.)"""
    recipes = load_recipes()
    assert cross.plan_for(CUDA_AARCH64, None, recipes, host=Arch.AARCH64) is None
    assert cross.plan_for(Variant.parse("torch-universal"), None, recipes, host=Arch.X86_64) is None


def test_missing_cross_compiler_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError) as err:
        cross.find_cross_compiler(Arch.AARCH64, path=str(tmp_path))
    assert "aarch64-linux-gnu-gcc" in err.value.message
    assert err.value.hint is not None
    assert "apt-get install g++-aarch64-linux-gnu" in err.value.hint
    assert "scripts/install-cross.sh" in err.value.hint


def test_cross_compiler_found_on_path(tmp_path: Path) -> None:
    found = cross.find_cross_compiler(Arch.AARCH64, path=str(_fake_compiler_dir(tmp_path)))
    assert found.cxx.name == "aarch64-linux-gnu-g++"
    assert found.cc.name == "aarch64-linux-gnu-gcc"
    assert found.version == "12.2.0"


def test_plan_for_native_variant_is_none() -> None:
    native = Variant.parse("torch214-cxx11-cu130-x86_64-linux")
    assert cross.plan_for(native, None, load_recipes(), host=Arch.X86_64) is None


def test_plan_cuda_variant_uses_host_arch_pins_for_the_env_and_target_pins_for_sysroot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_fake_compiler_dir(tmp_path)))
    monkeypatch.delenv("KERNELWHEEL_RECIPES", raising=False)
    plan = cross.plan_for(CUDA_AARCH64, None, load_recipes(), host=Arch.X86_64)
    assert plan is not None and plan.host_env is not None
    assert plan.cuda_major == 13
    # PyPI's plain torch 2.14.1 on both arches (pinned exactly: == or ===).
    assert re.fullmatch(r"torch===?2\.14\.1", plan.host_env.torch_requirement)
    assert plan.target_env.torch_requirement == plan.host_env.torch_requirement
    # The same pins, hashed per arch: x86_64 for the environment nvcc runs in, aarch64 for the
    # headers and libcudart the kernel links against.
    host_nvcc = next(p for p in plan.host_env.packages if p.startswith("nvidia-cuda-nvcc=="))
    target_nvcc = next(p for p in plan.target_env.packages if p.startswith("nvidia-cuda-nvcc=="))
    assert host_nvcc.endswith("56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03")
    assert target_nvcc.endswith("c7ff28f86a24effdc6c034fa15230c549a273e4771b10a7fec14996f8cf3307f")
    spec = plan.target_spec("3.11")
    assert spec.platforms == (
        "manylinux_2_28_aarch64",
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
    )
    hashes = spec.expected_hashes()
    assert hashes["nvidia-cuda-runtime"].startswith("ef9bcbe9")
    assert len(hashes) == 5


def test_plan_cpu_variant_keeps_index_options_and_host_flavour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_fake_compiler_dir(tmp_path)))
    target = EnvSpec("torch==2.9.1", sources=PipSources(find_links=("/wheels",)))
    plan = cross.plan_for(CPU29_AARCH64, target, load_recipes(), host=Arch.X86_64)
    assert plan is not None and plan.host_env is not None
    # PyPI's aarch64 torch 2.9.1 is the CPU build; on x86_64 the CPU build is +cpu from the
    # PyTorch index.
    assert plan.target_env is target
    assert plan.host_env.torch_requirement == "torch==2.9.1+cpu"
    assert plan.host_env.sources == PipSources(
        find_links=("/wheels",), extra_index_urls=("https://download.pytorch.org/whl/cpu",)
    )
    assert plan.host_env.packages == ()
    # With --python there is no environment to make.
    bare = cross.plan_for(
        CPU29_AARCH64, None, load_recipes(), need_host_env=False, host=Arch.X86_64
    )
    assert bare is not None and bare.host_env is None
    assert re.fullmatch(r"torch===?2\.9\.1", bare.target_env.torch_requirement)


def test_plan_without_a_host_arch_recipe_is_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "torch.toml").write_text(
        'schema = 1\n[torch."2.9"]\nversion = "2.9.1"\npython-abi = "cp39"\n'
        'cxx-abis = ["cxx11"]\nflavours.cpu = { arches = ["aarch64"], on-pypi = ["aarch64"] }\n'
    )
    (recipes / "cuda.toml").write_text("schema = 1\n[cuda]\n")
    monkeypatch.setenv("PATH", str(_fake_compiler_dir(tmp_path)))
    with pytest.raises(ToolchainError, match=r"built for this machine \(x86_64\)") as err:
        cross.plan_for(CPU29_AARCH64, None, load_recipes(recipes), host=Arch.X86_64)
    assert err.value.hint is not None and "--python" in err.value.hint


def test_target_digest_changes_with_what_goes_in() -> None:
    a = cross.TargetSpec(Arch.AARCH64, "3.11", "torch==2.14.1")
    assert a.digest() == cross.TargetSpec(Arch.AARCH64, "3.11", "torch==2.14.1").digest()
    assert a.digest() != cross.TargetSpec(Arch.AARCH64, "3.12", "torch==2.14.1").digest()
    assert a.digest() != cross.TargetSpec(Arch.AARCH64, "3.11", "torch==2.14.0").digest()
    pinned = cross.TargetSpec(Arch.AARCH64, "3.11", "torch==2.14.1", packages=("x==1",))
    assert a.digest() != pinned.digest()


# --- the target sysroot ----------------------------------------------------------------------


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(folder: Path, filename: str, files: dict[str, bytes]) -> Path:
    name, version = filename.split("-")[:2]
    dist_info = f"{name}-{version}.dist-info"
    files = dict(files)
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    ).encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items())
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    path = folder / filename
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in files.items():
            zf.writestr(member, data)
    return path


def _shared_object(tmp_path: Path, compiler: str, name: str) -> bytes:
    src = tmp_path / f"{name}.c"
    src.write_text("int kernelwheel_cross_test(void) { return 1; }\n")
    out = tmp_path / f"{name}.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out.read_bytes()


@pytest.fixture
def offline_pip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """pip sees only an empty index and the wheels folder the test fills."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"):
        monkeypatch.delenv(var, raising=False)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    return wheels


def _torch_wheel(wheels: Path, lib: bytes, version: str = "2.14.1") -> Path:
    return _write_wheel(
        wheels,
        f"torch-{version}-cp311-cp311-manylinux_2_28_aarch64.whl",
        {
            "torch/include/ATen/Config.h": b"#define AT_PARALLEL_OPENMP 1\n",
            "torch/include/torch/csrc/api/include/torch/all.h": b"\n",
            "torch/lib/libc10.so": lib,
            "torch/lib/libtorch_python.so": lib,
            "torch/__init__.py": b"",
        },
    )


def _spec(wheels: Path, packages: tuple[str, ...] = ()) -> cross.TargetSpec:
    empty_index = wheels.parent / "empty-index"
    empty_index.mkdir(exist_ok=True)
    return cross.TargetSpec(
        Arch.AARCH64,
        "3.11",
        "torch==2.14.1",
        packages=packages,
        sources=PipSources(empty_index.as_uri(), (str(wheels),)),
    )


@pytest.mark.skipif(not HAVE_CROSS, reason="needs aarch64-linux-gnu-gcc (scripts/install-cross.sh)")
def test_target_sysroot_is_downloaded_verified_unpacked_and_cached(
    tmp_path: Path, offline_pip: Path
) -> None:
    lib = _shared_object(tmp_path, "aarch64-linux-gnu-gcc", "c10")
    _torch_wheel(offline_pip, lib)
    runtime = _write_wheel(
        offline_pip,
        "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        {
            "nvidia/cu13/include/cuda_runtime.h": b"\n",
            "nvidia/cu13/include/cccl/cuda/std/version": b"\n",
            "nvidia/cu13/lib/libcudart.so.13": lib,
            "nvidia/cu13/bin/tool": b"not unpacked",
        },
    )
    digest = hashlib.sha256(runtime.read_bytes()).hexdigest()
    spec = _spec(offline_pip, (f"nvidia-cuda-runtime==13.0.96 --hash=sha256:{digest}",))
    log = tmp_path / "build.log"
    log.write_text("")
    sysroot = cross.provision_target(spec, tmp_path / "cache", log=log)
    assert sysroot.torch == "2.14.1" and not sysroot.reused
    root = sysroot.root
    assert (root / "torch/include/ATen/Config.h").is_file()
    assert (root / "torch/lib/libc10.so").is_file()
    assert not (root / "torch/lib/libtorch_python.so").exists()  # never linked by a kernel
    assert not (root / "torch/__init__.py").exists()
    assert not (root / "nvidia/cu13/bin").exists()
    assert os.readlink(root / "nvidia/cu13/lib/libcudart.so") == "libcudart.so.13"
    assert not (root / ".downloads").exists()
    assert dict(sysroot.wheels)[runtime.name] == digest
    assert sysroot.search_dirs(13) == (
        [
            str(root / "torch/include"),
            str(root / "torch/include/torch/csrc/api/include"),
            str(root / "nvidia/cu13/include"),
        ],
        [str(root / "torch/lib"), str(root / "nvidia/cu13/lib")],
    )
    assert sysroot.search_dirs(None)[1] == [str(root / "torch/lib")]
    assert "--platform manylinux_2_28_aarch64" in log.read_text()
    # Cached: nothing is downloaded again (the wheels may even be gone).
    shutil.rmtree(offline_pip)
    again = cross.provision_target(spec, tmp_path / "cache")
    assert again.reused and again.root == root and again.wheels == sysroot.wheels


def test_target_with_wrong_recipe_hash_is_refused(tmp_path: Path, offline_pip: Path) -> None:
    _torch_wheel(offline_pip, b"\x7fELF not really")
    _write_wheel(
        offline_pip,
        "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        {"nvidia/cu13/include/cuda_runtime.h": b"\n"},
    )
    spec = _spec(offline_pip, ("nvidia-cuda-runtime==13.0.96 --hash=sha256:" + "0" * 64,))
    with pytest.raises(ToolchainError, match="download the pinned aarch64 CUDA packages") as err:
        cross.provision_target(spec, tmp_path / "cache")
    assert err.value.hint is not None and "recipes/cuda.toml" in err.value.hint


@pytest.mark.skipif(not HAVE_GCC, reason="needs gcc")
def test_target_torch_of_the_wrong_arch_is_refused(tmp_path: Path, offline_pip: Path) -> None:
    # A wheel named aarch64 whose libraries are x86_64: the ELF machine check catches it.
    _torch_wheel(offline_pip, _shared_object(tmp_path, "gcc", "c10"))
    with pytest.raises(ToolchainError, match="is EM_X86_64, not EM_AARCH64"):
        cross.provision_target(_spec(offline_pip), tmp_path / "cache")


def test_target_torch_missing_is_explained(tmp_path: Path, offline_pip: Path) -> None:
    with pytest.raises(ToolchainError, match="download torch==2.14.1 for aarch64") as err:
        cross.provision_target(_spec(offline_pip), tmp_path / "cache")
    assert err.value.hint is not None and "manylinux_2_28_aarch64" in err.value.hint


# --- applying a cross build ------------------------------------------------------------------


def _cross_build(tmp_path: Path, cuda_major: int | None) -> cross.CrossBuild:
    bin_dir = _fake_compiler_dir(tmp_path)
    compiler = cross.find_cross_compiler(Arch.AARCH64, path=str(bin_dir))
    root = tmp_path / "target"
    (root / "nvidia/cu13/include/cccl").mkdir(parents=True)
    sysroot = cross.TargetSysroot(root, Arch.AARCH64, "2.14.1", ())
    purelib = tmp_path / "hostenv/lib/python3.11/site-packages"
    purelib.mkdir(parents=True)
    env = EnvInfo(
        python=tmp_path / "hostenv/bin/python",
        python_version="3.11",
        machine="x86_64",
        purelib=purelib,
        torch="2.14.1",
        cuda="13.0" if cuda_major else None,
        hip=None,
        cxx11_abi=True,
    )
    return cross.CrossBuild(compiler, sysroot, env, cuda_major)


def _compile_spec(
    include_dirs: tuple[str, ...], nvcc: tuple[str, ...] = (), cxx: tuple[str, ...] = ()
) -> CompileSpec:
    return CompileSpec(
        name="_k_0",
        sources=("k.cpp",),
        include_dirs=include_dirs,
        define_macros=(),
        cxx_flags=cxx,
        nvcc_flags=nvcc,
        cuda=bool(nvcc),
        cuda_home=None,
        build_temp="/stage/obj",
        build_lib="/stage/lib",
        jobs=1,
        requested_limited_api="0x03090000",
    )


def test_extend_spec_puts_target_dirs_before_the_host_environment(tmp_path: Path) -> None:
    build = _cross_build(tmp_path, 13)
    host_cuda = str(build.env.purelib / "nvidia/cu13/include")
    includes = ("/stage/include", "/kernel/include", host_cuda)
    before = _compile_spec(include_dirs=includes, nvcc=("-O3",))
    spec = build.extend_spec(before)
    assert before.cross is None  # a new spec; the original is unchanged
    root = build.sysroot.root
    assert spec.include_dirs == (
        "/stage/include",
        "/kernel/include",
        str(root / "torch/include"),
        str(root / "torch/include/torch/csrc/api/include"),
        str(root / "nvidia/cu13/include"),
        host_cuda,
    )
    assert spec.library_dirs == (str(root / "torch/lib"), str(root / "nvidia/cu13/lib"))
    assert spec.link_flags == (f"-Wl,-rpath-link,{root / 'torch/lib'}:{root / 'nvidia/cu13/lib'}",)
    prefix_map = f"-ffile-prefix-map={root}=/kernelwheel/target"
    assert spec.cxx_flags == (prefix_map,)
    assert spec.nvcc_flags == (
        "-O3",
        "-ccbin",
        str(build.compiler.cxx),
        f"-Xcompiler={prefix_map}",
        "-isystem",
        str(root / "nvidia/cu13/include/cccl"),
    )
    assert spec.cross == CrossInfo("aarch64", str(root), "2.14.1")
    assert json.loads(spec.to_json())["cross"]["target_torch"] == "2.14.1"


def test_extend_spec_cpu_variant_leaves_nvcc_alone(tmp_path: Path) -> None:
    build = _cross_build(tmp_path, None)
    spec = build.extend_spec(_compile_spec(include_dirs=("/stage/include",), cxx=("-O3",)))
    assert spec.nvcc_flags == ()
    assert spec.cxx_flags == (
        "-O3",
        f"-ffile-prefix-map={build.sysroot.root}=/kernelwheel/target",
    )
    assert spec.include_dirs == (
        "/stage/include",
        *build.sysroot.search_dirs(None)[0],
    )


def test_extend_env_sets_the_cross_compiler(tmp_path: Path) -> None:
    build = _cross_build(tmp_path, None)
    env = {"PATH": "/usr/bin"}
    build.extend_env(env, tmp_path / "cache")
    assert env["CC"] == str(build.compiler.cc)
    assert env["CXX"] == str(build.compiler.cxx)
    assert env["LDSHARED"] == f"{build.compiler.cxx} -shared"


@pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache")
def test_extend_env_routes_the_cross_compiler_through_ccache(tmp_path: Path) -> None:
    build = _cross_build(tmp_path, None)
    links = tmp_path / "cache" / "ccache-bin"
    links.mkdir(parents=True)
    env = {"PATH": f"{links}{os.pathsep}{os.environ['PATH']}", "CCACHE_DIR": "/x"}
    build.extend_env(env, tmp_path / "cache")
    assert env["CXX"] == "aarch64-linux-gnu-g++"
    assert env["LDSHARED"] == "aarch64-linux-gnu-g++ -shared"
    assert os.readlink(links / "aarch64-linux-gnu-g++") == shutil.which("ccache")
    assert os.readlink(links / "aarch64-linux-gnu-gcc") == shutil.which("ccache")


# --- the pipeline hook -----------------------------------------------------------------------


def test_a_missing_cross_compiler_is_refused_with_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cross plan is part of the build request: without the cross compiler, request_for
    refuses the variant, before any variant builds or any environment is made."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(Arch, "host", classmethod(lambda cls: Arch.X86_64))
    recipes = load_recipes()
    options = resolve_options(None, env={}, cli={"cache_dir": str(tmp_path / "cache")})
    recipe = recipes.recipe_for(CPU29_AARCH64)
    with pytest.raises(ToolchainError, match="aarch64-linux-gnu cross compiler") as err:
        request_for(load_project(IMG2GRAY), recipe, "0.1.0", options, recipes)
    assert err.value.hint is not None and "apt-get install g++-aarch64-linux-gnu" in err.value.hint
    assert not (tmp_path / "cache" / "envs").exists()


def test_a_cross_request_builds_in_the_host_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_fake_compiler_dir(tmp_path)))
    monkeypatch.setattr(Arch, "host", classmethod(lambda cls: Arch.X86_64))
    recipes = load_recipes()
    options = resolve_options(None, env={}, cli={"cache_dir": str(tmp_path / "cache")})
    recipe = recipes.recipe_for(CPU29_AARCH64)
    req = request_for(load_project(IMG2GRAY), recipe, "0.1.0", options, recipes)
    cross = req.compile.cross
    assert cross is not None and cross.host_env is not None
    assert req.env.spec == cross.host_env  # the pipeline provisions the host's environment
    assert cross.variant == CPU29_AARCH64 and req.variant == CPU29_AARCH64


def test_a_target_wheel_member_leading_out_of_the_sysroot_is_refused(tmp_path: Path) -> None:
    from kernelwheel.toolchain.deps import unzip

    wheel = tmp_path / "torch-2.9.0-cp311-cp311-manylinux_2_28_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch/include/ok.h", "")
        zf.writestr("torch/lib/libtorch_python.so", "")
        zf.writestr("torch/include/../../evil.h", "")
    with pytest.raises(ToolchainError) as info:
        unzip(wheel, tmp_path / "root", cross._KEEP.match, "unsafe member path {}", {"x"})
    assert str(info.value).startswith(f"{wheel.name}: unsafe member path 'torch/include/../../")
    assert unzip(
        wheel, tmp_path / "r", lambda n: "ok" in n or "lib" in n, "{}", cross._SKIP_LIBS
    ) == ["torch/include/ok.h"]
    assert not (tmp_path / "evil.h").exists()
