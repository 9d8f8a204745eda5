"""Plain ``pip install`` and ``uv pip install`` from a find-links folder holding only stable-ABI,
tvm-ffi and noarch wheels of a kernel (issue 20 item 5), next to a fake torch 2.13.0+cpu.

The wheels are real kernelwheel wheels of each kind, made by ``to-wheel`` from a Hub-layout repo
(tests/support/gitrepo.py); torch and apache-tvm-ffi are fake distributions pip and uv see as
installed or installable. Each test asserts what the plain command installed and that torch is
unchanged, and, where the choice differs, what ``kernelwheel install`` picks instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.tags import Tag
from support.gitrepo import make_repo
from support.installkit import installed, isolate, plain_install, torch_wheel
from support.installkit import venv_with_torch as make_venv

from kernelwheel.cli import main
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels
from kernelwheel.wheels import WheelSpec, write_wheel

# Real pip and uv installs into fresh venvs: seconds each (pytest -m 'not slow' skips them).
pytestmark = pytest.mark.slow

TOOLS = ["pip", "uv"]
STABLE = "torch-stable-abi210-cpu-x86_64-linux"
TVM_FFI = "tvm-ffi01-cpu-x86_64-linux"
NOARCH = "torch-cpu"
LOCAL = {STABLE: "torch2.10.stable.cpu", TVM_FFI: "tvmffi0.1.cpu", NOARCH: "cpu"}
TVM_FFI_DIST = "apache-tvm-ffi"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch)  # kernelwheel's own pip run must not see this machine's config


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> dict[str, Path]:
    """img2gray 1.1.2 as a stable-ABI CPU, a tvm-ffi CPU and a noarch CPU wheel."""
    root = tmp_path_factory.mktemp("kinds-plain")
    meta = {"version": 1, "python-depends": []}
    repo = make_repo(root / "img2gray", LOCAL, so_cache=so_cache, metadata=meta)
    result = to_wheels(ToWheelRequest(str(repo.root), "1.1.2", output_dir=root / "wh"))
    assert result.rejected == ()
    return {c.variant: c.wheel for c in result.converted}


@pytest.fixture(scope="module")
def torches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("torches-kinds")
    return {v: torch_wheel(out, v, None) for v in ("2.13.0+cpu", "2.9.1+cpu", "2.14.1+cpu")}


def house(root: Path, wheels: list[Path], *, extra: tuple[Path, ...] = ()) -> Path:
    """A find-links folder holding ``wheels``, a fake apache-tvm-ffi 0.1.9 and ``extra``."""
    root.mkdir(parents=True)
    for wheel in [*wheels, *extra]:
        (root / wheel.name).write_bytes(wheel.read_bytes())
    spec = WheelSpec(TVM_FFI_DIST, "0.1.9", Tag("py3", "none", "any"), {"tvm_ffi/__init__.py": b""})
    write_wheel(spec, root)
    return root


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("variant", [STABLE, TVM_FFI, NOARCH])
def test_one_kind_alone_installs_and_torch_stays(
    tool: str, variant: str, tmp_path: Path, kinds: dict[str, Path], torches: dict[str, Path]
) -> None:
    wheels = house(tmp_path / "wh", [kinds[variant]], extra=(torches["2.14.1+cpu"],))
    venv = make_venv(tmp_path / "venv", torches["2.13.0+cpu"])
    proc = plain_install(tool, venv, "--find-links", str(wheels), "img2gray")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = {"torch": "2.13.0+cpu", "img2gray": f"1.1.2+{LOCAL[variant]}"}
    if variant == TVM_FFI:  # its one requirement; it needs no torch
        expected[TVM_FFI_DIST] = "0.1.9"
    assert installed(venv) == expected
    if variant != TVM_FFI:  # the package (and, stable-ABI, its guard) imports under this torch
        venv.run("-c", "import img2gray")


@pytest.mark.parametrize("tool", TOOLS)
def test_all_three_kinds_side_by_side(
    tool: str,
    tmp_path: Path,
    kinds: dict[str, Path],
    torches: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    wheels = house(tmp_path / "wh", list(kinds.values()))
    plain = make_venv(tmp_path / "plain", torches["2.13.0+cpu"])
    proc = plain_install(tool, plain, "--find-links", str(wheels), "img2gray")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Evidence: the highest local label wins, and "tvmffi0…" sorts above "torch2…" and "cpu".
    # A working build that keeps torch, but not the one kernelwheel prefers.
    assert installed(plain) == {
        "torch": "2.13.0+cpu",
        "img2gray": f"1.1.2+{LOCAL[TVM_FFI]}",
        TVM_FFI_DIST: "0.1.9",
    }

    venv = make_venv(tmp_path / "kw", torches["2.13.0+cpu"])
    args = ["install", "--python", str(venv.python), "img2gray", "-f", str(wheels), "--no-index"]
    assert main(args) == 0
    assert installed(venv) == {"torch": "2.13.0+cpu", "img2gray": f"1.1.2+{LOCAL[STABLE]}"}
    out = capsys.readouterr().out
    tvm = f"not img2gray-1.1.2+{LOCAL[TVM_FFI]}-py3-none-manylinux_2_28_x86_64.whl: "
    assert f"{tvm}compatible (a tvm-ffi build), but a stable-ABI build is preferred" in out


@pytest.mark.parametrize("tool", TOOLS)
def test_a_torch_older_than_the_stable_abi_floor(
    tool: str,
    tmp_path: Path,
    kinds: dict[str, Path],
    torches: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No torch reachable: the resolution fails and torch stays.
    alone = house(tmp_path / "alone", [kinds[STABLE]])
    venv = make_venv(tmp_path / "venv", torches["2.9.1+cpu"])
    assert plain_install(tool, venv, "--find-links", str(alone), "img2gray").returncode != 0
    assert installed(venv) == {"torch": "2.9.1+cpu"}
    # A newer torch reachable: plain pip/uv satisfy torch>=2.10 by replacing the user's torch.
    reach = house(tmp_path / "reach", [kinds[STABLE]], extra=(torches["2.14.1+cpu"],))
    proc = plain_install(tool, venv, "--find-links", str(reach), "img2gray")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert installed(venv) == {"torch": "2.14.1+cpu", "img2gray": f"1.1.2+{LOCAL[STABLE]}"}

    kept = make_venv(tmp_path / "kw", torches["2.9.1+cpu"])
    args = ["install", "--python", str(kept.python), "img2gray", "-f", str(reach), "--no-index"]
    assert main(args) == 10
    assert "mismatch in torch version (built for torch >= 2.10)" in capsys.readouterr().err
    assert installed(kept) == {"torch": "2.9.1+cpu"}


def test_kernelwheel_install_takes_the_tvm_ffi_build_where_there_is_no_torch(
    tmp_path: Path, kinds: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """An environment without torch was refused ("has no usable torch"), though the tvm-ffi
    build needs none: it is installed now, with apache-tvm-ffi and no torch, saying why."""
    wheels = house(tmp_path / "wh", list(kinds.values()))
    venv = make_venv(tmp_path / "bare", None)
    args = ["install", "--python", str(venv.python), "img2gray", "-f", str(wheels), "--no-index"]
    assert main(args) == 0
    assert installed(venv) == {"img2gray": f"1.1.2+{LOCAL[TVM_FFI]}", TVM_FFI_DIST: "0.1.9"}
    out = capsys.readouterr().out
    assert "environment: no torch, " in out and "only tvm-ffi builds fit" in out
    assert "it requires torch, and this environment has none" in out  # the stable-ABI one
    assert "torch==" not in out  # no torch pin: there is none to keep
