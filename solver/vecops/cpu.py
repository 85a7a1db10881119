"""CPU columns: the NumPy/SciPy reference (also the test oracle) and numba all-core kernels.

The numba kernels are the many-core stand-in for the paper's Xeon Phi (same loops as the paper's
"CPU routine", parallelised over rows / elements with ``prange``).  The numba DOT accumulates in
float64 (the paper's CPU loop accumulates in float; at 50M elements a float accumulator loses
about four digits); AXPY and SpMV work in the array precision.
"""
from __future__ import annotations

import numpy as np

# -- NumPy / SciPy reference ---------------------------------------------------------------------


def axpy_ref(a, x, y, out=None):
    """r = a*x + y in the array precision (two passes, no temporaries)."""
    out = np.empty_like(x) if out is None else out
    np.multiply(x, x.dtype.type(a), out=out)
    np.add(out, y, out=out)
    return out


def dot_ref(x, y):
    """BLAS dot in the array precision (the NumPy column)."""
    return np.dot(x, y)


def spmv_ref(A, v, out=None):
    """SciPy CSR matvec (serial C++ loop) in the array precision."""
    sp = getattr(A, "_scipy", None)
    if sp is None:
        sp = A.to_scipy()
        A._scipy = sp
    r = sp @ v
    if out is not None:
        out[...] = r
        return out
    return r


# exact-ish float64 answers for error checks
def axpy_exact(a, x, y):
    return float(a) * x.astype(np.float64) + y.astype(np.float64)


def dot_exact(x, y):
    return float(np.dot(x.astype(np.float64), y.astype(np.float64)))


def spmv_exact(A, v):
    import scipy.sparse as sp

    M = sp.csr_matrix((A.data.astype(np.float64), A.indices, A.indptr), shape=(A.rows, A.cols))
    return M @ v.astype(np.float64)


def rel_err(got, exact) -> float:
    """Max-norm relative error ``max|got - exact| / max|exact|`` (scalar or array)."""
    got = np.asarray(got, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    den = float(np.max(np.abs(exact))) or 1.0
    return float(np.max(np.abs(got - exact)) / den)


# -- numba all-core kernels ----------------------------------------------------------------------

_NUMBA = {}


def _kernels():
    if _NUMBA:
        return _NUMBA
    from numba import njit, prange

    @njit(parallel=True, cache=True, fastmath=False)
    def axpy_nb(a, x, y, r):
        for i in prange(x.size):
            r[i] = a * x[i] + y[i]
        return r

    @njit(parallel=True, cache=True)
    def dot_nb(x, y):
        s = 0.0
        for i in prange(x.size):
            s += np.float64(x[i]) * np.float64(y[i])
        return s

    @njit(parallel=True, cache=True)
    def spmv_nb(AA, JA, IA, v, r):
        for row in prange(r.size):
            acc = r.dtype.type(0.0)
            for i in range(IA[row], IA[row + 1]):
                acc += AA[i] * v[JA[i]]
            r[row] = acc
        return r

    @njit(parallel=True, cache=True)
    def copy_nb(x, r):
        for i in prange(x.size):
            r[i] = x[i]
        return r

    _NUMBA.update(axpy=axpy_nb, dot=dot_nb, spmv=spmv_nb, copy=copy_nb)
    return _NUMBA


def axpy_numba(a, x, y, out):
    return _kernels()["axpy"](x.dtype.type(a), x, y, out)


def dot_numba(x, y):
    return _kernels()["dot"](x, y)


def spmv_numba(A, v, out):
    return _kernels()["spmv"](A.data, A.indices, A.indptr, v, out)


def copy_numba(x, out):
    return _kernels()["copy"](x, out)
