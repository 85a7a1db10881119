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

``stage_update`` (phase key RK_wphi) goes one step further: the w and phi terms of each row are
formed in row buffers inside the same pass (weno.w_row / weno.phi_row), so only the x term is read
from memory; ~2e-16 of rk_update on the separate fast paths' terms
(docs/performance-numba-kernels.md §7).  ``stage_update_x`` (phase key RK_xwphi: bte.advance
calls it in place of WENO_x + WENO_w + WENO_phi + RK) also forms the x term in the pass: items are
(nu, p, segment of x rows), swept in x with the flux products of six x rows in a ring buffer and
the previous x face row kept (the faces of weno._dx_kernel), so a stage reads Phi (and Phi^0) once
and writes Phi^{s+1} once (docs/performance-numba-kernels.md §8).
"""
from __future__ import annotations

import numpy as np
import numba
from numba import njit, prange, uint64

from solver.bsp import bte as _bte
from solver.bsp.kernels import f64
from solver.bsp.kernels.numba._common import out_array, set_threads
from solver.bsp.kernels.numba.weno import _face, _masks, phi_row as _phi_row, w_row as _w_row

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


@njit(cache=True, fastmath={"contract"}, inline="always")
def _x_g_row(P, r, nu, p, a1, in_l, in_r, r0, rL, closed, g):
    """g (NW * NPHI) = the padded x flux product of row r (-3 <= r < NX + 3) of column (nu, p), as
    weno._dx_kernel: a1 Phi inside, outside the contacts a1 Phi of the contact row, times rho_eq/rho
    on inflow angles (closed contacts: constant extension)."""
    NX = P.shape[0]
    un = uint64(P.shape[3])
    if 0 <= r < NX:
        for c in range(un):
            g[c] = P[r, nu, p, c] * a1[nu, c]
        return
    src = 0 if r < 0 else NX - 1
    inflow = in_l if r < 0 else in_r
    f = r0[nu, p] if r < 0 else rL[nu, p]
    for c in range(un):
        v = P[src, nu, p, c] * a1[nu, c]
        g[c] = v * f if (not closed and inflow[nu, c] != 0) else v


@njit(cache=True, fastmath={"contract"}, inline="always")
def _x_faces(ring, b, lf, eps, out):
    """out = the x faces between the six rows held in ring slots b, b + 1, ... (mod 6), bottom up."""
    s0 = uint64(b % 6)
    s1 = uint64((b + 1) % 6)
    s2 = uint64((b + 2) % 6)
    s3 = uint64((b + 3) % 6)
    s4 = uint64((b + 4) % 6)
    s5 = uint64((b + 5) % 6)
    for c in range(uint64(out.shape[0])):
        out[c] = _face(ring[s0, c], ring[s1, c], ring[s2, c], ring[s3, c], ring[s4, c], ring[s5, c], lf[c], eps)


# Inlines weno.py's functions (same cache caveat as _stage_kernel).
@njit(parallel=True, cache=True, fastmath={"contract"})
def _stage_x_kernel(P, P0, G, Lc, a1, in_l, in_r, left, r0, rL, closed, a3f, deps, alpha, eps, inv_x, inv_w,
                    inv_phi, scat, has0, dt, c, c0, dphi, dw, nseg, out, PhiHat, rho):
    """_stage_kernel with the x term formed in the same pass.  P, P0, out (NX, 3, NS, NW * NPHI);
    a1, in_l, in_r, left (3, NW * NPHI).  Item (nu, p, seg): rows i0 <= i < i1 of that column; the
    flux products of rows i-2..i+3 sit in a ring of six row buffers, the face i-1/2 is kept, so each
    face is evaluated once per segment (one extra face row and five extra g rows per segment)."""
    NX, NV, NS, NWP = P.shape
    NW = PhiHat.shape[3]
    NP = NWP // NW
    for k in prange(NV * NS * nseg):
        nu = k // (NS * nseg)
        p = (k // nseg) % NS
        seg = k % nseg
        i0 = seg * NX // nseg
        i1 = (seg + 1) * NX // nseg
        ring = np.empty((6, NWP))
        fx = np.empty(NWP)  # the face below the current row
        fc = np.empty(NWP)
        lf = np.empty(NWP, dtype=np.bool_)
        tx = np.empty(NWP)
        tw = np.empty(NWP)
        tp = np.empty(NWP)
        gw = np.empty((NW + 6, NP))
        h0 = np.empty(NP)
        fw = np.empty(NP)
        gpp = np.empty(NP + 6)
        gpm = np.empty(NP + 6)
        fphi = np.empty(NP + 1)
        for v in range(NWP):
            lf[v] = left[nu, v] != 0
        for r in range(i0 - 3, i0 + 3):  # row r in slot (r + 3) % 6
            _x_g_row(P, r, nu, p, a1, in_l, in_r, r0, rL, closed, ring[(r + 3) % 6])
        if closed and i0 == 0:
            fx[:] = 0.0
        else:
            _x_faces(ring, i0, lf, eps, fx)
        for i in range(i0, i1):
            _x_g_row(P, i + 3, nu, p, a1, in_l, in_r, r0, rL, closed, ring[i % 6])
            if closed and i == NX - 1:
                fc[:] = 0.0
            else:
                _x_faces(ring, i + 1, lf, eps, fc)
            for v in range(uint64(NWP)):
                tx[v] = (fc[v] - fx[v]) * inv_x
                fx[v] = fc[v]
            Prow = P[i, nu, p]
            d = deps[i, nu, p]
            _w_row(Prow.reshape((NW, NP)), a1[nu].reshape((NW, NP)), -d, eps, inv_w, gw, h0, fw, tw.reshape((NW, NP)))
            _phi_row(Prow.reshape((NW, NP)), a3f[nu], d, alpha, eps, inv_phi, gpp, gpm, fphi, tp.reshape((NW, NP)))
            rho[i, nu, p] = _rk_row(Prow, P0[i, nu, p], G[i, nu, p], Lc[i, nu, p], tx, tw, tp, scat, has0, dt, c, c0,
                                    dphi, dw, out[i, nu, p], PhiHat[i, nu, p])


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


def _segments(NX, columns, threads):
    """Segments per x column for stage_update_x: the count that minimises the largest work of a
    thread under numba's static split of the items into equal chunks, one segment costing its rows
    plus ~0.3 row for its extra face row and g rows."""
    def makespan(n):
        return -(-columns * n // threads) * (NX / n + 0.3)
    return min(range(1, NX + 1), key=makespan)


def stage_update_x(model, backend, s, Phi0, Phi, G, Lc, sd, dt, eps=None):
    """bte.stage_update_x: ``stage_update`` with the x term of Phi (weno_x with the stage's contact
    densities sd.rho, sd.rho_eq and sd.closed) formed in the same pass.  (Phi^{s+1}, rho, PhiHat)."""
    from solver.bsp import weno as _weno

    set_threads(backend)
    P = f64(np, Phi)
    NX, NV, NS, NW, NP = P.shape
    if max(_depth(NW), _depth(NP)) > _LEVELS:
        raise ValueError(f"RK fast path: NW = {NW} or NPHI = {NP} is beyond the pairwise sums compiled here")
    eps = _weno._eps(model) if eps is None else float(eps)
    if sd.closed:
        r0 = rL = np.ones((NV, NS))
    else:
        r0 = f64(np, np.asarray(sd.rho_eq[0]) / np.asarray(sd.rho[0]))
        rL = f64(np, np.asarray(sd.rho_eq[-1]) / np.asarray(sd.rho[-1]))
    in_l, in_r, left = (a.reshape(NV, NW * NP) for a in _masks(model))
    c, c0 = _bte.RK3[s]
    scat = G is not None
    unused = np.zeros((NX, NV, NS, NW))  # G and Lc without scattering (not read)
    flat = lambda a: f64(np, a).reshape(NX, NV, NS, NW * NP)  # noqa: E731
    out = out_array(model, "RK", P.shape)
    PhiHat = np.empty((NX, NV, NS, NW))
    rho = np.empty((NX, NV, NS))
    _stage_x_kernel(flat(P), flat(Phi0 if s > 0 else P), f64(np, G) if scat else unused,
                    f64(np, Lc) if scat else unused, f64(np, model.a1).reshape(NV, NW * NP), in_l, in_r, left, r0, rL,
                    bool(sd.closed), f64(np, model.a3_factor), f64(np, sd.deps_dx), float(sd.A_eps * model.A3), eps,
                    1.0 / model.dx, 1.0 / model.dw, 1.0 / model.dphi, scat, s > 0, float(dt), float(c), float(c0),
                    float(model.dphi), float(model.dw), _segments(NX, NV * NS, numba.get_num_threads()),
                    out.reshape(NX, NV, NS, NW * NP), PhiHat, rho)
    return out, rho, PhiHat
