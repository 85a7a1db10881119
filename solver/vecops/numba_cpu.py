"""numba all-core kernels: the many-core stand-in for the paper's Xeon Phi (same loops as the
paper's "CPU routine", parallelised over rows / elements with ``prange``).  The numba DOT
accumulates in float64 (the paper's CPU loop accumulates in float; at 50M elements a float
accumulator loses about four digits); AXPY and SpMV work in the array precision.

The "numba" table of ``solver.vecops.REGISTRY``.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True, fastmath=False)
def _axpy(a, x, y, r):
    for i in prange(x.size):
        r[i] = a * x[i] + y[i]
    return r


@njit(parallel=True, cache=True)
def _dot(x, y):
    s = 0.0
    for i in prange(x.size):
        s += np.float64(x[i]) * np.float64(y[i])
    return s


@njit(parallel=True, cache=True)
def _spmv(AA, JA, IA, v, r):
    for row in prange(r.size):
        acc = r.dtype.type(0.0)
        for i in range(IA[row], IA[row + 1]):
            acc += AA[i] * v[JA[i]]
        r[row] = acc
    return r


@njit(parallel=True, cache=True)
def _copy(x, r):
    for i in prange(x.size):
        r[i] = x[i]
    return r


def axpy(a, x, y, out):
    return _axpy(x.dtype.type(a), x, y, out)


def dot(x, y):
    return _dot(x, y)


def spmv(A, v, out):
    return _spmv(A.data, A.indices, A.indptr, v, out)


def copy(x, out):
    return _copy(x, out)


TABLE = {"axpy": axpy, "dot": dot, "spmv": spmv, "copy": copy}
