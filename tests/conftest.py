"""Shared fixtures: backends to test over, the ``gpu`` marker's clean skip, and the loader of a
CUDA fast-path module against a stand-in ``cupy`` (the CPU emulation tests)."""
import importlib.util
import os
import sys
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


@pytest.fixture(scope="session")
def load_with_fake_cupy():
    """``load(path, name, fake)``: execute the module file ``path`` as a private module ``name``
    while ``fake`` stands in for ``cupy`` in sys.modules (restored afterwards), and return it."""
    def load(path, name, fake):
        saved = sys.modules.get("cupy")
        sys.modules["cupy"] = fake
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        finally:
            if saved is None:
                del sys.modules["cupy"]
            else:
                sys.modules["cupy"] = saved
        return mod

    return load
