"""numba fast paths of the "numba" backend (multi-threaded CPU; the OpenMP code of paper 000).

Beside the array reference (solver/bsp/weno.py, solver/bsp/scattering.py; docs/developing.md,
"BSP fast paths"): each function takes exactly the arguments of the array function it replaces
and returns the same result to rounding (the arithmetic order of ``weno.weno5_faces`` and of the
scattering sums is kept, so the difference is ~1e-15 relative; tests/test_bsp_kernels_numba.py).

* ``dx_term``, ``dw_term``, ``dphi_term``: one fused WENO-5 kernel per direction.  ``prange``
  over independent line bundles: (nu, p, l) for x (the NPHI lines of a bundle lie side by side
  in memory), (i, nu, p) for w and phi.  Each bundle is padded with its ghosts in a
  thread-local buffer, its faces are computed into a second small buffer, and the difference
  is written straight into the output: no temporaries of Phi's size.  Boundary rules as in
  weno.py: inflow ghosts a1 (rho_eq/rho) Phi at the contacts (or closed contacts: constant
  extension and zero contact faces), partner-angle ghosts below w = 0, top w face 0, the bottom
  face average (h(phi) - h(phi + pi))/2, periodic phi with the Lax-Friedrichs split.
* ``gain``, ``loss_coefficient``: ``prange`` over (i, nu, p); the branch table of
  ``scattering.branches`` (passed as small arrays), p' and l inside, the interpolation rule of
  ``scattering.interpolate`` exactly.

Threads: every call sets numba's thread count to ``backend.threads`` (get_backend("numba",
threads=N)), so that two backends with different counts in one process each get their own.
Only float64 is supported (inputs are converted).  Kernels are compiled on first use
(``cache=True``: later processes load them from __pycache__).
"""
from __future__ import annotations

import math

import numpy as np

try:
    import numba
    from numba import njit, prange
except Exception as exc:  # noqa: BLE001 - any failure to import numba means "no fast paths"
    raise ImportError(f"solver.bsp.kernels.numba_cpu needs numba ({exc})") from exc

from solver.bsp import scattering as _scat
from solver.bsp import weno as _weno

__all__ = ["dx_term", "dw_term", "dphi_term", "gain", "loss_coefficient"]

_D0, _D1, _D2 = _weno.D_WEIGHTS  # 0.1, 0.6, 0.3


# ---------------------------------------------------------------------------- helpers
def _threads(backend) -> None:
    n = int(getattr(backend, "threads", 0) or numba.config.NUMBA_NUM_THREADS)
    n = max(1, min(n, numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)


def _f64(a):
    return np.ascontiguousarray(a, dtype=np.float64)


def _host(model, key, build):
    """A small host constant per model (cached beside the model's backend copies)."""
    k = ("numba", "numba_cpu:" + key)
    cache = model._device_cache
    if k not in cache:
        cache[k] = build()
    return cache[k]


def _masks(model):
    def build():
        in_l, in_r, left = _weno._phi_masks(model)
        u8 = lambda a: np.ascontiguousarray(a, dtype=np.uint8)  # noqa: E731
        return u8(in_l), u8(in_r), u8(left)
    return _host(model, "masks", build)


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


def dx_term(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    """weno.dx_term (same arguments, same result)."""
    _threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = _f64(Phi)
    NS = Phi.shape[2]
    if closed:
        r0 = rL = np.ones((Phi.shape[1], NS))
    else:
        r0 = _f64(np.asarray(rho_eq0) / np.asarray(rho0))
        rL = _f64(np.asarray(rho_eqL) / np.asarray(rhoL))
    in_l, in_r, left = _masks(model)
    out = np.empty_like(Phi)
    _dx_kernel(Phi, _f64(model.a1), in_l, in_r, left, r0, rL, bool(closed), eps, 1.0 / model.dx, out)
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


def dw_term(model, backend, Phi, deps_dx, eps=None):
    """weno.dw_term (same arguments, same result)."""
    _threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = _f64(Phi)
    out = np.empty_like(Phi)
    _dw_kernel(Phi, _f64(model.a1), _f64(deps_dx), eps, 1.0 / model.dw, out)
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


def dphi_term(model, backend, Phi, deps_dx, A_eps, eps=None):
    """weno.dphi_term (same arguments, same result)."""
    _threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = _f64(Phi)
    alpha = float(A_eps * model.A3)
    out = np.empty_like(Phi)
    _dphi_kernel(Phi, _f64(model.a3_factor), _f64(deps_dx), alpha, eps, 1.0 / model.dphi, out)
    return out


# ---------------------------------------------------------------------------- scattering
def _branch_table(model, mechanisms):
    """Flat branch arrays: offsets per target valley, nu', sigma, loss coefficient
    2 pi lw sqrt(m_x m_y)_nu' (the scalar of scattering.loss_coefficient), gain weight gw."""
    key = "branches:" + ("all" if mechanisms is None else ",".join(str(int(m)) for m in mechanisms))

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
    return _host(model, key, build)


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


def loss_coefficient(model, backend, eps, W, mechanisms=None):
    """scattering.loss_coefficient (same arguments, same result)."""
    _threads(backend)
    eps = _f64(eps)
    off, bnu2, bsig, bc, _ = _branch_table(model, mechanisms)
    Lc = np.empty(eps.shape + (model.NW,))
    _loss_kernel(eps, _f64(W), _f64(model.w), float(model.alpha), off, bnu2, bsig, bc, Lc)
    return Lc


@njit(parallel=True, cache=True, fastmath=False)
def _gain_kernel(PH, eps, W, s_w, inv_dw, off, bnu2, bsig, bgw, G):
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
                dl = eps[i, nu, p] - eps[i, nu2, q] + bsig[b]
                for l in range(NW):
                    r = dl * inv_dw + l  # Gamma/dw - 1/2
                    ld = math.trunc(r)
                    if r >= -0.5 and (ld <= NW - 2 or r == NW - 1):
                        ldc = min(max(ld, 0.0), NW - 2.0)
                        t = r - ldc
                        j = int(ldc)
                        f0 = PH[i, nu2, q, j]
                        v = (PH[i, nu2, q, j + 1] - f0) * t + f0
                        acc[l] += coef * v
            for l in range(NW):
                G[i, nu, p, l] += acc[l]
        for l in range(NW):
            G[i, nu, p, l] *= s_w[nu, l]


def gain(model, backend, PhiHat, eps, W, mechanisms=None):
    """scattering.gain (same arguments, same result)."""
    _threads(backend)
    PhiHat = _f64(PhiHat)
    eps = _f64(eps)
    off, bnu2, bsig, _, bgw = _branch_table(model, mechanisms)
    G = np.empty(PhiHat.shape)
    _gain_kernel(PhiHat, eps, _f64(W), _f64(model.s_w), 1.0 / model.dw, off, bnu2, bsig, bgw, G)
    return G
