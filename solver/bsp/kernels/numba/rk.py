"""numba fast path of the RK phase (backend "numba"): ``rk_update`` takes exactly the arguments of
solver.bsp.bte.rk_update and returns the same (Phi^{s+1}, rho, PhiHat), bit for bit
(tests/test_bsp_kernels_numba_rk.py).

One pass over Phi per stage instead of the array code's ten (the loss product, the five-term sum,
the three RK passes, DENS): ``prange`` over the (i, nu, p) rows (NX * 3 * N_sbn of them, NW * NPHI
contiguous values each), and per value the operations of bte.rk_update in its order:

    H = G - Lc Phi;  H -= x;  H -= w;  H -= phi      (no scattering: H = -x - w - phi)
    s = 0:  Phi^1     = dt H + Phi
    s > 0:  Phi^{s+1} = c (dt H + Phi) + c0 Phi^0

DENS of the new row follows while it is in cache: PhiHat = (sum_m Phi^{s+1}) dphi and
rho = (sum_l PhiHat) dw, each sum in NumPy's pairwise order (``_pairwise``: the order of
``ndarray.sum`` over a contiguous last axis), so the result does not depend on the thread count
and equals the array code's.  Only float64 is supported (inputs are converted).

``stage_update`` (phase key RK_wphi: bte.advance calls it in place of WENO_w + WENO_phi + RK) goes one step further: the w and phi terms of each
row are formed in row buffers inside the same pass (weno.w_row / weno.phi_row), so only the x term
is read from memory; ~2e-16 of rk_update on the separate fast paths' terms
(docs/performance-numba-kernels.md §7).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver.bsp import bte as _bte
from solver.bsp.kernels import f64
from solver.bsp.kernels.numba._common import out_array, set_threads
from solver.bsp.kernels.numba.weno import phi_row as _phi_row, w_row as _w_row

_BLOCK = 128  # NumPy's PW_BLOCKSIZE


@njit(cache=True, fastmath=False)
def _block(a, lo, n):
    """sum(a[lo:lo + n]), n <= 128, in the order of NumPy's pairwise_sum for one block: 8 partial
    sums (fewer than 8 values: one running sum)."""
    if n < 8:
        res = 0.0
        for k in range(lo, lo + n):
            res += a[k]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    k = 8
    while k < n - (n % 8):
        r0 += a[lo + k]
        r1 += a[lo + k + 1]
        r2 += a[lo + k + 2]
        r3 += a[lo + k + 3]
        r4 += a[lo + k + 4]
        r5 += a[lo + k + 5]
        r6 += a[lo + k + 6]
        r7 += a[lo + k + 7]
        k += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while k < n:
        res += a[lo + k]
        k += 1
    return res


# The pairwise sum one level up each: blocks of more than 128 values split in halves rounded to
# multiples of 8.  Written out level by level (no recursion: numba's cache does not load recursive
# functions safely); _pw5 sums up to 4096 values.
@njit(cache=True, fastmath=False)
def _pw1(a, lo, n):
    if n <= _BLOCK:
        return _block(a, lo, n)
    n2 = n // 2 - (n // 2) % 8
    return _block(a, lo, n2) + _block(a, lo + n2, n - n2)


@njit(cache=True, fastmath=False)
def _pw2(a, lo, n):
    if n <= _BLOCK:
        return _block(a, lo, n)
    n2 = n // 2 - (n // 2) % 8
    return _pw1(a, lo, n2) + _pw1(a, lo + n2, n - n2)


@njit(cache=True, fastmath=False)
def _pw3(a, lo, n):
    if n <= _BLOCK:
        return _block(a, lo, n)
    n2 = n // 2 - (n // 2) % 8
    return _pw2(a, lo, n2) + _pw2(a, lo + n2, n - n2)


@njit(cache=True, fastmath=False)
def _pw4(a, lo, n):
    if n <= _BLOCK:
        return _block(a, lo, n)
    n2 = n // 2 - (n // 2) % 8
    return _pw3(a, lo, n2) + _pw3(a, lo + n2, n - n2)


@njit(cache=True, fastmath=False)
def _pw5(a, lo, n):
    if n <= _BLOCK:
        return _block(a, lo, n)
    n2 = n // 2 - (n // 2) % 8
    return _pw4(a, lo, n2) + _pw4(a, lo + n2, n - n2)


_LEVELS = 5
_pairwise = _pw5  # sum(a[lo:lo + n]) in the order of NumPy's pairwise_sum


def _depth(n):
    return 0 if n <= _BLOCK else 1 + max(_depth(n // 2 - (n // 2) % 8), _depth(n - n // 2 + (n // 2) % 8))


@njit(cache=True, fastmath=False, inline="always")
def _rk_row(P, P0, G, Lc, tx, tw, tp, scat, has0, dt, c, c0, dphi, dw, out, PhiHat):
    """One (i, nu, p) row: P, P0, tx, tw, tp, out (NW * NPHI); G, Lc, PhiHat (NW).  Returns rho."""
    NW = PhiHat.shape[0]
    NP = P.shape[0] // NW
    for l in range(NW):
        g = G[l] if scat else 0.0
        lc = Lc[l] if scat else 0.0
        for k in range(l * NP, (l + 1) * NP):
            v = P[k]
            if scat:
                h = g - lc * v
                h -= tx[k]
            else:
                h = -tx[k]
            h -= tw[k]
            h -= tp[k]
            h = h * dt + v
            if has0:
                h = h * c + c0 * P0[k]
            out[k] = h
    for l in range(NW):
        PhiHat[l] = _pairwise(out, l * NP, NP) * dphi
    return _pairwise(PhiHat, 0, NW) * dw


@njit(parallel=True, cache=True, fastmath=False)
def _rk_kernel(P, P0, G, Lc, tx, tw, tp, scat, has0, dt, c, c0, dphi, dw, out, PhiHat, rho):
    """Rows r of (NROW, NW * NPHI) views; G, Lc, PhiHat (NROW, NW); rho (NROW,)."""
    for r in prange(P.shape[0]):
        rho[r] = _rk_row(P[r], P0[r], G[r], Lc[r], tx[r], tw[r], tp[r], scat, has0, dt, c, c0, dphi, dw, out[r],
                         PhiHat[r])


# Inlines w_row / phi_row of weno.py.  numba's cache only notices changes of the caller's own file:
# after editing weno.py, delete the numba cache files (docs/developing.md); the tests compare this kernel
# with the separate WENO + RK kernels, so a stale cache fails them.  FMA contraction as the WENO
# kernels (inlined code takes the caller's flags), so the fused RK update is not bitwise rk_update's
# (~2e-16).
@njit(parallel=True, cache=True, fastmath={"contract"})
def _stage_kernel(P, P0, G, Lc, tx, a1, a3f, deps, alpha, eps, inv_w, inv_phi, scat, has0, dt, c, c0, dphi, dw,
                  out, PhiHat, rho):
    """P, P0, tx, out (NX, 3, NS, NW * NPHI); the w and phi terms of a row are formed in row-sized
    work arrays (L2-resident) and consumed there by the row's RK update."""
    NX, NV, NS, NWP = P.shape
    NW = PhiHat.shape[3]
    NP = NWP // NW
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        tw = np.empty(NWP)
        tp = np.empty(NWP)
        Prow = P[i, nu, p]
        d = deps[i, nu, p]
        _w_row(Prow.reshape((NW, NP)), a1[nu], -d, eps, inv_w, np.empty((NW + 6, NP)), np.empty(NP), np.empty(NP),
               tw.reshape((NW, NP)))
        _phi_row(Prow.reshape((NW, NP)), a3f[nu], d, alpha, eps, inv_phi, np.empty(NP + 6), np.empty(NP + 6),
                 np.empty(NP + 1), tp.reshape((NW, NP)))
        rho[i, nu, p] = _rk_row(Prow, P0[i, nu, p], G[i, nu, p], Lc[i, nu, p], tx[i, nu, p], tw, tp, scat, has0, dt,
                                c, c0, dphi, dw, out[i, nu, p], PhiHat[i, nu, p])


