"""CUDA fast path of the RK phase (rk.cu): ``rk_update`` takes exactly the arguments of
solver.bsp.bte.rk_update and returns the same (Phi^{s+1}, rho, PhiHat), to rounding.

Two launches per stage: bsp_rk_dens reads Phi, Phi^0 (stages 1, 2), the three WENO terms, G and
Lc once and writes Phi^{s+1} and PhiHat (one block per LINES whole phi lines, about TILE values);
bsp_rho sums PhiHat over the energies (blocks of rows staged through shared memory, each row summed by
one thread in the order l = 0 .. NW-1).

``stage_update`` (phase key RK_wphi; reference solver.bsp.bte.stage_update) also forms the WENO w
and phi terms: bsp_wphi_rk of weno.cu reads a chunk of energy rows of one (i, nu, p) plane with 3
halo rows, forms both terms in shared memory and applies the same update, so that Phi is read once
per stage for w, phi and RK (and the two terms are never written); its result equals WENO_w +
WENO_phi + ``rk_update`` bit for bit.  Both run only with ``numerics.bte_kernels: fast`` or ``fast2``
(solver.bsp.kernels.FAST_ONLY); with ``fast2`` bsp_wphi_rk is built with -DBSP_WENO_FAST2=1 (the w and phi
faces in fewer FP64 operations, one reciprocal per phi face pair: within 1e-12 of the reference, not bit-equal
to the separate kernels; docs/performance-bte-kernels.md §12).  Only float64 is computed; other dtypes are converted and the
result cast back.
"""
from __future__ import annotations

import numpy as np

import cupy as cp

from solver.bsp import bte as _bte
from solver.bsp import weno as _weno
from solver.bsp.kernels import f64
from solver.bsp.kernels.cuda import _build, weno

SOURCE = "rk.cu"
OPTIONS = ("--fmad=false",)  # the FMAs are written out (fma()): the host build computes the same bits
BLOCK = 256  # threads per block; bsp_wphi_rk is compiled with __launch_bounds__(256, 6) (weno.cu)
TILE = 1536  # values per block: LINES = TILE // NPHI whole phi lines (12 KB of shared memory)
RHO_BLOCK = 256  # threads per block of bsp_rho (x RHO_UNROLL = 10 loads each >= RHO_TILE: one load round)
RHO_ROWS = 4  # rows (i, nu, p) per block of bsp_rho: 293 blocks standard, 581 fine (docs/performance-bte-kernels.md §14)
RHO_TILE = _build.define(SOURCE, "RHO_TILE")  # bsp_rho's shared tile (values; rk.cu's define, 2400): 4 rows up to NW = 600
# shared memory budget of one block of bsp_wphi_rk (sets its rows per block): 32 KB ran 6-7 % faster
# than 48 KB (more blocks per SM) on the H200, standard and fine mesh (docs/performance-bte-kernels.md §7);
# 36 KB (round 7, §11) still fits 6 blocks per SM (6 x (36 + 1) KB <= 228 KB) and holds 16 rows at NPHI = 48
SHARED = 36 * 1024


def rk_update(model, backend, s, Phi0, Phi, G, Lc, terms, dt):
    """bte.rk_update: (Phi^{s+1}, rho, PhiHat) of RK stage s, H = G - Lc Phi - sum(terms)."""
    P = f64(cp, Phi)
    NX, NV, NS, NW, NPHI = P.shape
    tx, tw, tp = (f64(cp, t) for t in terms)
    c, c0 = _bte.RK3[s]
    dummy = weno._dummy()
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
    return _finish(model, Phi, out, PhiHat, rho, lines)


def _finish(model, Phi, out, PhiHat, rho, lines):
    """rho = dw sum_l PhiHat (bsp_rho) and the results in Phi's dtype."""
    _rho(model, PhiHat, rho, out.shape[-1], lines)
    return out.astype(Phi.dtype, copy=False), rho.astype(Phi.dtype, copy=False), PhiHat.astype(Phi.dtype, copy=False)


