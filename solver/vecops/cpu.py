"""CPU reference columns: NumPy/SciPy (also the test oracle) and the float64 answers of the error
checks.  The numba all-core kernels are the "numba" table of ``solver.vecops.REGISTRY``
(``numba_cpu``)."""
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