def rk_update(model, backend, s, Phi0, Phi, G, Lc, terms, dt):
    """bte.rk_update: (Phi^{s+1}, rho, PhiHat) of RK stage s, H = G - Lc Phi - sum(terms)."""
    set_threads(backend)
    P = f64(np, Phi)
    NX, NV, NS, NW, NP = P.shape
    if max(_depth(NW), _depth(NP)) > _LEVELS:
        raise ValueError(f"RK fast path: NW = {NW} or NPHI = {NP} is beyond the pairwise sums compiled here")
    nrow = NX * NV * NS
    rows = lambda a: f64(np, a).reshape(nrow, -1)  # noqa: E731
    c, c0 = _bte.RK3[s]
    scat = G is not None
    unused = np.zeros((nrow, NW))  # G and Lc without scattering (not read)
    out = out_array(model, "RK", P.shape)
    PhiHat = np.empty((NX, NV, NS, NW))
    rho = np.empty((NX, NV, NS))
    _rk_kernel(P.reshape(nrow, -1), rows(Phi0) if s > 0 else P.reshape(nrow, -1),  # Phi0 not read at s = 0
               rows(G) if scat else unused, rows(Lc) if scat else unused,
               *(rows(t) for t in terms), scat, s > 0, float(dt), float(c), float(c0),
               float(model.dphi), float(model.dw), out.reshape(nrow, -1), PhiHat.reshape(nrow, NW),
               rho.reshape(nrow))
    return out, rho, PhiHat


def stage_update(model, backend, s, Phi0, Phi, G, Lc, tx, deps_dx, A_eps, dt, eps=None):
    """``rk_update`` with the w and phi terms formed inside (weno_w, weno_phi of Phi): one pass over
    Phi per stage besides the x term.  (Phi^{s+1}, rho, PhiHat)."""
    from solver.bsp import weno as _weno

    set_threads(backend)
    P = f64(np, Phi)
    NX, NV, NS, NW, NP = P.shape
    if max(_depth(NW), _depth(NP)) > _LEVELS:
        raise ValueError(f"RK fast path: NW = {NW} or NPHI = {NP} is beyond the pairwise sums compiled here")
    eps = _weno._eps(model) if eps is None else float(eps)
    c, c0 = _bte.RK3[s]
    scat = G is not None
    unused = np.zeros((NX, NV, NS, NW))  # G and Lc without scattering (not read)
    flat = lambda a: f64(np, a).reshape(NX, NV, NS, NW * NP)  # noqa: E731
    out = out_array(model, "RK", P.shape)
    PhiHat = np.empty((NX, NV, NS, NW))
    rho = np.empty((NX, NV, NS))
    _stage_kernel(flat(P), flat(Phi0 if s > 0 else P), f64(np, G) if scat else unused,
                  f64(np, Lc) if scat else unused, flat(tx), f64(np, model.a1), f64(np, model.a3_factor),
                  f64(np, deps_dx), float(A_eps * model.A3), eps, 1.0 / model.dw, 1.0 / model.dphi, scat, s > 0,
                  float(dt), float(c), float(c0), float(model.dphi), float(model.dw), out.reshape(NX, NV, NS, NW * NP),
                  PhiHat, rho)
    return out, rho, PhiHat
