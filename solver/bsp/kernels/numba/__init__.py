"""numba fast paths of the "numba" backend (multi-threaded CPU; the OpenMP code of paper 000) and
the dispatch table ``TABLE`` (phase -> function) of solver.bsp.kernels.  Importing this package
needs numba (ModuleNotFoundError otherwise: the phases stay on the array reference).

    weno.py        WENO_x, WENO_w, WENO_phi
    scattering.py  scat_gain, scat_loss
    rk.py          RK (the stage update fused with the loss product, the sum of the terms and DENS);
                   stage_update = RK_wphi (also the w and phi terms in the same pass)
    iter.py        eigen, Frechet, construct_linsys, solve_linsys, newton_rhs, newton_norms, newton_iteration,
                   iter_start (ITER)

Kernels are compiled on first use with ``cache=True``: later processes load them from numba's cache
(NUMBA_CACHE_DIR if set, else __pycache__ beside these files if writable, else ~/.cache/numba;
docs/developing.md).  No fastmath: the multiply-adds are fused explicitly (weno._fma), so a cached
kernel computes the same bits as a freshly compiled one (tests/test_bsp_kernels_numba_cache.py).
"""
from __future__ import annotations

from solver.bsp.kernels.numba import iter as iter_, rk, scattering, weno

TABLE = {
    "WENO_x": weno.weno_x,
    "WENO_w": weno.weno_w,
    "WENO_phi": weno.weno_phi,
    "scat_gain": scattering.scat_gain,
    "scat_loss": scattering.scat_loss,
    "RK": rk.rk_update,
    "RK_wphi": rk.stage_update,
    "eigen": iter_.eigen,
    "Frechet": iter_.frechet,
    "construct_linsys": iter_.construct_linsys,
    "solve_linsys": iter_.solve_linsys,
    "newton_rhs": iter_.newton_rhs,
    "newton_norms": iter_.newton_norms,
    "newton_iteration": iter_.newton_iteration,
    "iter_start": iter_.iter_start,
}
