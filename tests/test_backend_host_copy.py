"""Backend.to_host_async: a small array read later without a wait of its own (the stage's density
check, read with ITER's host read on the GPU: Simulation._defer_check)."""
import numpy as np
import pytest

from solver.backend import get_backend


def test_numpy_copy_is_the_array_and_detached():
    be = get_backend("numpy")
    a = np.array([1.5, -2.0])
    h = be.to_host_async(a)
    a[0] = 7.0  # the value at the call is what result() gives
    r = h.result()
    assert r.tolist() == [1.5, -2.0] and isinstance(r, np.ndarray)


@pytest.mark.gpu
def test_cupy_copy_arrives_after_queued_work():
    be = get_backend("cupy")
    cp = be.xp
    x = cp.arange(1 << 22, dtype=cp.float64)
    for _ in range(20):  # queued work the copy must wait for (stream order)
        x = x * 1.0000001 + 1.0
    v = cp.stack([x.sum(), x.min()])
    h = be.to_host_async(v)
    r = h.result()
    assert r.dtype == np.float64 and r.shape == (2,)
    assert r.tolist() == cp.asnumpy(v).tolist()
    # later changes of the device array do not reach a finished copy
    v[0] = 0.0
    assert h.result().tolist() == r.tolist()
