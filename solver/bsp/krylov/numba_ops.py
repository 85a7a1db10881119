"""numba kernels of the Krylov benchmark: prange CSR SpMV, dot and fused vector updates
(multi-threaded), and the sequential ILU(0) factorisation and triangular solves.

Imported through ``solver.bsp.krylov.ops.REGISTRY`` ("numba" table); without numba the table is
empty and only the scipy / NumPy variant runs.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def csr_matvec(indptr, indices, data, x, y):
    for i in prange(indptr.size - 1):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s


@njit(parallel=True, cache=True)
def dot(x, y):
    s = 0.0
    for i in prange(x.size):
        s += x[i] * y[i]
    return s


@njit(parallel=True, cache=True)
def axpby(a, x, b, y, out):
    for i in prange(x.size):
        out[i] = a * x[i] + b * y[i]


@njit(parallel=True, cache=True)
def axpbypcz(a, x, b, y, c, z, out):
    for i in prange(x.size):
        out[i] = a * x[i] + b * y[i] + c * z[i]


@njit(cache=True)
def ilu0_factor(indptr, indices, a, diag):
    """In-place ILU(0) of a CSR matrix with sorted indices (IKJ variant); diag[i] = position
    of (i, i).  L (unit lower) and U share the pattern of A."""
    n = indptr.size - 1
    iw = -np.ones(n, dtype=np.int64)
    for i in range(n):
        for kk in range(indptr[i], indptr[i + 1]):
            iw[indices[kk]] = kk
        for kk in range(indptr[i], diag[i]):
            k = indices[kk]
            a[kk] /= a[diag[k]]
            lik = a[kk]
            for jj in range(diag[k] + 1, indptr[k + 1]):
                p = iw[indices[jj]]
                if p != -1:
                    a[p] -= lik * a[jj]
        for kk in range(indptr[i], indptr[i + 1]):
            iw[indices[kk]] = -1


@njit(cache=True)
def ilu0_solve(indptr, indices, a, diag, v, out):
    n = indptr.size - 1
    for i in range(n):  # L y = v (unit diagonal)
        s = v[i]
        for kk in range(indptr[i], diag[i]):
            s -= a[kk] * out[indices[kk]]
        out[i] = s
    for i in range(n - 1, -1, -1):  # U x = y
        s = out[i]
        for kk in range(diag[i] + 1, indptr[i + 1]):
            s -= a[kk] * out[indices[kk]]
        out[i] = s / a[diag[i]]


@njit(cache=True)
def ilu0_solve_T(indptr, indices, a, diag, v, out):
    n = indptr.size - 1
    w = v.copy()
    for i in range(n):  # U^T y = v: column-oriented forward substitution
        yi = w[i] / a[diag[i]]
        out[i] = yi
        for kk in range(diag[i] + 1, indptr[i + 1]):
            w[indices[kk]] -= a[kk] * yi
    for i in range(n - 1, -1, -1):  # L^T x = y (unit diagonal), backward
        xi = out[i]
        for kk in range(indptr[i], diag[i]):
            out[indices[kk]] -= a[kk] * xi


def set_threads(threads: int) -> int:
    """numba's thread count (clipped to numba's pool); returns the count in effect."""
    t = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(t)
    return t


class NumbaOps:
    """prange vector operations (float64, host).  ``threads``: numba thread count set on creation."""

    def __init__(self, threads: int | None = None):
        self.xp = np
        if threads is not None:
            self.threads = set_threads(threads)

    def dot(self, x, y):
        return float(dot(x, y))

    def norm(self, x):
        return math.sqrt(dot(x, x))

    def axpby(self, a, x, b, y):
        out = np.empty_like(x)
        axpby(float(a), x, float(b), y, out)
        return out

    def axpbypcz(self, a, x, b, y, c, z):
        out = np.empty_like(x)
        axpbypcz(float(a), x, float(b), y, float(c), z, out)
        return out

    def zeros_like(self, x):
        return np.zeros_like(x)

    def copy(self, x):
        return x.copy()


TABLE = {"ops": NumbaOps, "set_threads": set_threads, "csr_matvec": csr_matvec,
         "ilu0_factor": ilu0_factor, "ilu0_solve": ilu0_solve, "ilu0_solve_T": ilu0_solve_T}
