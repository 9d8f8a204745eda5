"""kernelwheel install's choice among the CUDA flavours of one torch by the machine's CUDA driver
(issue 32 item 5): a cuXY build runs where the driver supports CUDA X.Y or newer, the newest
that fits is chosen, and every other flavour says why it was passed over. The driver is read by
compat.rules.cuda_driver, faked here as the tests fake it everywhere: KERNELWHEEL_CUDA_DRIVER."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from support.installkit import choose

from kernelwheel.compat import rules as compat
from kernelwheel.install.probe import Target

_LINUX = "manylinux_2_28_x86_64"
FLAVOURS = ("cu126", "cu130", "cu132")
WHEELS = {t: f"k-1.0.0+torch2.15.{t}.cxx11-cp310-abi3-{_LINUX}.whl" for t in FLAVOURS}
CPU = f"k-1.0.0+torch2.15.cpu.cxx11-cp310-abi3-{_LINUX}.whl"


def _fake_torch(version: str, cuda: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        __version__=version,
        version=types.SimpleNamespace(cuda=cuda, hip=None),
        _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True),
    )


def _running(torch: str, driver: str, monkeypatch: pytest.MonkeyPatch) -> compat.Torch:
    """The facts compat.torch_facts reads from a torch ``torch`` (``2.15.0+cu126``) on a
    machine whose driver is faked to support CUDA ``driver``."""
    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", driver)
    cuda = torch.rpartition("+cu")[2]
    return compat.torch_facts(_fake_torch(torch, f"{cuda[:-1]}.{cuda[-1]}"))


def _choose(torch: compat.Torch, files: list[str]) -> tuple[str | None, dict[str, str]]:
    tags = (f"cp311-abi3-{_LINUX}", f"cp310-abi3-{_LINUX}", "py3-none-any")
    return choose(
        files, Target(Path("/py"), (3, 11), "cpython", "x86_64", torch, "2.15.0", tags, True)
    )


# (the torch a user with that driver runs, the driver, the flavour chosen): PyPI's torch 2.15 is
# cu132; on a driver of CUDA 12.x only PyTorch's cu126 torch works, so that user runs it.
RULES = [
    ("2.15.0+cu126", "12.6", "cu126"),
    ("2.15.0+cu132", "13.1", "cu130"),
    ("2.15.0+cu132", "13.2", "cu132"),
    ("2.15.0+cu130", "13.2", "cu132"),
    ("2.15.0+cu126", "13.2", "cu126"),  # a new driver runs the old major; torch decides it
]


@pytest.mark.parametrize(("torch", "driver", "chosen"), RULES)
def test_the_newest_flavour_the_driver_supports_is_chosen(
    torch: str, driver: str, chosen: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = _running(torch, driver, monkeypatch)
    assert running.driver == tuple(int(p) for p in driver.split("."))
    assert running.describe_driver() == f"CUDA driver: {driver}"
    got, reasons = _choose(running, [*WHEELS.values(), CPU])
    assert got == WHEELS[chosen]
    for token, wheel in WHEELS.items():
        if token == chosen:
            continue
        reason = reasons[wheel]
        built = f"{token[2:-1]}.{token[-1]}"
        if int(token[2:-1]) != int(torch.rpartition("+cu")[2][:-1]):
            assert f"mismatch in CUDA major version (built with CUDA {built})" in reason
        elif (int(token[2:-1]), int(token[-1])) > running.driver:  # type: ignore[operator]
            assert reason.endswith(
                f"mismatch in CUDA driver (built with CUDA {built}; the driver supports "
                f"CUDA {driver})"
            )
        else:  # it runs, but an newer one that also runs won
            assert reason == (
                "compatible, but a build with a newer CUDA that the driver supports was chosen"
            )
    assert reasons[CPU].startswith("compatible (a CPU build)")


def test_a_driver_too_old_for_every_flavour_refuses_each_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = _running("2.15.0+cu126", "11.8", monkeypatch)
    got, reasons = _choose(running, list(WHEELS.values()))
    assert got is None
    assert reasons[WHEELS["cu126"]] == (
        "built for torch 2.15, CUDA 12.6, cxx11 ABI: mismatch in CUDA driver (built with CUDA "
        "12.6; the driver supports CUDA 11.8)"
    )
    for token in ("cu130", "cu132"):
        assert "mismatch in CUDA major version" in reasons[WHEELS[token]]
    # with a CPU build beside them, that one loads (its ops have no GPU kernels)
    assert _choose(running, [*WHEELS.values(), CPU])[0] == CPU


def test_without_a_driver_torchs_own_cuda_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    # "none" stands for a machine without the driver (a CPU-only CI runner with a CUDA torch):
    # nothing is refused by the driver, and the build of torch's own CUDA is preferred.
    running = _running("2.15.0+cu130", "none", monkeypatch)
    assert running.driver is None and running.describe_driver() == "CUDA driver: none found"
    got, reasons = _choose(running, list(WHEELS.values()))
    assert got == WHEELS["cu130"]
    assert reasons[WHEELS["cu132"]] == "compatible, but a closer fit was chosen"


@pytest.mark.parametrize(
    ("value", "driver"),
    [("12.6", (12, 6)), ("13", (13, 0)), (" 13.2 ", (13, 2)), ("none", None), ("NONE", None)],
)
def test_the_driver_override(
    value: str, driver: tuple[int, int] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", raising=False)
    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", value)
    assert compat.cuda_driver() == driver
    # the NVIDIA variant provider's override is read too (one setting for uv and kernelwheel)
    monkeypatch.delenv("KERNELWHEEL_CUDA_DRIVER")
    monkeypatch.setenv("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", value)
    assert compat.cuda_driver() == driver


def test_the_guard_refuses_a_flavour_the_driver_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    running = _running("2.15.0+cu132", "13.1", monkeypatch)
    build = compat.Build((2, 15), compat.CUDA, (13, 2), True)
    found = compat.problems(build, running)
    assert found == ["CUDA driver (built with CUDA 13.2; the driver supports CUDA 13.1)"]
    message = compat.refusal("k", "1.0.0+torch2.15.cu132.cxx11", build, running, found)
    assert "the build for this torch and CUDA driver: kernelwheel install 'k==1.0.0'" in message
    # no pip line naming this very (refused) label
    assert "pip install 'k==1.0.0+torch2.15.cu132.cxx11'" not in message
