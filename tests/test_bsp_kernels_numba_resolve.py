"""The numba re-solve's kernels with the rows side by side (solver/bsp/kernels/numba/iter.py: _cr_backsub,
_rs_level on the transposed blocks; docs/performance-numba-iter.md §10) against their one-row-at-a-time
versions of 850f4a3 (copied below, serial): the same operations per row in the same order, so the same bits,
on every level of the cyclic reduction of several meshes (NZ mod 4 = 0, 1, 2, 3), with zero
couplings next to non-finite entries (the skip of a zero coupling kept: 0 * inf is not added).
CPU only; skipped without numba."""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from numba import njit, uint64  # noqa: E402

from solver.bsp import blocktri  # noqa: E402
from solver.bsp.kernels.numba import iter as ni  # noqa: E402
from solver.bsp.kernels.numba._common import set_threads  # noqa: E402
from solver.backend import get_backend  # noqa: E402


@njit
def _backsub_ref(XA, XC, Xr, b, dirichlet, NX, h, first, step, n_elim, x):
    NZ = b.shape[1]
    for t in range(n_elim * NZ):
        i = first + step * (t // NZ)
        j = t % NZ
        v = Xr[i, j]
        for k in range(NZ):
            v -= XA[i, j, k] * x[i - h, k]
        if i + h < NX:
            for k in range(NZ):
                v -= XC[i, j, k] * x[i + h, k]
        x[i, j] = b[i, j] if dirichlet[i, j] else v


@njit
def _rs_level_ref(lo, up, SA, SC, off, r, piv, LUT, X, NX, h, n_kept, level0):
    NZ = r.shape[1]
    for m in range(n_kept):
        i = 2 * h * m
        uo = uint64(off + m)
        for j in range(NZ):
            uj = uint64(j)
            rn = r[i, j]
            if i - h >= 0:
                uw = uint64(i - h)
                if level0:
                    f = lo[i, j]
                    if f != 0.0:
                        rn -= f * X[uw, 0, uj]
                else:
                    for k in range(NZ):
                        f = SA[uo, uj, k]
                        if f != 0.0:
                            rn -= f * X[uw, 0, k]
            if i + h < NX:
                ue = uint64(i + h)
                if level0:
                    f = up[i, j]
                    if f != 0.0:
                        rn -= f * X[ue, 0, uj]
                else:
                    for k in range(NZ):
                        f = SC[uo, uj, k]
                        if f != 0.0:
                            rn -= f * X[ue, 0, k]
            r[i, j] = rn
        if m % 2 == 1 or n_kept == 1:
            for j in range(NZ):
                X[i, 0, j] = r[i, j]
            ni._lu_solve_row(LUT, piv, i, X, 0)


def T(a):
    """The transposed blocks (the new kernels' layout: XAT[i, k, j] = XA[i, j, k], SA likewise)."""
    return np.ascontiguousarray(a.transpose(0, 2, 1))


def _sparse(rng, shape, zero=0.3):
    a = rng.standard_normal(shape)
    a[rng.random(shape) < zero] = 0.0
    return a


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("NX,NZ", [(17, 13), (10, 14), (9, 15), (33, 16), (65, 65)])
def test_interleaved_kernels_are_bitwise_the_row_versions(rng, NX, NZ, threads):
    set_threads(get_backend("numba", threads=threads))
    levels = blocktri.cr_levels(NX)
    n = sum(lv[4] for lv in levels)
    XA, XC = rng.standard_normal((NX, NZ, NZ)), rng.standard_normal((NX, NZ, NZ))
    Xr, b = rng.standard_normal((NX, NZ)), rng.standard_normal((NX, NZ))
    dirichlet = rng.random((NX, NZ)) < 0.2
    SA, SC = _sparse(rng, (n, NZ, NZ)), _sparse(rng, (n, NZ, NZ))
    lo, up = _sparse(rng, (NX, NZ)), _sparse(rng, (NX, NZ))
    LUT = rng.standard_normal((NX, NZ, NZ)) + 4.0 * np.eye(NZ)  # well-conditioned triangular factors
    piv = np.array([[rng.integers(k, NZ) for k in range(NZ)] for _ in range(NX)], dtype=np.int64)
    r0 = rng.standard_normal((NX, NZ))
    X0 = rng.standard_normal((NX, 1, NZ))
    X0[1, 0, 0] = np.inf
    SA[:, :, 0] = 0.0  # ... column 0 of every coupling zero: X[., 0, 0] = inf must not be added
    SC[:, :, 0] = 0.0
    lo[:, 0] = up[:, 0] = 0.0
    off = 0
    for lvl, (h, first, step, n_elim, n_kept) in enumerate(levels):
        o = off if lvl > 0 else 0
        rA, XA_ = r0.copy(), X0.copy()
        rB, XB_ = r0.copy(), X0.copy()
        ni._rs_level(lo, up, T(SA), T(SC), o, rA, piv, LUT, XA_, NX, h, n_kept, lvl == 0)
        _rs_level_ref(lo, up, SA, SC, o, rB, piv, LUT, XB_, NX, h, n_kept, lvl == 0)
        np.testing.assert_array_equal(rA, rB)
        np.testing.assert_array_equal(XA_, XB_)
        assert np.isfinite(rA).all()  # the inf behind zero couplings was skipped
        if lvl > 0:
            off += n_kept
        xA = rng.standard_normal((NX, NZ))
        xB = xA.copy()
        ni._cr_backsub(T(XA), T(XC), Xr, b, dirichlet, NX, h, first, step, n_elim, xA)
        _backsub_ref(XA, XC, Xr, b, dirichlet, NX, h, first, step, n_elim, xB)
        np.testing.assert_array_equal(xA, xB)
