"""lock and download on a Hub repo (a local git clone) holding per-torch, stable-ABI, tvm-ffi and
noarch variants: every variant is locked with its wheel and hashes, and ``download --torch``
fetches, per platform, the build ``kernelwheel install`` chooses for that torch (per-torch, then
the newest stable ABI at or below it, then tvm-ffi, then noarch), or refuses naming why."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support.gitrepo import make_repo
from support.shared import wheels_in

from kernelwheel.cli import main
from kernelwheel.compat import rules as compat
from kernelwheel.errors import UsageError
from kernelwheel.install.probe import Target
from kernelwheel.install.select import select
from kernelwheel.install.sources import Candidate
from kernelwheel.locking.download import DownloadRequest, download
from kernelwheel.locking.fortorch import choose_for_torch, parse_torch
from kernelwheel.locking.lockfile import LOCK_NAME, LockedVariant, LockFile
from kernelwheel.locking.resolve import LockRequest, lock_project

PER_TORCH = "torch214-cxx11-cpu-x86_64-linux"
STABLE_210 = "torch-stable-abi210-cpu-x86_64-linux"
STABLE_212 = "torch-stable-abi212-cpu-x86_64-linux"
STABLE_CU130 = "torch-stable-abi210-cu130-x86_64-linux"
STABLE_ARM = "torch-stable-abi210-cpu-aarch64-linux"
TVM_CPU = "tvm-ffi01-cpu-x86_64-linux"
TVM_CU130 = "tvm-ffi01-cu130-x86_64-linux"
NOARCH_CPU = "torch-cpu"
NOARCH_CUDA = "torch-cuda"
LINUX = "manylinux_2_28_x86_64"
# What each kind is locked as: kernel-builder's variant name -> the wheel kernelwheel makes.
WHEELS = {
    PER_TORCH: f"img2gray-1.1.2+torch2.14.cpu.cxx11-cp39-abi3-{LINUX}.whl",
    STABLE_210: f"img2gray-1.1.2+torch2.10.stable.cpu-cp39-abi3-{LINUX}.whl",
    STABLE_212: f"img2gray-1.1.2+torch2.12.stable.cpu-cp39-abi3-{LINUX}.whl",
    STABLE_CU130: f"img2gray-1.1.2+torch2.10.stable.cu130-cp39-abi3-{LINUX}.whl",
    STABLE_ARM: "img2gray-1.1.2+torch2.10.stable.cpu-cp39-abi3-manylinux_2_28_aarch64.whl",
    TVM_CPU: f"img2gray-1.1.2+tvmffi0.1.cpu-py3-none-{LINUX}.whl",
    TVM_CU130: f"img2gray-1.1.2+tvmffi0.1.cu130-py3-none-{LINUX}.whl",
    NOARCH_CPU: "img2gray-1.1.2+cpu-py3-none-any.whl",
    NOARCH_CUDA: "img2gray-1.1.2+cuda-py3-none-any.whl",
}
DEPS = """[tool.kernelwheel.dependencies]
"drbh/img2gray" = { version = "1.1.2", path = "../img2gray" }
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> Path:
    root = tmp_path_factory.mktemp("lock-kinds")
    make_repo(
        root / "img2gray", WHEELS, so_cache=so_cache, metadata={"version": 1, "python-depends": []}
    )
    project = root / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "app"\n\n' + DEPS)
    lock_project(LockRequest(project))
    return project


def test_every_kind_is_locked_with_its_wheel_and_hashes(app: Path) -> None:
    (kernel,) = LockFile.load(app / LOCK_NAME).kernels
    assert kernel.skipped == ()
    assert {v.name: v.wheel for v in kernel.variants} == WHEELS
    for variant in kernel.variants:
        assert len(variant.wheel_sha256) == 64
        assert "metadata.json" in dict(variant.files)
        assert any(path.startswith("img2gray/") for path, _ in variant.files)


def _install_choice(wheels: list[str], torch: compat.Torch) -> str | None:
    """What ``kernelwheel install`` chooses among ``wheels`` for an x86_64 CPython 3.11."""
    tags = (f"cp311-abi3-{LINUX}", f"cp39-abi3-{LINUX}", f"py3-none-{LINUX}", "py3-none-any")
    target = Target(Path("/py"), (3, 11), "cpython", "x86_64", torch, "2", tags, True)
    candidates = [Candidate(w, f"/wh/{w}", None, "/wh") for w in wheels]
    (selection,) = select([Requirement("img2gray")], candidates, target)
    return selection.chosen.candidate.filename if selection.chosen else None


@pytest.mark.parametrize(
    ("torch", "x86_64", "aarch64"),
    [
        ("2.14.1+cpu", PER_TORCH, STABLE_ARM),  # a build for the series first
        ("2.13.0+cpu", STABLE_212, STABLE_ARM),  # the newest stable ABI at or below 2.13
        ("2.11.0+cpu", STABLE_210, STABLE_ARM),
        ("2.14.1+cu130", STABLE_CU130, NOARCH_CUDA),  # CPU builds under CUDA torch: last resort
        ("2.12.0+cu128", NOARCH_CUDA, NOARCH_CUDA),  # cu130 builds need CUDA 13
        ("2.9.1+cpu", TVM_CPU, NOARCH_CPU),  # below every stable floor: tvm-ffi, then noarch
    ],
)
def test_download_for_a_torch_fetches_the_build_install_would_choose(
    app: Path, tmp_path: Path, torch: str, x86_64: str, aarch64: str
) -> None:
    lock = LockFile.load(app / LOCK_NAME)
    assert _install_choice(list(WHEELS.values()), parse_torch(torch)) == WHEELS[x86_64]
    result = download(DownloadRequest(app, tmp_path / "wh", torch=torch))
    expected = sorted({x86_64, aarch64})
    assert sorted(w.variant for w in result.wheels) == expected
    assert wheels_in(tmp_path / "wh") == sorted(WHEELS[v] for v in expected)
    recorded = {v.name: v.wheel_sha256 for v in lock.kernels[0].variants}
    for wheel in result.wheels:  # fetched and verified against the lock
        assert hashlib.sha256(wheel.path.read_bytes()).hexdigest() == recorded[wheel.variant]
    reasons = {variant: why for _, variant, why in result.passed_over}
    assert sorted(reasons) == sorted(set(WHEELS) - set(expected))
    assert "img2gray==1.1.2 \\" in result.requirements.read_text()


