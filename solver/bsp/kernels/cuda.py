"""CUDA fast paths of the cupy backend (CuPy RawKernel / ElementwiseKernel).

Two parts, kept apart so that they can grow independently: ``cuda_bte`` (BTE: scattering gain
and loss, WENO x/w/phi) and ``cuda_iter`` (ITER: eigenpairs, the Newton linear system).  Each
exports the functions it implements in ``__all__``; a part missing or failing to import leaves
its phases on the array reference.
"""
from __future__ import annotations

import importlib

__all__: list[str] = []
for _part in ("cuda_bte", "cuda_iter"):
    try:
        _mod = importlib.import_module(f"solver.bsp.kernels.{_part}")
    except ImportError:  # no CuPy, or the part does not exist yet
        continue
    for _name in getattr(_mod, "__all__", []):
        globals()[_name] = getattr(_mod, _name)
        __all__.append(_name)
