"""CUDA fast paths of the cupy backend (CuPy RawKernel / ElementwiseKernel).

Parts, kept apart so that they can grow independently: ``cuda_bte`` (BTE: scattering gain
and loss, WENO x/w/phi), ``cuda_iter`` (ITER: eigenpairs; its dense Newton system stays
importable as a baseline) and ``cuda_blocktri`` (ITER: Frechet kernel and the block-tridiagonal
Newton system, which replace cuda_iter's dense construct_linsys/solve_linsys: a later part wins
on a shared name).  Each exports the functions it implements in ``__all__``; a part missing or
failing to import leaves its phases on the array reference (or the earlier part's version).
"""
from __future__ import annotations

import importlib

__all__: list[str] = []
for _part in ("cuda_bte", "cuda_iter", "cuda_blocktri"):
    try:
        _mod = importlib.import_module(f"solver.bsp.kernels.{_part}")
    except ImportError:  # no CuPy, or the part does not exist yet
        continue
    for _name in getattr(_mod, "__all__", []):
        globals()[_name] = getattr(_mod, _name)
        if _name not in __all__:
            __all__.append(_name)
