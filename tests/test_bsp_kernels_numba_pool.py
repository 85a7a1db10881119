"""Reusable output arrays of the numba fast paths (solver/bsp/kernels/numba/_common.out_array): a
result the caller still holds (directly or through a view) is never handed out again; a released
one is.  CPU only; skipped without numba."""
import numpy as np
import pytest

pytest.importorskip("numba")

from solver.backend import get_backend  # noqa: E402
from solver.bsp import weno  # noqa: E402
from solver.bsp.kernels.numba._common import out_array  # noqa: E402


def test_held_results_are_not_overwritten(bte_cases, rng):
    m, ma = bte_cases.pair()
    be = get_backend("numba", threads=2)
    P1, P2 = rng.random(m.shape), rng.random(m.shape)
    deps = rng.standard_normal((m.NX, 3, m.N_sbn))
    a = weno.weno_w(m, be, P1, deps)
    view = weno.weno_w(m, be, P2, deps)[1:]  # only a view of the second result is kept
    kept = view.copy()
    c = weno.weno_w(m, be, P1, deps)
    assert not np.shares_memory(a, c) and not np.shares_memory(view, c)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(view, kept)
    assert bte_cases.rel(view, weno.weno_w(ma, be, P2, deps)[1:]) <= 1e-12
    assert bte_cases.rel(a, weno.weno_w(ma, be, P1, deps)) <= 1e-12


def test_released_arrays_are_reused(bte_cases):
    m, _ = bte_cases.pair()
    a = out_array(m, "test", (4, 5))
    address = a.ctypes.data
    b = out_array(m, "test", (4, 5))  # a is held: another array
    assert b.ctypes.data != address
    del a
    assert out_array(m, "test", (4, 5)).ctypes.data == address
    assert out_array(m, "test", (3, 5)).shape == (3, 5)  # another shape: a new array
