"""Shared fixtures for the img2gray tests. They run against the *installed* img2gray package."""

from __future__ import annotations

import os

import numpy as np
import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped where none is present)")


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A freshly seeded generator per test; the seed is printed so a failure can be replayed
    (set IMG2GRAY_TEST_SEED to replay it)."""
    seed = int(os.environ.get("IMG2GRAY_TEST_SEED") or int.from_bytes(os.urandom(8), "little"))
    print(f"{request.node.nodeid}: IMG2GRAY_TEST_SEED={seed}")
    return np.random.default_rng(seed)
