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

``stage_update`` (phase key RK_wphi: bte.advance calls it in place of WENO_w + WENO_phi + RK) goes one step
further: the w and phi terms are formed inside the same pass, one w level l at a time (the faces of weno.py's
w_row and phi_row, interleaved with the RK update of that level), so only the x term is read from memory; ~2e-16
of rk_update on the separate fast paths' terms (docs/performance-numba-kernels.md §7, §9).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver.bsp import bte as _bte
from solver.bsp.kernels import f64
from solver.bsp.kernels.numba._common import out_array, set_threads
from solver.bsp.kernels.numba.weno import _face, _fma

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


# Inlines weno._face.  numba's cache only notices changes of the caller's own file: after editing weno.py, delete
# the numba cache files (docs/developing.md); the tests compare this kernel with the reference, so a stale cache
# fails them.  No fastmath: the multiply-adds are fused explicitly (weno._fma, as the WENO kernels), so the kernel
# computes the same bits freshly compiled and loaded from numba's cache (with fastmath "contract" it did not:
# docs/performance-numba-kernels.md section 10); the fused RK update is not bitwise rk_update's (~2e-16).
@njit(parallel=True, cache=True, fastmath=False)
def _stage_kernel(P, P0, G, Lc, tx, a1, a3f, deps, alpha, eps, inv_w, inv_phi, scat, has0, dt, c, c0, dphi, dw,
                  out, PhiHat, rho):
    """P, P0, tx, out (NX, 3, NS, NW * NPHI); items the (i, nu, p) rows.  One sweep upwards in w per row: at
    each l the w face above l (the padded w products a1 (-d eps/dx) Phi filled three rows ahead), the phi faces
    of l, the RK update and PhiHat of the NPHI values of l.  So the streams of the row (Phi, Phi^0, the x term,
    the output) advance together with the compute instead of in a memory-only phase per row (§9)."""
    NX, NV, NS, NWP = P.shape
    NW = PhiHat.shape[3]
    NP = NWP // NW
    half = NP // 2
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        Pr = P[i, nu, p]
        P0r = P0[i, nu, p]
        txr = tx[i, nu, p]
        outr = out[i, nu, p]
        a1n = a1[nu]
        a3n = a3f[nu]
        d = deps[i, nu, p]
        md = -d
        gp = np.empty((NW + 6, NP))  # padded w products: row l + 3 = node l
        f = np.empty(NP)  # the w face below the current l
        tw = np.empty(NP)
        gpp = np.empty(NP + 6)
        gpm = np.empty(NP + 6)
        fph = np.empty(NP + 1)
        tp = np.empty(NP)
        for l in range(3):
            for m in range(NP):
                gp[l + 3, m] = (a1n[l, m] * md) * Pr[l * NP + m]
        for m in range(NP):
            mp = (m + half) % NP
            for q in range(3):  # g_{-q-1}(phi) = a2(w_q, phi) Phi(w_q, phi + pi): padded 2 - q
                gp[2 - q, m] = (a1n[q, m] * md) * Pr[q * NP + mp]
        for m in range(NP):
            tw[m] = _face(gp[0, m], gp[1, m], gp[2, m], gp[3, m], gp[4, m], gp[5, m], (a1n[0, m] * md) > 0.0, eps)
        for m in range(NP):  # bottom face (h(phi) - h(phi + pi)) / 2
            f[m] = 0.5 * (tw[m] - tw[(m + half) % NP])
        for l in range(NW):
            if l + 1 < NW:  # w face l + 1 (padded rows l + 1 .. l + 6); the top face NW is 0
                r = l + 3
                if r < NW:
                    for m in range(NP):
                        gp[r + 3, m] = (a1n[r, m] * md) * Pr[r * NP + m]
                else:
                    for m in range(NP):
                        gp[r + 3, m] = gp[NW + 2, m]
                for m in range(NP):
                    fc = _face(gp[l + 1, m], gp[l + 2, m], gp[l + 3, m], gp[l + 4, m], gp[l + 5, m], gp[l + 6, m],
                               (a1n[0, m] * md) > 0.0, eps)
                    tw[m] = (fc - f[m]) * inv_w
                    f[m] = fc
            else:
                for m in range(NP):
                    tw[m] = -f[m] * inv_w
            for m in range(NP):  # phi: Lax-Friedrichs split, periodic ghosts
                a3 = a3n[l, m] * d
                v = Pr[l * NP + m]
                gpp[m + 3] = ((a3 + alpha) * v) * 0.5
                gpm[m + 3] = ((a3 - alpha) * v) * 0.5
            for q in range(3):
                gpp[q] = gpp[NP + q]
                gpm[q] = gpm[NP + q]
                gpp[NP + 3 + q] = gpp[3 + q]
                gpm[NP + 3 + q] = gpm[3 + q]
            for j in range(NP):
                fph[j] = (_face(gpp[j], gpp[j + 1], gpp[j + 2], gpp[j + 3], gpp[j + 4], gpp[j + 5], True, eps)
                          + _face(gpm[j], gpm[j + 1], gpm[j + 2], gpm[j + 3], gpm[j + 4], gpm[j + 5], False, eps))
            fph[NP] = fph[0]
            for m in range(NP):
                tp[m] = (fph[m + 1] - fph[m]) * inv_phi
            g = G[i, nu, p, l] if scat else 0.0
            lc = Lc[i, nu, p, l] if scat else 0.0
            for m in range(NP):  # the RK update of _rk_row, the multiply-adds fused (_fma)
                kk = l * NP + m
                v = Pr[kk]
                if scat:
                    h = _fma(-lc, v, g)
                    h -= txr[kk]
                else:
                    h = -txr[kk]
                h -= tw[m]
                h -= tp[m]
                h = _fma(h, dt, v)
                if has0:
                    h = _fma(h, c, c0 * P0r[kk])
                outr[kk] = h
            PhiHat[i, nu, p, l] = _pairwise(outr, l * NP, NP) * dphi
        rho[i, nu, p] = _pairwise(PhiHat[i, nu, p], 0, NW) * dw


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
