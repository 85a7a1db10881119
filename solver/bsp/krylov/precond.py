"""Preconditioners of the Krylov benchmark (``make_preconditioner``).

'none'; 'ilut' = scipy.sparse.linalg.spilu (SuperLU's threshold ILU, ILUTP with COLAMD column
order and partial pivoting threshold 0.1 by default; the knobs are drop_tol and fill_factor, see
``ILUT_DEFAULTS``); 'ilu0' = ILU(0) on the matrix pattern (numba, sequential).  The triangular
solves of both are sequential (SuperLU's solve, numba loops): only SpMV and the vector
operations use threads.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from solver.bsp.krylov.ops import numba_kernel

PRECONDITIONERS = ("none", "ilut", "ilu0")
# ILUT knobs (scipy spilu): drop entries below drop_tol x (norm of the column), keep at most
# fill_factor x nnz(A) in L + U.  LIS's defaults are drop 0.05 and rate 5; SuperLU's drop rule
# differs (relative to the column).  On the captured Newton systems of the standard mesh
# (docs/performance-krylov.md) drop_tol 1e-3 / fill 5 gives nnz(L + U) ~ nnz(A) (as LIS's rate 5
# intends) and ~8 BiCGSTAB iterations per system; 1e-4 / 10 gives ~3 (too few to tell the
# methods apart) at the same setup cost.
ILUT_DEFAULTS = {"drop_tol": 1e-3, "fill_factor": 5.0}


@dataclass
class Preconditioner:
    kind: str
    solve: object
    solve_T: object
    setup_s: float
    nnz: int  # nonzeros of L + U (0 for 'none')


def make_preconditioner(A, kind: str = "ilut", drop_tol: float | None = None,
                        fill_factor: float | None = None) -> Preconditioner:
    """'none', 'ilut' (scipy spilu; ``ILUT_DEFAULTS``) or 'ilu0' (numba ILU(0)).  setup_s: the
    factorisation's wall time."""
    if kind == "none":
        ident = lambda v: v  # noqa: E731
        return Preconditioner("none", ident, ident, 0.0, 0)
    t0 = time.perf_counter()
    if kind == "ilut":
        dt = ILUT_DEFAULTS["drop_tol"] if drop_tol is None else drop_tol
        ff = ILUT_DEFAULTS["fill_factor"] if fill_factor is None else fill_factor
        ilu = spla.spilu(sp.csc_matrix(A), drop_tol=dt, fill_factor=ff)
        setup = time.perf_counter() - t0
        return Preconditioner("ilut", ilu.solve, lambda v: ilu.solve(v, trans="T"), setup,
                              int(ilu.L.nnz + ilu.U.nnz))
    if kind == "ilu0":
        factor, lsolve, lsolve_T = (numba_kernel(k) for k in ("ilu0_factor", "ilu0_solve", "ilu0_solve_T"))
        M = sp.csr_matrix(A, copy=True)
        M.sort_indices()
        ip, ix = M.indptr.astype(np.int64), M.indices.astype(np.int64)
        a = M.data.astype(np.float64).copy()
        n = M.shape[0]
        diag = np.empty(n, dtype=np.int64)
        for i in range(n):
            row = ix[ip[i]:ip[i + 1]]
            j = np.searchsorted(row, i)
            if j >= row.size or row[j] != i:
                raise ValueError(f"ilu0: zero-pattern diagonal in row {i}")
            diag[i] = ip[i] + j
        factor(ip, ix, a, diag)
        setup = time.perf_counter() - t0

        def solve(v):
            out = np.empty(n)
            lsolve(ip, ix, a, diag, np.ascontiguousarray(v, dtype=np.float64), out)
            return out

        def solve_T(v):
            out = np.empty(n)
            lsolve_T(ip, ix, a, diag, np.ascontiguousarray(v, dtype=np.float64), out)
            return out
        return Preconditioner("ilu0", solve, solve_T, setup, int(a.size))
    raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, not {kind!r}")
