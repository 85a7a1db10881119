"""Krylov solvers and preconditioners for the Newton systems of the ITER phase (Table 2 of paper 000).

Modules, by concern:

- ``solvers``: the ten LIS Krylov methods (``SOLVERS``, ``KrylovResult``), Table 2's order and
  the paper's numbers.
- ``ops``: the vector operations and sparse operators they run on: ``NumpyOps`` (reference),
  ``REGISTRY`` (solver.dispatch; the "numba" table of ``numba_ops``), ``make_operator``.
- ``numba_ops``: the numba kernels (prange SpMV and vector operations, sequential ILU(0)).
- ``precond``: ``make_preconditioner`` ('none', 'ilut' = scipy spilu, 'ilu0' = numba ILU(0)).
- ``capture``: the real Newton systems of a short run, to and from HDF5.
- ``bench``: the Table 2 benchmark and ``run_table2`` (CSV + run.json).
- ``cli``: ``python -m solver bsp krylov`` (rule bsp_table2_000_krylov).
"""
from solver.bsp.krylov.cli import register_cli

__all__ = ["register_cli"]