def _rho(model, PhiHat, rho, NPHI, lines):
    """rho = dw sum_l PhiHat, one launch of bsp_rho (of the rk.cu build for NPHI and lines): blocks of
    rho_rows(NW) rows, each summed in the order l = 0 .. NW-1 by one thread from shared memory."""
    NX, NV, NS, NW = PhiHat.shape
    nrow = NX * NV * NS
    rows = rho_rows(NW)
    fr = _build.function(SOURCE, "bsp_rho", OPTIONS, {"NPHI_": NPHI, "LINES": lines})
    _build.launch(fr, -(-nrow // rows) * RHO_BLOCK, RHO_BLOCK,
                  (PhiHat, rho, np.int32(nrow), np.int32(NW), np.int32(rows), np.float64(model.dw)))


def rho_rows(NW):
    """Rows per block of bsp_rho: RHO_ROWS, fewer where RHO_ROWS rows exceed the tile (1: the row in chunks)."""
    return max(1, min(RHO_ROWS, RHO_TILE // NW))


def rows_per_block(NW, NPHI):
    """Energy rows per block of bsp_wphi_rk: the most that fit SHARED (see weno.cu), spread evenly
    over the chunks of a plane; 0 if not even one row fits or NPHI < 3 (the periodic padding)."""
    if NPHI < 3:
        return 0
    per_row = 8 * ((NPHI | 1) + 2 * NPHI + 2 * (NPHI + 6))  # ph, gw, gpm (double2, padded), fw
    most = (SHARED - 8 * 7 * NPHI - 4 * NPHI) // per_row  # the 6 halo rows of gw, the extra fw row, lw
    if most < 1:
        return 0
    nchunk = -(-NW // most)
    return -(-NW // nchunk)


FAST2_MIN_EPS = weno.FAST2_MIN_EPS  # fast2's phi pair divides by s+ s- >= 100 eps^8: below this eps, fast's faces


def wphi_defines(model, NPHI, rows):
    """The -D defines of bsp_wphi_rk: the fast build, and with ``numerics.bte_kernels: fast2`` (and WENO eps
    >= FAST2_MIN_EPS) the fast2 faces (weno.cu: one reciprocal per phi face pair, fewer FP64 operations) and
    the block size as a constant."""
    d = {"BSP_WENO_FAST": 1, "NPHI_": NPHI, "LROWS": rows}
    if weno.fast2(model, _weno._eps(model)):  # the same test as WENO_x's build
        d.update(BSP_WENO_FAST2=1, WPHI_BLOCK=BLOCK)
    return d


def stage_update(model, backend, s, Phi0, Phi, G, Lc, tx, deps_dx, A_eps, dt):
    """bte.stage_update: (Phi^{s+1}, rho, PhiHat) of RK stage s with the WENO w and phi terms of
    Phi formed in the same kernel (H = G - Lc Phi - (tx + w + phi terms))."""
    P = f64(cp, Phi)
    NX, NV, NS, NW, NPHI = P.shape
    if rows_per_block(NW, NPHI) == 0:  # a phi line too long for the tile: the separate kernels
        terms = (tx, weno.weno_w(model, backend, Phi, deps_dx), weno.weno_phi(model, backend, Phi, deps_dx, A_eps))
        return rk_update(model, backend, s, Phi0, Phi, G, Lc, terms, dt)
    scat = G is not None
    Gc, Lcc = (f64(cp, G), f64(cp, Lc)) if scat else (None, None)
    P0 = f64(cp, Phi0) if s > 0 else None
    out = cp.empty_like(P)
    PhiHat = cp.empty((NX, NV, NS, NW), dtype=cp.float64)
    rho = cp.empty((NX, NV, NS), dtype=cp.float64)
    if on_device(A_eps):  # numerics.bte_speculate: A_eps still on the device (ITER's tail, not read yet)
        scalars = {"scal": scal_into(model, A_eps, dt, cp.empty(2))}
    else:
        scalars = {"alpha": float(A_eps * model.A3), "dt": dt}  # alpha as weno.weno_phi forms it
    stage_into(model, backend, s, P0, P, Gc, Lcc, f64(cp, tx), f64(cp, deps_dx), out, rho, PhiHat, **scalars)
    return out.astype(Phi.dtype, copy=False), rho.astype(Phi.dtype, copy=False), PhiHat.astype(Phi.dtype, copy=False)


def on_device(A_eps) -> bool:
    """Whether A_eps is a device array (numerics.bte_speculate: ITER's stage tail before the host read it)."""
    return type(A_eps).__module__.split(".")[0] == "cupy"  # (not cp.ndarray: the CPU emulation stands in for cp)


def scal_into(model, A_eps, dt, scal):
    """(alpha, dt) of a stage into the device array ``scal`` (2 float64) from A_eps on the device, by one launch
    (kernel bsp_scal): alpha = A_eps A_3, the product the host forms, bit for bit; returns ``scal``."""
    NPHI = model.NPHI  # the rk.cu build bsp_rho of this mesh runs from (the module is compiled once)
    _build.launch(_build.function(SOURCE, "bsp_scal", OPTIONS, {"NPHI_": NPHI, "LINES": max(1, TILE // NPHI)}), 1, 1,
                  (A_eps, np.float64(model.A3), np.float64(dt), scal))
    return scal


def stage_into(model, backend, s, P0, P, Gc, Lcc, tx, deps, out, rho, PhiHat, alpha=0.0, dt=0.0, scal=None):
    """The launches of stage_update (bsp_wphi_rk, then bsp_rho) on float64 C-contiguous arrays, writing
    out, rho and PhiHat; Gc = Lcc = None: no scattering; P0 None: stage 0.  ``scal``: a device array
    (alpha, dt) that the kernel reads instead of the arguments (the replayed graph of bte_graph.py)."""
    NX, NV, NS, NW, NPHI = P.shape
    rows = rows_per_block(NW, NPHI)
    c, c0 = _bte.RK3[s]
    dummy = weno._dummy()
    scat = Gc is not None
    a1 = f64(cp, model.on(backend, "a1"))
    a3f = f64(cp, model.on(backend, "a3_factor"))
    nchunk = -(-NW // rows)
    fn = _build.function(weno.SOURCE, "bsp_wphi_rk", weno.OPTIONS, wphi_defines(model, NPHI, rows))
    _build.launch(fn, NX * NV * NS * nchunk * BLOCK, BLOCK,
                  (P, dummy if P0 is None else P0, Gc if scat else dummy, Lcc if scat else dummy, tx, a1, a3f, deps,
                   out, PhiHat, np.int32(NS), np.int32(NW), np.int32(nchunk), np.int32(1 if scat else 0),
                   np.int32(0 if P0 is None else 1), np.float64(alpha), np.float64(_weno._eps(model)),
                   np.float64(1.0 / model.dw), np.float64(1.0 / model.dphi), np.float64(dt), np.float64(c),
                   np.float64(c0), np.float64(model.dphi), dummy if scal is None else scal,
                   np.int32(0 if scal is None else 1)))
    _rho(model, PhiHat, rho, NPHI, max(1, TILE // NPHI))
