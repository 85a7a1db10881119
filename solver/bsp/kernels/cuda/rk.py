"""CUDA fast path of the RK phase (rk.cu): ``rk_update`` takes exactly the arguments of
solver.bsp.bte.rk_update and returns the same (Phi^{s+1}, rho, PhiHat), to rounding.

Two launches per stage: bsp_rk_dens reads Phi, Phi^0 (stages 1, 2), the three WENO terms, G and
Lc once and writes Phi^{s+1} and PhiHat (one block per LINES whole phi lines, about TILE values);
bsp_rho sums PhiHat over the energies.  It runs only with ``numerics.bte_kernels: fast``
(solver.bsp.kernels.FAST_ONLY).  Only float64 is computed; other dtypes are converted and the
result cast back.
"""
from __future__ import annotations

import numpy as np

import cupy as cp

from solver.bsp import bte as _bte
from solver.bsp.kernels import f64
from solver.bsp.kernels.cuda import _build

SOURCE = "rk.cu"
OPTIONS = ("--fmad=false",)  # the FMAs are written out (fma()): the host build computes the same bits
BLOCK = 256
TILE = 1536  # values per block: LINES = TILE // NPHI whole phi lines (12 KB of shared memory)
RHO_BLOCK = 128


def rk_update(model, backend, s, Phi0, Phi, G, Lc, terms, dt):
    """bte.rk_update: (Phi^{s+1}, rho, PhiHat) of RK stage s, H = G - Lc Phi - sum(terms)."""
    P = f64(cp, Phi)
    NX, NV, NS, NW, NPHI = P.shape
    tx, tw, tp = (f64(cp, t) for t in terms)
    c, c0 = _bte.RK3[s]
    dummy = cp.zeros(1, dtype=cp.float64)
    scat = G is not None
    Gc, Lcc = (f64(cp, G), f64(cp, Lc)) if scat else (dummy, dummy)
    P0 = f64(cp, Phi0) if s > 0 else dummy
    out = cp.empty_like(P)
    PhiHat = cp.empty((NX, NV, NS, NW), dtype=cp.float64)
    rho = cp.empty((NX, NV, NS), dtype=cp.float64)
    nline = NX * NV * NS * NW
    lines = max(1, TILE // NPHI)
    if lines * (NPHI | 1) * 8 > 48 * 1024:
        raise ValueError(f"RK fast path: a phi line of {NPHI} values does not fit the 48 KB of shared memory")
    fn = _build.function(SOURCE, "bsp_rk_dens", OPTIONS, {"NPHI_": NPHI, "LINES": lines})
    _build.launch(fn, -(-nline // lines) * BLOCK, BLOCK,
                  (P, P0, Gc, Lcc, tx, tw, tp, out, PhiHat, np.int32(nline), np.int32(1 if scat else 0),
                   np.int32(1 if s > 0 else 0), np.float64(dt), np.float64(c), np.float64(c0),
                   np.float64(model.dphi)))
    nrow = NX * NV * NS
    fr = _build.function(SOURCE, "bsp_rho", OPTIONS, {"NPHI_": NPHI, "LINES": lines})
    _build.launch(fr, nrow, RHO_BLOCK, (PhiHat, rho, np.int32(nrow), np.int32(NW), np.float64(model.dw)))
    return out.astype(Phi.dtype, copy=False), rho.astype(Phi.dtype, copy=False), PhiHat.astype(Phi.dtype, copy=False)
