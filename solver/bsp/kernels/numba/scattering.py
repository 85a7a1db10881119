"""numba fast paths of the scattering phases (backend "numba"): ``scat_gain`` and ``scat_loss`` take
exactly the arguments of the array functions of solver/bsp/scattering.py and return the same result
to rounding (tests/test_bsp_kernels_numba_scattering.py).

``prange`` over (i, nu, p); the branch table of ``scattering.branches`` (passed as small arrays),
p' and l inside, the interpolation rule of ``scattering.interpolate`` exactly.  Only float64 is
supported (inputs are converted).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, uint64

from solver.bsp import scattering as _scat
from solver.bsp.kernels import f64
from solver.bsp.kernels.numba._common import cached, set_threads
from solver.bsp.kernels.numba.weno import _fma

_FM = False  # no fastmath: the multiply-adds fused explicitly (weno._fma), the same bits compiled or cached


def _branch_table(model, mechanisms):
    """Flat branch arrays: offsets per target valley, nu', sigma, loss coefficient
    2 pi lw sqrt(m_x m_y)_nu' (the scalar of scattering.scat_loss), gain weight gw."""
    key = "scattering.branches:" + ("all" if mechanisms is None else ",".join(str(int(m)) for m in mechanisms))

    def build():
        brs = _scat.branches(model, mechanisms)
        smm = model.sqrt_mxmy
        off, nu2, sig, lc, gw = [0], [], [], [], []
        for nu in range(_scat.N_VALLEYS):
            for _mu, n2, sigma, lw, g in brs[nu]:
                nu2.append(n2)
                sig.append(sigma)
                lc.append(2.0 * math.pi * lw * smm[n2])
                gw.append(g)
            off.append(len(nu2))
        return (np.array(off, dtype=np.int64), np.array(nu2, dtype=np.int64),
                np.array(sig, dtype=np.float64), np.array(lc, dtype=np.float64), np.array(gw, dtype=np.float64))
    return cached(model, key, build)


@njit(parallel=True, cache=True, fastmath=False)
def _loss_kernel(eps, W, w, al, off, bnu2, bsig, bc, Lc):
    NX, NV, NS = eps.shape
    NW = w.shape[0]
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        acc = np.empty(NW)
        for l in range(NW):
            Lc[i, nu, p, l] = 0.0
        for b in range(off[nu], off[nu + 1]):
            nu2 = bnu2[b]
            for l in range(NW):
                acc[l] = 0.0
            for q in range(NS):
                coef = bc[b] * W[i, nu, p, nu2, q]
                dl = eps[i, nu, p] - eps[i, nu2, q] + bsig[b]
                for l in range(NW):
                    G = dl + w[l]
                    if G >= 0.0:
                        acc[l] += coef * (1.0 + 2.0 * al * G)
            for l in range(NW):
                Lc[i, nu, p, l] += acc[l]


def scat_loss(model, backend, eps, W, mechanisms=None):
    """scattering.scat_loss (same arguments, same result)."""
    set_threads(backend)
    eps = f64(np, eps)
    off, bnu2, bsig, bc, _ = _branch_table(model, mechanisms)
    Lc = np.empty(eps.shape + (model.NW,))
    _loss_kernel(eps, f64(np, W), f64(np, model.w), float(model.alpha), off, bnu2, bsig, bc, Lc)
    return Lc


@njit(cache=True, fastmath=_FM)
def _first(x, l, stop, bound):
    """The first l' >= l (at most ``stop``) with x + l' >= bound, from an estimate corrected in
    both directions (x + l' is rounded as in the reference: the test is exact)."""
    e = min(stop, max(l, int(math.ceil(bound - x))))
    while e > l and x + (e - 1) >= bound:
        e -= 1
    while e < stop and x + e < bound:
        e += 1
    return e


@njit(parallel=True, cache=True, fastmath=_FM)
def _gain_kernel(PH, eps, W, s_w, inv_dw, off, bnu2, bsig, bgw, G):
    """The interpolation rule of scattering.interpolate for r_l = x + l, x = delta / dw, split into
    the ranges of l where it is regular (r_l is monotone in l): r_l < -0.5 (no contribution);
    -0.5 <= r_l < 1 (node 0, t = r_l); r_l >= 1 with j = floor(x) + l <= NW - 2 (nodes j, j + 1,
    t = r_l - j in [0, 1]: contiguous loads, vectorised; where the reference rounds r_l onto the
    next node, j is one below its node and t = 1, the same value to rounding); the rest (at most
    the exact top node r_l = NW - 1) by the reference's rule."""
    NX, NV, NS = eps.shape
    NW = PH.shape[3]
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        acc = np.empty(NW)
        for l in range(NW):
            G[i, nu, p, l] = 0.0
        for b in range(off[nu], off[nu + 1]):
            nu2 = bnu2[b]
            for l in range(NW):
                acc[l] = 0.0
            for q in range(NS):
                coef = bgw[b] * W[i, nu, p, nu2, q]
                x = (eps[i, nu, p] - eps[i, nu2, q] + bsig[b]) * inv_dw
                lo = _first(x, 0, NW, -0.5)
                la = _first(x, lo, NW, 1.0)
                f0 = PH[i, nu2, q, 0]
                d0 = PH[i, nu2, q, 1] - f0
                for l in range(lo, la):
                    acc[l] = _fma(coef, _fma(d0, x + l, f0), acc[l])
                fx = math.floor(x)
                lb = la if la >= NW else max(la, min(NW, NW - 1 - int(fx)))
                j0 = uint64(int(fx) + la) if la < lb else uint64(0)
                for u in range(uint64(lb - la)):
                    l = uint64(la) + u
                    r = x + l
                    j = j0 + u
                    f = PH[i, nu2, q, j]
                    acc[l] = _fma(coef, _fma(PH[i, nu2, q, j + uint64(1)] - f, r - (fx + l), f), acc[l])
                for l in range(lb, NW):
                    r = x + l
                    if r > NW - 1:
                        break
                    ld = math.trunc(r)
                    if r >= -0.5 and (ld <= NW - 2 or r == NW - 1):
                        ldc = min(max(ld, 0.0), NW - 2.0)
                        j = int(ldc)
                        f = PH[i, nu2, q, j]
                        acc[l] = _fma(coef, _fma(PH[i, nu2, q, j + 1] - f, r - ldc, f), acc[l])
            for l in range(NW):
                G[i, nu, p, l] += acc[l]
        for l in range(NW):
            G[i, nu, p, l] *= s_w[nu, l]


def scat_gain(model, backend, PhiHat, eps, W, mechanisms=None):
    """scattering.scat_gain (same arguments, same result)."""
    set_threads(backend)
    PhiHat = f64(np, PhiHat)
    eps = f64(np, eps)
    off, bnu2, bsig, _, bgw = _branch_table(model, mechanisms)
    G = np.empty(PhiHat.shape)
    _gain_kernel(PhiHat, eps, f64(np, W), f64(np, model.s_w), 1.0 / model.dw, off, bnu2, bsig, bgw, G)
    return G
