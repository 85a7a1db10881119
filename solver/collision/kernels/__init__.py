"""Fast paths of the collision integral (paper 004): one table per backend (solver.dispatch).

- ``numba_cpu``: ``gain`` (prange over the cells i, sums over j and n) and ``gain_cells`` (the same
  on a subset of cells: the sampled single-core timings of ``collision bench``).
- ``cuda``: ``gain`` (RawKernel of ``gain.cu``).

The reference is ``CollisionOperator.gain_reference`` (NumPy, vectorised per offset m); a
backend without a table (numpy) or without its package runs it.  Every fast path takes the
operator and the (N, N, N) distribution: ``gain(op, f)``.
"""
from solver.dispatch import Registry


def _numba():
    from solver.collision.kernels.numba_cpu import TABLE

    return TABLE


def _cupy():
    from solver.collision.kernels.cuda import TABLE

    return TABLE


REGISTRY = Registry("collision", {"numba": _numba, "cupy": _cupy})
