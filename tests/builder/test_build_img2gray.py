"""Build img2gray for real (CUDA 13.0 and CPU variants), install the wheels with pip and
`kernelwheel install` into fresh venvs, and run the op against an independent NumPy reference.
Every test of the session's build (`built`) is in this file, so a run that spreads files over
workers (`-n 2 --dist loadfile`, docs/testing.md) makes it once."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from support.builds import (
    CHECK_ONE_BACKEND,
    CHECK_OP,
    CPU_VARIANT,
    CUDA_CAPABILITIES,
    CUDA_VARIANT,
    IMG2GRAY,
    IMG2GRAY_SUITE,
    Built,
    build_env,
)
from support.layered import LayeredVenv
from support.wheelread import read_wheel

from kernelwheel.cli import main
from kernelwheel.model.variant import Variant
from kernelwheel.plan.options import DEFAULT_CACHE_DIR

pytestmark = pytest.mark.integration

MakeVenv = Callable[..., LayeredVenv]


def test_build_succeeds_with_expected_names(built: Built) -> None:
    assert built.exit_code == 0
    cuda = Variant.parse(CUDA_VARIANT)
    cpu = Variant.parse(CPU_VARIANT)
    # torch >= 2.13 forces Py_LIMITED_API=3.10, so the honest tag is cp310-abi3.
    assert built.wheels[CUDA_VARIANT].name == (
        f"img2gray-0.1.0+{cuda.local_version}-cp310-abi3-manylinux_2_28_x86_64.whl"
    )
    assert built.wheels[CPU_VARIANT].name == (
        f"img2gray-0.1.0+{cpu.local_version}-cp310-abi3-manylinux_2_28_x86_64.whl"
    )
    for name, wheel in built.wheels.items():
        contents = read_wheel(wheel)  # verifies RECORD hashes
        md = contents.metadata
        assert md["Version"] == f"0.1.0+{Variant.parse(name).local_version}"
        assert md.get_all("Requires-Dist")[0] == Variant.parse(name).torch_requirement()
        assert md["Requires-Python"] == ">=3.10"
        sos = [f for f in contents.files if f.endswith(".abi3.so")]
        assert len(sos) == 1 and sos[0].startswith("img2gray/_img2gray_")
        assert "img2gray/_ops.py" in contents.files
        assert (built.wheelhouse / "logs" / f"{name}.log").is_file()


def test_wheels_pass_the_abi_check(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", *map(str, built.wheels.values())]) == 0
    out = capsys.readouterr().out
    assert "manylinux_2_28_x86_64" in out


def test_installed_cpu_wheel_runs_the_op(built: Built, venv_for: MakeVenv) -> None:
    venv = venv_for(CPU_VARIANT)
    venv.pip(str(built.wheels[CPU_VARIANT]))
    out = venv.run("-c", CHECK_OP).stdout
    assert "OK" in out


@pytest.mark.parametrize(("variant", "device"), [(CUDA_VARIANT, "cuda"), (CPU_VARIANT, "cpu")])
def test_each_wheel_serves_its_own_backend_only(
    built: Built, venv_for: MakeVenv, variant: str, device: str
) -> None:
    """kernel-builder's dialect: the binding registers under CPU_KERNEL / CUDA_KERNEL, one
    backend per variant, so the CUDA wheel has no CPU kernel (and the reverse)."""
    venv = venv_for(variant)
    venv.pip(str(built.wheels[variant]))
    assert f"devices ('{device}',)" in venv.run("-c", CHECK_ONE_BACKEND).stdout


@pytest.mark.parametrize("variant", [CUDA_VARIANT, CPU_VARIANT])
def test_kernel_own_tests_pass_in_installed_env(
    built: Built, venv_for: MakeVenv, variant: str, tmp_path: Path
) -> None:
    venv = venv_for(variant)
    venv.pip(str(built.wheels[variant]), "pytest>=8,<10")
    # Run outside the source tree, so they import the wheel: the kernel's smoke test and
    # kernelwheel's exhaustive suite.
    smoke, suite = tmp_path / "smoke", tmp_path / "suite"
    shutil.copytree(IMG2GRAY / "tests", smoke)
    shutil.copytree(IMG2GRAY_SUITE, suite)
    for tests in (smoke, suite):
        proc = venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests), cwd=tmp_path)
        assert " passed" in proc.stdout and " failed" not in proc.stdout, proc.stdout


def test_pip_resolves_local_version_from_find_links(built: Built, venv_for: MakeVenv) -> None:
    venv = venv_for(CUDA_VARIANT)
    version = f"0.1.0+{Variant.parse(CUDA_VARIANT).local_version}"
    proc = venv.pip("--no-index", "--find-links", str(built.wheelhouse), f"img2gray=={version}")
    assert f"img2gray-{version}" in proc.stdout
    assert (
        version
        in venv.run("-c", "import importlib.metadata as m; print(m.version('img2gray'))").stdout
    )


def test_wrong_torch_gets_the_guard_message(built: Built, venv_for: MakeVenv) -> None:
    # The torch 2.14 CUDA wheel forced into the torch 2.13 CPU environment.
    venv = venv_for(CPU_VARIANT)
    venv.pip("--no-deps", str(built.wheels[CUDA_VARIANT]))
    proc = venv.run("-c", "import img2gray", check=False)
    assert proc.returncode != 0
    err = proc.stderr
    assert "ImportError" in err and "undefined symbol" not in err
    assert "was built for torch 2.14, CUDA 13" in err
    assert "this Python runs torch 2.13.0+cpu" in err
    assert f"img2gray==0.1.0+{Variant.parse(CPU_VARIANT).local_version}" in err


def _elf_sections_differing(a: bytes, b: bytes) -> list[str]:
    from io import BytesIO

    from elftools.elf.elffile import ELFFile

    one, two = ELFFile(BytesIO(a)), ELFFile(BytesIO(b))
    return [
        s.name
        for s in one.iter_sections()
        if (t := two.get_section_by_name(s.name)) is None or s.data() != t.data()
    ]


def _differences(first: Path, second: Path) -> str:
    """Which members of two wheels differ, and for a shared object which ELF sections."""
    with zipfile.ZipFile(first) as a, zipfile.ZipFile(second) as b:
        differ = [n for n in a.namelist() if n not in b.namelist() or a.read(n) != b.read(n)]
        sections = {
            n: _elf_sections_differing(a.read(n), b.read(n))
            for n in differ
            if n.endswith(".so") and n in b.namelist()
        }
    return f"members {differ}, ELF sections {sections}"


@pytest.mark.parametrize("variant", [CPU_VARIANT, CUDA_VARIANT])
def test_rebuild_is_byte_identical(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    """A real compile (no compiler cache) of a copy of the project in another folder gives the
    same bytes as the session's build of the project where it is, through the compiler cache.
    The two objects come from two compiles, in other processes and other folders: for CUDA this
    proves that nvcc's tmpxft_<pid>_ temporary names no longer reach the object's symbols (issue
    13), that neither nvcc's internal symbols (it hashed the .cu's real path into them) nor the
    link order follow where the project lies, and that a cache hit from a compile elsewhere
    (another checkout, an earlier run) gives the same bytes as a compile. The CPU variant's
    compile also runs through another interpreter path (--python, its environment linked in
    elsewhere), and no cache, project, home or environment path is in its shared object.
    (One compile, not two: the session's build is the other; docs/testing.md.)"""
    monkeypatch.setenv("KERNELWHEEL_NO_CCACHE", "1")
    copy = tmp_path / "elsewhere" / "img2gray"
    shutil.copytree(IMG2GRAY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    cache = Path(os.environ.get("KERNELWHEEL_CACHE_DIR") or str(DEFAULT_CACHE_DIR)).expanduser()
    made = {m: m.stat().st_ino for m in cache.glob("envs/*/pyvenv.cfg")}
    out = tmp_path / "copy"
    args = ["build", str(copy), "-o", str(out), "--variant", variant]
    args += ["--cuda-capabilities", CUDA_CAPABILITIES]
    if variant == CPU_VARIANT:
        # The environment provisioned again (the build's own call), then used through a path
        # of its own: the build compiles with that interpreter and its torch's headers.
        env = build_env(variant).python.parent.parent
        linked = tmp_path / "carol" / "venv"
        linked.parent.mkdir()
        linked.symlink_to(env)
        args += ["--python", str(linked / "bin" / "python")]
    assert main(args) == 0
    (moved,) = out.glob("*.whl")
    # Issue 38, 11: the session's compile added files to nothing its environment promised, so
    # the build reused it as it was (a remade environment is a new venv: a new pyvenv.cfg).
    assert made and {m: m.stat().st_ino for m in made} == made
    cached = built.wheels[variant]
    assert moved.name == cached.name
    if cached.read_bytes() != moved.read_bytes():
        pytest.fail(f"{moved.name}: a compile elsewhere differs from the session's cached build: "
                    f"{_differences(cached, moved)}")  # fmt: skip
    with zipfile.ZipFile(moved) as zf:
        so = zf.read(next(n for n in zf.namelist() if n.endswith(".so")))
    if variant == CUDA_VARIANT:
        assert b"tmpxft_" not in so
        # Issue 30: nvcc's --keep files are gone once the compile ends.
        stage = cache / "work" / "img2gray" / variant
        assert stage.is_dir() and not (stage / "nvcc-keep").exists()
    else:
        for path in {str(tmp_path), str(cache), os.path.expanduser("~"), str(env)}:
            assert path.encode() not in so, path


def test_two_builds_load_side_by_side(built: Built, venv_for: MakeVenv, tmp_path: Path) -> None:
    # A second build from changed sources gets another namespace and .so name.
    changed = tmp_path / "img2gray-changed"
    shutil.copytree(IMG2GRAY, changed, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    cpp = changed / "csrc" / "img2gray_cpu.cpp"
    cpp.write_text(cpp.read_text() + "\n// a different build\n")
    out = tmp_path / "wh"
    assert main(["build", str(changed), "-o", str(out), "--variant", CPU_VARIANT]) == 0
    (other,) = out.glob("*.whl")
    with zipfile.ZipFile(other) as zf:
        (so_name,) = [n for n in zf.namelist() if n.endswith(".so")]
        zf.extract(so_name, tmp_path / "x")
    venv = venv_for(CPU_VARIANT)
    venv.pip(str(built.wheels[CPU_VARIANT]))
    script = f"""
import torch, numpy as np, img2gray
torch.ops.load_library({str(tmp_path / "x" / so_name)!r})
ns_a = img2gray._ops.add_op_namespace_prefix("img2gray").split("::")[0]
ns_b = {Path(so_name).name.split(".")[0]!r}
assert ns_b not in ns_a, (ns_a, ns_b)
img = torch.randint(0, 256, (31, 17, 3), dtype=torch.uint8)
out_a = img2gray.img2gray(img)
out_b = torch.empty(31, 17, dtype=torch.uint8)
getattr(torch.ops, ns_b).img2gray(img, out_b)
assert torch.equal(out_a, out_b)
print("both loaded", ns_a, ns_b)
"""
    assert "both loaded" in venv.run("-c", script).stdout


def test_install_picks_the_cpu_213_build_and_the_op_runs(
    built: Built,
    venv_for: MakeVenv,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`kernelwheel install` with the real torch 2.13.0+cpu: out of a wheelhouse that also holds
    the CUDA 13.0 build for torch 2.14, it picks the CPU build for 2.13, leaves torch alone, and
    the op runs."""
    assert {CPU_VARIANT, CUDA_VARIANT} <= set(built.wheels)  # both builds are candidates
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    venv = venv_for(CPU_VARIANT)
    torch_before = venv.installed_version("torch")
    args = ["--find-links", str(built.wheelhouse), "--no-index", "--python", str(venv.python)]
    assert main(["install", "img2gray", *args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (pkg,) = report["packages"]
    assert pkg["wheel"] == built.wheels[CPU_VARIANT].name
    assert report["environment"]["torch"] == torch_before and torch_before.startswith("2.13.0")
    assert any(r["wheel"] == built.wheels[CUDA_VARIANT].name for r in pkg["rejected"])
    local = Variant.parse(CPU_VARIANT).local_version
    assert venv.installed_version("img2gray") == f"0.1.0+{local}"
    assert venv.installed_version("torch") == torch_before
    assert "OK" in venv.run("-c", CHECK_OP).stdout
