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


def _fake_gpu_backend():
    """A Backend whose xp stands in for CuPy's few calls of HostCopy (host memory as 'device' memory)."""
    import ctypes
    import types

    from solver.backend import Backend
    made = {"pinned": 0, "events": 0}

    class Arr:
        def __init__(self, a):
            self.a = np.ascontiguousarray(a, dtype=float)
            self.nbytes, self.dtype, self.size, self.shape = self.a.nbytes, self.a.dtype, self.a.size, self.a.shape
            self.data = types.SimpleNamespace(ptr=self.a.ctypes.data)

    class Event:
        def __init__(self):
            made["events"] += 1

        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    def alloc_pinned_memory(n):
        made["pinned"] += 1
        return bytearray(n)

    def memcpyAsync(dst, src, n, kind, stream):
        ctypes.memmove(dst, src, n)

    cuda = types.SimpleNamespace(alloc_pinned_memory=alloc_pinned_memory, Event=Event,
                                 get_current_stream=lambda: types.SimpleNamespace(ptr=0),
                                 runtime=types.SimpleNamespace(memcpyAsync=memcpyAsync, memcpyDeviceToHost=2))
    xp = types.SimpleNamespace(cuda=cuda, ascontiguousarray=lambda a: a)
    return Backend("cupy", xp), Arr, made


def test_gpu_copies_reuse_pinned_buffers_once_read():
    be, Arr, made = _fake_gpu_backend()
    a, b = Arr([1.0, 2.0]), Arr([3.0, 4.0])
    h1 = be.to_host_async(a)
    h2 = be.to_host_async(b)  # h1 not read yet: a buffer of its own
    assert made["pinned"] == 2
    assert h1.result().tolist() == [1.0, 2.0] and h2.result().tolist() == [3.0, 4.0]
    for k in range(5):  # read ones go back to the pool: no new pinned memory or event
        c = Arr([float(k), -1.0])
        h = be.to_host_async(c)
        c.a[0] = 99.0  # after the copy: not seen
        assert h.result().tolist() == [float(k), -1.0]
        assert h.result().tolist() == [float(k), -1.0]  # read twice: the same values
    assert made["pinned"] == 2 and made["events"] == 2
    h3 = be.to_host_async(Arr([5.0, 6.0]))
    assert h1.result().tolist() == [1.0, 2.0]  # a result taken before its buffer was reused stays
    assert h3.result().tolist() == [5.0, 6.0]
    assert be.to_host_async(Arr([1.0, 2.0, 3.0])).result().tolist() == [1.0, 2.0, 3.0]  # another size
    assert made["pinned"] == 3
