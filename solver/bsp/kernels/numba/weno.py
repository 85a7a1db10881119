"""numba fast paths of the WENO phases (backend "numba"): ``weno_x``, ``weno_w``, ``weno_phi`` take
exactly the arguments of the array functions of solver/bsp/weno.py and return the same result (the
arithmetic order of ``weno.weno5_faces`` is kept; tests/test_bsp_kernels_numba_weno.py).

One fused WENO-5 kernel per direction.  ``prange`` over independent line bundles: (nu, p, l) for x
(the NPHI lines of a bundle lie side by side in memory), (i, nu, p) for w and phi.  Each bundle is
padded with its ghosts in a thread-local buffer, its faces are computed into a second small buffer,
and the difference is written straight into the output: no temporaries of Phi's size.  Boundary
rules as in weno.py: inflow ghosts a1 (rho_eq/rho) Phi at the contacts (or closed contacts:
constant extension and zero contact faces), partner-angle ghosts below w = 0, top w face 0, the
bottom face average (h(phi) - h(phi + pi))/2, periodic phi with the Lax-Friedrichs split.
Only float64 is supported (inputs are converted).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver.bsp import weno as _weno
from solver.bsp.kernels import f64
from solver.bsp.kernels.numba._common import cached, set_threads

_D0, _D1, _D2 = _weno.D_WEIGHTS  # 0.1, 0.6, 0.3


def _masks(model):
    def build():
        in_l, in_r, left = _weno._phi_masks(model)
        u8 = lambda a: np.ascontiguousarray(a, dtype=np.uint8)  # noqa: E731
        return u8(in_l), u8(in_r), u8(left)
    return cached(model, "weno.masks", build)


# ---------------------------------------------------------------------------- WENO-5 face
@njit(cache=True, fastmath=False)
def _corr(a, b, c, d, eps):
    """F(a, b, c, d) in the operation order of weno._correction."""
    ab = a - b
    bc = b - c
    cd = c - d
    t = a - 3.0 * b
    is0 = 13.0 * ab * ab + 3.0 * t * t
    t = b + c
    is1 = 13.0 * bc * bc + 3.0 * t * t
    t = 3.0 * c - d
    is2 = 13.0 * cd * cd + 3.0 * t * t
    is0 += eps
    is1 += eps
    is2 += eps
    a0 = _D0 / (is0 * is0)
    a1 = _D1 / (is1 * is1)
    a2 = _D2 / (is2 * is2)
    s = a0 + a1 + a2
    out = a0 * (bc - ab) * (1.0 / 3.0)
    a2 -= 0.5 * s
    out += a2 * (cd - bc) * (1.0 / 6.0)
    return out / s


@njit(cache=True, fastmath=False)
def _face(g0, g1, g2, g3, g4, g5, left, eps):
    """h_{l-1/2} from the six padded values g_{l-3..l+2} (padded index l..l+5), weno5_faces order."""
    h = g2 + g3
    h *= 7.0
    h -= g1
    h -= g4
    h *= 1.0 / 12.0
    # branch-free (selects vectorise): left (a, b, c, d) = (D_{l-2}, D_{l-1}, D_l, D_{l+1}), sign +;
    # right (D_{l+2}, D_{l+1}, D_l, D_{l-1}), sign - (h - F == h + (-F) exactly, as in weno5_faces)
    dm1 = g2 - g1
    dp1 = g4 - g3
    a = (g1 - g0) if left else (g5 - g4)
    b = dm1 if left else dp1
    d = dp1 if left else dm1
    c = _corr(a, b, g3 - g2, d, eps)
    return h + (c if left else -c)


# ---------------------------------------------------------------------------- x
@njit(parallel=True, cache=True, fastmath=False)
def _dx_kernel(Phi, a1, in_l, in_r, left, r0, rL, closed, eps, inv, out):
    NX, NV, NS, NW, NP = Phi.shape
    for k in prange(NV * NS * NW):
        nu = k // (NS * NW)
        p = (k // NW) % NS
        l = k % NW
        gp = np.empty((NX + 6, NP))
        f = np.empty((NX + 1, NP))
        for i in range(NX):
            for m in range(NP):
                gp[i + 3, m] = Phi[i, nu, p, l, m] * a1[nu, l, m]
        for m in range(NP):
            g0 = gp[3, m]
            gL = gp[NX + 2, m]
            if not closed:
                if in_l[nu, l, m]:
                    g0 = g0 * r0[nu, p]
                if in_r[nu, l, m]:
                    gL = gL * rL[nu, p]
            for q in range(3):
                gp[q, m] = g0
                gp[NX + 3 + q, m] = gL
        for j in range(NX + 1):
            for m in range(NP):
                f[j, m] = _face(gp[j, m], gp[j + 1, m], gp[j + 2, m], gp[j + 3, m], gp[j + 4, m],
                                gp[j + 5, m], left[nu, l, m] != 0, eps)
        if closed:
            for m in range(NP):
                f[0, m] = 0.0
                f[NX, m] = 0.0
        for i in range(NX):
            for m in range(NP):
                out[i, nu, p, l, m] = (f[i + 1, m] - f[i, m]) * inv


def weno_x(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    """weno.weno_x (same arguments, same result)."""
    set_threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = f64(np, Phi)
    NS = Phi.shape[2]
    if closed:
        r0 = rL = np.ones((Phi.shape[1], NS))
    else:
        r0 = f64(np, np.asarray(rho_eq0) / np.asarray(rho0))
        rL = f64(np, np.asarray(rho_eqL) / np.asarray(rhoL))
    in_l, in_r, left = _masks(model)
    out = np.empty_like(Phi)
    _dx_kernel(Phi, f64(np, model.a1), in_l, in_r, left, r0, rL, bool(closed), eps, 1.0 / model.dx, out)
    return out


# ---------------------------------------------------------------------------- w
@njit(parallel=True, cache=True, fastmath=False)
def _dw_kernel(Phi, a1, deps, eps, inv, out):
    NX, NV, NS, NW, NP = Phi.shape
    half = NP // 2
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        md = -deps[i, nu, p]
        gp = np.empty((NW + 6, NP))
        f = np.empty((NW + 1, NP))
        h0 = np.empty(NP)
        for l in range(NW):
            for m in range(NP):
                gp[l + 3, m] = (a1[nu, l, m] * md) * Phi[i, nu, p, l, m]
        for m in range(NP):
            mp = (m + half) % NP
            for q in range(3):  # g_{-q-1}(phi) = a2(w_q, phi) Phi(w_q, phi + pi): padded 2 - q
                gp[2 - q, m] = (a1[nu, q, m] * md) * Phi[i, nu, p, q, mp]
                gp[NW + 3 + q, m] = gp[NW + 2, m]
        for j in range(NW + 1):
            for m in range(NP):
                f[j, m] = _face(gp[j, m], gp[j + 1, m], gp[j + 2, m], gp[j + 3, m], gp[j + 4, m],
                                gp[j + 5, m], (a1[nu, 0, m] * md) > 0.0, eps)
        for m in range(NP):
            h0[m] = f[0, m]
        for m in range(NP):
            f[0, m] = 0.5 * (h0[m] - h0[(m + half) % NP])
            f[NW, m] = 0.0
        for l in range(NW):
            for m in range(NP):
                out[i, nu, p, l, m] = (f[l + 1, m] - f[l, m]) * inv


def weno_w(model, backend, Phi, deps_dx, eps=None):
    """weno.weno_w (same arguments, same result)."""
    set_threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = f64(np, Phi)
    out = np.empty_like(Phi)
    _dw_kernel(Phi, f64(np, model.a1), f64(np, deps_dx), eps, 1.0 / model.dw, out)
    return out


# ---------------------------------------------------------------------------- phi
@njit(parallel=True, cache=True, fastmath=False)
def _dphi_kernel(Phi, a3f, deps, alpha, eps, inv, out):
    NX, NV, NS, NW, NP = Phi.shape
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        d = deps[i, nu, p]
        gpp = np.empty(NP + 6)
        gpm = np.empty(NP + 6)
        f = np.empty(NP + 1)
        for l in range(NW):
            for m in range(NP):
                a3 = a3f[nu, l, m] * d
                P = Phi[i, nu, p, l, m]
                gpp[m + 3] = ((a3 + alpha) * P) * 0.5
                gpm[m + 3] = ((a3 - alpha) * P) * 0.5
            for q in range(3):  # periodic ghosts
                gpp[q] = gpp[NP + q]
                gpm[q] = gpm[NP + q]
                gpp[NP + 3 + q] = gpp[3 + q]
                gpm[NP + 3 + q] = gpm[3 + q]
            for j in range(NP + 1):
                hp = _face(gpp[j], gpp[j + 1], gpp[j + 2], gpp[j + 3], gpp[j + 4], gpp[j + 5], True, eps)
                hm = _face(gpm[j], gpm[j + 1], gpm[j + 2], gpm[j + 3], gpm[j + 4], gpm[j + 5], False, eps)
                f[j] = hp + hm
            for m in range(NP):
                out[i, nu, p, l, m] = (f[m + 1] - f[m]) * inv


def weno_phi(model, backend, Phi, deps_dx, A_eps, eps=None):
    """weno.weno_phi (same arguments, same result)."""
    set_threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = f64(np, Phi)
    alpha = float(A_eps * model.A3)
    out = np.empty_like(Phi)
    _dphi_kernel(Phi, f64(np, model.a3_factor), f64(np, deps_dx), alpha, eps, 1.0 / model.dphi, out)
    return out
