"""Shared fixtures: backends to test over, and the ``gpu`` marker's clean skip."""
import os
from pathlib import Path

import numpy as np
import pytest

from solver.backend import available_backends, get_backend, gpu_available

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BSP_SHARED", REPO.parent / "shared"))


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=available_backends())
def backend(request):
    """Every backend usable on this machine (numpy always; numba and cupy where present)."""
    return get_backend(request.param)


@pytest.fixture
def numpy_backend():
    return get_backend("numpy")


@pytest.fixture
def cupy_backend():
    if not gpu_available():
        pytest.skip("needs CuPy and a CUDA device")
    return get_backend("cupy")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def shared_dir():
    if not SHARED.is_dir():
        pytest.skip(f"shared/ folder not found at {SHARED}")
    return SHARED