def test_reasons_for_the_builds_passed_over(app: Path, tmp_path: Path) -> None:
    result = download(DownloadRequest(app, tmp_path / "wh", torch="2.13.0+cpu"))
    reasons = {variant: why for _, variant, why in result.passed_over}
    assert reasons[PER_TORCH] == (
        "built for torch 2.14, CPU, cxx11 ABI: mismatch in torch version (built for torch 2.14)"
    )
    assert reasons[STABLE_210] == (
        f"compatible, but the stable-ABI build for a newer torch ({STABLE_212})"
    )
    assert reasons[TVM_CPU] == (
        f"compatible (a tvm-ffi build), but a stable-ABI build ({STABLE_212}) is preferred"
    )
    assert reasons[STABLE_CU130].endswith(
        "mismatch in backend (a cu130 build; this torch has no CUDA)"
    )
    assert result.pylock is None  # x86_64 and aarch64 chose builds of two labels


def test_a_torch_below_the_stable_abi_floor_is_refused_naming_why(
    app: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "wh"
    request = DownloadRequest(app, house, variants=("torch-stable-*",), torch="2.9.1+cpu")
    with pytest.raises(UsageError) as info:
        download(request)
    message = info.value.message
    assert message.startswith(
        "--torch 2.9.1+cpu: no locked variant of drbh/img2gray selected by --variant can run "
        "under torch 2.9.1+cpu (CPU, cxx11 ABI)"
    )
    assert (
        f"{STABLE_210}: built for torch >= 2.10, CPU: mismatch in torch version "
        "(built for torch >= 2.10)"
    ) in message
    assert "need torch >= 2.10: upgrade torch" in (info.value.hint or "")
    assert not house.exists() or wheels_in(house) == []
    args = ["download", str(app), "--wheelhouse", str(house), "--torch", "2.9.1+cpu"]
    assert main([*args, "--variant", "torch-stable-*"]) == 2
    assert "built for torch >= 2.12, CPU: mismatch in torch version" in capsys.readouterr().err


def test_cli_json_gives_each_reason(
    app: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["download", str(app), "-o", str(tmp_path / "wh"), "--torch", "2.14.1+cpu", "--json"]
    assert main(args) == 0
    entries = {e["variant"]: e for e in json.loads(capsys.readouterr().out)["wheels"]}
    assert entries[PER_TORCH]["status"] == "verified"
    assert entries[STABLE_212]["status"] == "not-selected"
    assert entries[STABLE_212]["reason"] == (
        f"compatible (a stable-ABI build), but a build for this torch series ({PER_TORCH}) is "
        "preferred"
    )


def test_no_build_is_chosen_for_a_platform_the_torch_cannot_run_on() -> None:
    """A Metal variant names darwin, where no CUDA torch runs: the noarch +cuda build was
    chosen "for darwin" beside the cu130 build, two builds of one release in the wheelhouse (and
    no pylock.toml). Under a CPU torch, which darwin has, the noarch CPU build still serves it."""
    names = ("torch214-cxx11-cu130-x86_64-linux", "torch28-metal-aarch64-darwin", NOARCH_CUDA)
    locked = [
        LockedVariant(n, f"img2gray-1.1.2+{i}-py3-none-any.whl", "0", ())
        for i, n in enumerate(names)
    ]
    chosen = choose_for_torch(locked, parse_torch("2.14.1+cu130")).chosen
    assert [v.name for v in chosen] == [names[0]]
    cpu = [*locked[1:2], LockedVariant(NOARCH_CPU, WHEELS[NOARCH_CPU], "0", ())]
    assert [v.name for v in choose_for_torch(cpu, parse_torch("2.14.1+cpu")).chosen] == [NOARCH_CPU]


@pytest.mark.parametrize(
    ("text", "kind", "backend"),
    [
        ("2.13.0+cpu", compat.CPU, None),
        ("2.14.1+cu130", compat.CUDA, (13, 0)),
        ("2.8.0+cu128", compat.CUDA, (12, 8)),
        ("2.11.0+rocm6.3", compat.ROCM, (6, 3)),
        ("2.10.0+xpu", compat.XPU, None),
    ],
)
def test_parse_torch(text: str, kind: str, backend: tuple[int, int] | None) -> None:
    torch = parse_torch(text)
    assert (torch.kind, torch.backend, torch.cxx11) == (kind, backend, True)


@pytest.mark.parametrize("text", ["2.14.1", "2.14.1+cu", "torch 2.14", "2.14.1+npu"])
def test_parse_torch_refuses_a_version_without_a_known_flavour(text: str) -> None:
    with pytest.raises(UsageError, match="--torch") as info:
        parse_torch(text)
    assert "+cpu, +cu130" in (info.value.hint or "")
