"""Cases 1-4 of Table 3 (paper 002) on the CPU: numba products (AoS, SoA, tiled, scheduled) in
``NumbaOps``.  SoA matrices are float64 arrays of shape (2, n, n)."""
from __future__ import annotations

from functools import partial

import numba as nb
import numpy as np

from solver.rgf.sched import parts

TILE = 32


@nb.njit(parallel=True, cache=True)
def aos_mul(A, B):
    n, K = A.shape
    m = B.shape[1]
    C = np.zeros((n, m), np.complex128)
    for i in nb.prange(n):
        for k in range(K):
            a = A[i, k]
            for j in range(m):
                C[i, j] += a * B[k, j]
    return C

@nb.njit(parallel=True, cache=True)
def soa_mul(A, B):
    n, K = A.shape[1], A.shape[2]
    m = B.shape[2]
    C = np.zeros((2, n, m))
    for i in nb.prange(n):
        for k in range(K):
            ar = A[0, i, k]
            ai = A[1, i, k]
            for j in range(m):
                C[0, i, j] += ar * B[0, k, j] - ai * B[1, k, j]
                C[1, i, j] += ar * B[1, k, j] + ai * B[0, k, j]
    return C

@nb.njit(inline="always")
def _tile_rows(A, B, C, ib, T):
    n, K = A.shape[1], A.shape[2]
    m = B.shape[2]
    i0, i1 = ib * T, min(ib * T + T, n)
    for kb in range(0, K, T):
        k1 = min(kb + T, K)
        for jb in range(0, m, T):
            j1 = min(jb + T, m)
            for i in range(i0, i1):
                for k in range(kb, k1):
                    ar = A[0, i, k]
                    ai = A[1, i, k]
                    for j in range(jb, j1):
                        C[0, i, j] += ar * B[0, k, j] - ai * B[1, k, j]
                        C[1, i, j] += ar * B[1, k, j] + ai * B[0, k, j]

@nb.njit(parallel=True, cache=True)
def tiled_mul(A, B, T):
    n = A.shape[1]
    C = np.zeros((2, n, B.shape[2]))
    nt = (n + T - 1) // T
    for ib in nb.prange(nt):
        _tile_rows(A, B, C, ib, T)
    return C

@nb.njit(parallel=True, cache=True)
def tiled_mul_many(As, B, T):
    """As: (p, 2, n, K); all p products side by side: work items (product, tile row)."""
    p, n = As.shape[0], As.shape[2]
    C = np.zeros((p, 2, n, B.shape[2]))
    nt = (n + T - 1) // T
    for w in nb.prange(p * nt):
        q = w // nt
        _tile_rows(As[q], B, C[q], w % nt, T)
    return C


class NumbaOps:
    """Cases 1-4 on the CPU (numba threads)."""

    NAMES = {1: "aos", 2: "soa", 3: "tiled", 4: "sched"}

    def __init__(self, case: int, threads: int | None = None):
        if case not in self.NAMES:
            raise ValueError(f"numba optimization case must be 1..4, got {case}")
        self.case = case
        self.name = self.NAMES[case]
        self.threads = threads
        self.xp = np

    def to(self, a):
        a = np.asarray(a, complex)
        return np.ascontiguousarray(a) if self.case == 1 else np.ascontiguousarray(np.stack([a.real, a.imag]))

    def back(self, a):
        return a if self.case == 1 else a[0] + 1j * a[1]

    def mul(self, a, b):
        if self.case == 1:
            return aos_mul(a, b)
        if self.case == 2:
            return soa_mul(a, b)
        return tiled_mul(a, b, TILE)

    def mul_many(self, As, b):
        if self.case < 4 or len(As) == 1:
            return [self.mul(a, b) for a in As]
        threads = nb.get_num_threads()
        out, pos = [], 0
        for p in parts(len(As), threads):
            out += list(tiled_mul_many(np.stack(As[pos:pos + p]), b, TILE))
            pos += p
        return out

    def inv(self, a):
        return self.to(np.linalg.inv(self.back(a)))

    def trace(self, a):
        return complex(np.trace(a)) if self.case == 1 else complex(np.trace(a[0]), np.trace(a[1]))

    def sync(self):
        pass


TABLE = {name: partial(NumbaOps, case) for case, name in NumbaOps.NAMES.items()}
