"""numba gain term of the collision integral: prange over the cells i, sums over j and n."""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def _gain_kernel(fpad, N, P, sidx_m, ps, Mflat, coef, ptr, n, w, cells, out):
    Np = N + 2 * P
    S0 = Np * Np
    S1 = Np
    K = 2 * N - 1
    for c in prange(cells.shape[0]):
        i = cells[c]
        ix = i // (N * N)
        iy = (i // N) % N
        iz = i % N
        ip = (ix + P) * S0 + (iy + P) * S1 + (iz + P)
        acc = 0.0
        for jx in range(N):
            mx = ix - jx + N - 1
            for jy in range(N):
                my = iy - jy + N - 1
                for jz in range(N):
                    mz = iz - jz + N - 1
                    mi = (mx * K + my) * K + mz
                    s = sidx_m[mi]
                    p0 = ps[mi, 0]
                    p1 = ps[mi, 1]
                    p2 = ps[mi, 2]
                    M = Mflat[mi]
                    a = 0.0
                    for e in range(ptr[s], ptr[s + 1]):
                        Sn = n[e, 0] * p0 + n[e, 1] * p1 + n[e, 2] * p2
                        a += w[e] * fpad[ip + (Sn - M) // 2] * fpad[ip - (Sn + M) // 2]
                    acc += coef[mi] * a
        out[c] = acc


def gain_cells(op, f, cells):
    """The uncorrected gain at the cells ``cells`` (flat indices; timing samples)."""
    t = op.table
    args = op.device_cache.get("numba")
    if args is None:
        args = op.device_cache["numba"] = (op.sidx_m, op.ps.astype(np.int64), op.Mflat, op.coef.astype(op.dtype),
                                           t.ptr, t.n.astype(np.int64), t.w.astype(op.dtype))
    cells = np.asarray(cells, np.int64)
    out = np.empty(len(cells), dtype=op.dtype)
    _gain_kernel(op.pad(f), op.N, op.P, *args, cells, out)
    return out


def gain(op, f):
    """The uncorrected gain on the whole mesh, (N, N, N)."""
    N = op.N
    return gain_cells(op, f, np.arange(N ** 3, dtype=np.int64)).reshape(N, N, N)


TABLE = {"gain": gain, "gain_cells": gain_cells}
