"""``kernelwheel install`` among the CUDA flavours of one torch, by the machine's CUDA driver
(issue 32 item 5), end to end: the real probe in a fresh venv holding a fake torch, real pip, and
the import guard of the installed build. One test per rule: driver 12.6 -> cu126, 13.1 -> cu130,
13.2 -> cu132, 11.8 -> refused with the reason. The driver is faked the way every kernelwheel
reader takes it: KERNELWHEEL_CUDA_DRIVER (compat.rules.cuda_driver)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.installkit import installed, isolate, kernel_wheel, torch_wheel
from support.installkit import venv_with_torch as make_venv

from kernelwheel.cli import main

FLAVOURS = ("cu126", "cu130", "cu132")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch)


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """img2gray 0.1.0 for torch 2.15 in PyTorch's three CUDA flavours (no CPU build)."""
    root = tmp_path_factory.mktemp("flavours")
    for token in FLAVOURS:
        kernel_wheel(root, f"torch2.15.{token}.cxx11")
    return root


@pytest.fixture(scope="module")
def torches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("torches")
    return {
        "cu126": torch_wheel(out, "2.15.0+cu126", "12.6"),
        "cu132": torch_wheel(out, "2.15.0+cu132", "13.2"),  # PyPI's torch 2.15.0
    }


def test_quiet_install_shows_the_pick_not_every_build_passed_over(
    tmp_path: Path,
    house: Path,
    torches: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", "13.1")  # the cu132 torch, the cu130 build
    venv = make_venv(tmp_path / "venv", torches["cu132"])
    args = ["install", "--python", str(venv.python), "img2gray", "-f", str(house), "--dry-run"]
    assert main(["-q", *args]) == 0
    out = capsys.readouterr().out
    assert "img2gray: img2gray-0.1.0+torch2.15.cu130.cxx11-" in out
    assert "not img2gray-" not in out
    assert main(args) == 0
    assert "not img2gray-0.1.0+torch2.15.cu126.cxx11-" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("driver", "torch", "chosen"),
    [("12.6", "cu126", "cu126"), ("13.1", "cu132", "cu130"), ("13.2", "cu132", "cu132")],
)
def test_install_picks_the_newest_flavour_the_driver_supports(
    tmp_path: Path,
    house: Path,
    torches: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    driver: str,
    torch: str,
    chosen: str,
) -> None:
    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", driver)
    venv = make_venv(tmp_path / "venv", torches[torch])
    assert main(["install", "--python", str(venv.python), "img2gray", "-f", str(house)]) == 0
    out = capsys.readouterr().out
    assert f"CUDA driver: {driver}" in out
    assert installed(venv)["img2gray"] == f"0.1.0+torch2.15.{chosen}.cxx11"
    for token in FLAVOURS:
        if token != chosen:
            assert f"not img2gray-0.1.0+torch2.15.{token}.cxx11-" in out
    # the installed build's own guard agrees on this driver ...
    venv.run("-c", "import img2gray")
    # ... and refuses to load where the driver is older than its CUDA
    older = {"cu126": "12.4", "cu130": "12.9", "cu132": "13.1"}[chosen]
    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", older)
    proc = venv.run("-c", "import img2gray", check=False)
    assert proc.returncode != 0
    built = f"{chosen[2:-1]}.{chosen[-1]}"
    assert (
        f"mismatch in: CUDA driver (built with CUDA {built}; the driver supports CUDA {older})"
        in proc.stderr
    )


def test_a_driver_older_than_every_flavour_is_refused_with_the_reason(
    tmp_path: Path,
    house: Path,
    torches: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", "11.8")
    venv = make_venv(tmp_path / "venv", torches["cu126"])
    code = main(["install", "--python", str(venv.python), "img2gray", "-f", str(house)])
    assert code == 10
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "no fitting build for this environment: torch 2.15.0+cu126" in err
    assert "CUDA driver: 11.8" in err
    assert (
        "img2gray-0.1.0+torch2.15.cu126.cxx11-cp310-abi3-linux_x86_64.whl: built for torch 2.15, "
        "CUDA 12.6, cxx11 ABI: mismatch in CUDA driver (built with CUDA 12.6; the driver "
        "supports CUDA 11.8)"
    ) in err
    for token in ("cu130", "cu132"):
        assert f"+torch2.15.{token}.cxx11-cp310-abi3-linux_x86_64.whl: built for" in err
    assert "nothing was installed" in err
    assert set(installed(venv)) == {"torch"}
