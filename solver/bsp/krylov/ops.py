"""The vector operations and sparse operators the Krylov solvers run on, per implementation.

* ``NumpyOps(xp)``: dot, norm, axpby, axpbypcz of an array module (numpy or cupy): the reference.
* ``REGISTRY`` (solver.dispatch): the "numba" table of ``numba_ops`` (``ops``: prange vector
  operations, ``csr_matvec``, the ILU(0) kernels, ``set_threads``); empty without numba.
* ``make_operator(A, impl)``: A v and A^T v, 'scipy' (CSR SpMV of scipy, one thread) or 'numba'
  (prange CSR SpMV over rows; A^T as a second CSR matrix).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solver.backend import BackendUnavailable
from solver.dispatch import Registry

IMPLS = ("scipy", "numba")


def _numba():
    from solver.bsp.krylov.numba_ops import TABLE

    return TABLE


REGISTRY = Registry("krylov", {"numba": _numba})


def numba_kernel(name: str):
    """A kernel of the numba table; BackendUnavailable without numba."""
    fn = REGISTRY.lookup("numba", name)
    if fn is None:
        raise BackendUnavailable(f"krylov: {name!r} needs the numba package (pip install numba)")
    return fn


class NumpyOps:
    """Vector operations of an array module (numpy or cupy)."""

    def __init__(self, xp=np):
        self.xp = xp

    def dot(self, x, y):
        return float(self.xp.dot(x, y))

    def norm(self, x):
        return float(self.xp.sqrt(self.xp.dot(x, x)))

    def axpby(self, a, x, b, y):
        """a x + b y (new array)."""
        return a * x + b * y

    def axpbypcz(self, a, x, b, y, c, z):
        """a x + b y + c z (new array)."""
        return a * x + b * y + c * z

    def zeros_like(self, x):
        return self.xp.zeros_like(x)

    def copy(self, x):
        return x.copy()


def vector_ops(impl: str, threads: int = 1):
    """(ops, threads in effect) of an implementation: NumPy (one thread) for 'scipy', the numba
    prange operations at ``threads`` for 'numba'."""
    if impl == "scipy":
        return NumpyOps(np), threads
    if impl != "numba":
        raise ValueError(f"implementation must be one of {IMPLS}, not {impl!r}")
    threads = numba_kernel("set_threads")(threads)
    return numba_kernel("ops")(), threads


@dataclass
class Operator:
    matvec: object
    rmatvec: object
    n: int
    nnz: int
    impl: str


def make_operator(A, impl: str = "scipy") -> Operator:
    """A v and A^T v of a scipy sparse matrix: 'scipy' (CSR, one thread) or 'numba' (prange CSR)."""
    A = sp.csr_matrix(A)
    A.sort_indices()
    AT = A.T.tocsr()
    AT.sort_indices()
    if impl == "scipy":
        return Operator(lambda v: A @ v, lambda v: AT @ v, A.shape[0], A.nnz, impl)
    if impl != "numba":
        raise ValueError(f"operator impl must be 'scipy' or 'numba', not {impl!r}")
    k = numba_kernel("csr_matvec")

    def mk(M):
        ip, ix, d = M.indptr.astype(np.int64), M.indices.astype(np.int64), M.data.astype(np.float64)

        def mv(v):
            y = np.empty(M.shape[0])
            k(ip, ix, d, np.ascontiguousarray(v, dtype=np.float64), y)
            return y
        return mv
    return Operator(mk(A), mk(AT), A.shape[0], A.nnz, impl)
