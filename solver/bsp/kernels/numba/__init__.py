"""numba fast paths of the "numba" backend (multi-threaded CPU; the OpenMP code of paper 000) and
the dispatch table ``TABLE`` (phase -> function) of solver.bsp.kernels.  Importing this package
needs numba (ModuleNotFoundError otherwise: the phases stay on the array reference).

    weno.py        WENO_x, WENO_w, WENO_phi
    scattering.py  scat_gain, scat_loss

Kernels are compiled on first use (``cache=True``: later processes load them from __pycache__).
"""
from __future__ import annotations

from solver.bsp.kernels.numba import scattering, weno

TABLE = {
    "WENO_x": weno.weno_x,
    "WENO_w": weno.weno_w,
    "WENO_phi": weno.weno_phi,
    "scat_gain": scattering.scat_gain,
    "scat_loss": scattering.scat_loss,
}
