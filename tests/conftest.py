"""Session fixtures shared by every test folder: real builds through the CLI and real pip
installs for the integration tests, one compile cache for the fake Hub repos; and the run's
header and summary line that say how to run the integration tests when they are left out.

Build environments are cached under $KERNELWHEEL_CACHE_DIR (default ~/.cache/kernelwheel), so
a second run reuses them; wheels go to a per-session temporary wheelhouse.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT, CUDA_CAPABILITIES, CUDA_VARIANT, IMG2GRAY, Built, build_env
from support.layered import LayeredVenv

from kernelwheel.cli import main
from kernelwheel.hub.hubsource import BACKOFF_VARIABLE
from kernelwheel.model.variant import Variant

# Suites that run inside a built wheel's venv (they import the kernel, not kernelwheel): the
# integration tests copy them there; this run never collects them.
collect_ignore = ["kernel_suites", "fixtures"]  # fixtures: projects whose tests run in their wheel

EVERYTHING = "integration or not integration"
# The time limit of an integration test (pyproject's timeout is the unit tests'): the first run
# creates build environments (torch and CUDA wheels, GBs) and compiles for many capabilities on
# 2 CPUs; later runs reuse the cache and take a fraction of it.
INTEGRATION_TIMEOUT = 3600
HOW_TO_RUN_ALL = (
    f"integration tests left out (the default -m 'not integration'): run everything as CI does "
    f"with `bash scripts/test.sh`, or `pytest -m '{EVERYTHING}'`"
)


def _integration_left_out(config: pytest.Config) -> bool:
    return str(config.getoption("markexpr")).strip() == "not integration"


def pytest_report_header(config: pytest.Config) -> str | None:
    return HOW_TO_RUN_ALL if _integration_left_out(config) else None


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if _integration_left_out(config) and terminalreporter.stats.get("deselected"):
        terminalreporter.write_line(HOW_TO_RUN_ALL)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("integration") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(INTEGRATION_TIMEOUT))


@pytest.fixture(autouse=True)
def short_hub_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub calls' pause between tries, 10 ms instead of 1 s then 2 s: the tests of
    retries and timeouts test the tries, not the waiting (tests/hub/test_hub_timeout.py
    checks the real schedule). Set in the environment, so CLI subprocesses get it too."""
    monkeypatch.setenv(BACKOFF_VARIABLE, "0.01")


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """img2gray built for the CUDA 13.0 and the CPU variant by `kernelwheel build`, the two
    side by side (--variant-jobs 2; test_rebuild_is_byte_identical rebuilds each alone), the
    CUDA one for CUDA_CAPABILITIES."""
    wheelhouse = tmp_path_factory.mktemp("wheelhouse")
    code = main(
        [
            "build",
            str(IMG2GRAY),
            "--output-dir",
            str(wheelhouse),
            "--variant",
            CUDA_VARIANT,
            "--variant",
            CPU_VARIANT,
            "--variant-jobs",
            "2",
            "--cuda-capabilities",
            CUDA_CAPABILITIES,
        ]
    )
    wheels: dict[str, Path] = {}
    for name in (CUDA_VARIANT, CPU_VARIANT):
        local = Variant.parse(name).local_version
        found = sorted(wheelhouse.glob(f"img2gray-*+{local}-*.whl"))
        if found:
            wheels[name] = found[0]
    return Built(wheelhouse, wheels, code)


@pytest.fixture(scope="session")
def so_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the fake Hub repos' shared objects (tests/support/gitrepo.py), made
    once a session and shared by every module."""
    return tmp_path_factory.mktemp("hub-so-cache")


@pytest.fixture
def venv_for(tmp_path: Path) -> Iterator[object]:
    made: list[LayeredVenv] = []

    def make(variant_name: str | None, name: str = "venv") -> LayeredVenv:
        site = build_env(variant_name).purelib if variant_name else None
        v = LayeredVenv(tmp_path / f"{name}{len(made)}", site)
        made.append(v)
        return v

    yield make


@pytest.fixture(scope="module")
def torch_site() -> Path:
    """site-packages of the torch 2.14.1+cu130 build environment (made once, then cached)."""
    from support import torchop

    return torchop.torch_site()


@pytest.fixture(scope="module")
def extension() -> bytes:
    """A real TORCH_LIBRARY op compiled against that torch (tests/support/torchop.py)."""
    from support import torchop

    return torchop.extension()
