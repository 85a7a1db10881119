"""WENO-5 transport operators of the BTE in x, w and phi (physics.md §7-§8; phases WENO_x/w/phi).

Shu's finite-difference WENO-5 in difference form on the flux products g = a Phi.  With
D_k = g_k - g_{k-1} the face flux of face l-1/2 is

    h_{l-1/2} = (-g_{l-2} + 7 g_{l-1} + 7 g_l - g_{l+1})/12 + sgn * F(a, b, c, d)
    F = (w0/3) [(b - c) - (a - b)] + ((w2 - 1/2)/6) [(c - d) - (b - c)]
    IS0 = 13 (a - b)^2 + 3 (a - 3b)^2, IS1 = 13 (b - c)^2 + 3 (b + c)^2, IS2 = 13 (c - d)^2 + 3 (3c - d)^2
    alpha_k = d_k / (eps + IS_k)^2, d = (1, 6, 3)/10, w_k = alpha_k / sum alpha   (eps = 1e-6)

left-biased: (a, b, c, d) = (D_{l-2}, D_{l-1}, D_l, D_{l+1}), sgn = +1;
right-biased: (a, b, c, d) = (D_{l+2}, D_{l+1}, D_l, D_{l-1}), sgn = -1.

``weno5_faces`` works along any axis of ghost-padded data (3 ghosts per side, n + 6 values ->
n + 1 faces) with a fixed bias or a per-line boolean mask (True = left-biased).  The three
operators return the derivative term d(a Phi)/d(dir), shape of Phi, so that

    dPhi/dt = -(weno_x + weno_w + weno_phi) + scattering.

Arrays: Phi (NX, 3, N_sbn, NW, NPHI); deps_dx (NX, 3, N_sbn); rho (3, N_sbn) at one contact.
Everything is written against ``backend.xp`` (NumPy or CuPy), float64, without host round
trips; the work is done one valley at a time (three passes) to keep temporaries at a third of
the size of Phi.
"""
from __future__ import annotations

import numpy as np

from solver.bsp import kernels as _kernels

WENO_EPS = 1e-6
D_WEIGHTS = (0.1, 0.6, 0.3)  # d_k; 1/10 on the most upwind stencil
ZERO_COS = 1e-12  # |cos phi| below this is a cos phi = 0 line (inflow at both contacts)


# ---------------------------------------------------------------------------- helpers
def _cached(model, backend, key, build):
    """A small per-(model, backend) constant array, built once on the host and copied over."""
    k = (backend.name, "weno:" + key)
    cache = model.device_cache
    if k not in cache:
        cache[k] = backend.asarray(np.ascontiguousarray(build()))
    return cache[k]


def _eps(model):
    try:
        return float(model.cfg["numerics"]["weno_eps"])
    except (KeyError, TypeError):
        return WENO_EPS


def _sl(ndim, axis, start, length):
    idx = [slice(None)] * ndim
    idx[axis] = slice(start, start + length)
    return tuple(idx)


def _correction(a, b, c, d, eps):
    """F(a, b, c, d) of the left-biased formula (physics.md §8)."""
    ab = a - b
    bc = b - c
    cd = c - d
    t = a - 3.0 * b
    is0 = 13.0 * ab * ab + 3.0 * t * t
    t = b + c
    is1 = 13.0 * bc * bc + 3.0 * t * t
    t = 3.0 * c - d
    is2 = 13.0 * cd * cd + 3.0 * t * t
    del t
    is0 += eps
    is1 += eps
    is2 += eps
    a0 = D_WEIGHTS[0] / (is0 * is0)
    a1 = D_WEIGHTS[1] / (is1 * is1)
    a2 = D_WEIGHTS[2] / (is2 * is2)
    del is0, is1, is2
    s = a0 + a1 + a2
    del a1
    # w0/3 (bc - ab) + (w2 - 1/2)/6 (cd - bc), with w_k = a_k / s
    out = a0 * (bc - ab) * (1.0 / 3.0)
    a2 -= 0.5 * s
    out += a2 * (cd - bc) * (1.0 / 6.0)
    out /= s
    return out


def weno5_faces(xp, g, axis, left=True, eps=WENO_EPS):
    """WENO-5 face fluxes h_{l-1/2}, l = 0..n, of ghost-padded flux products.

    g: array with n + 6 values along ``axis`` (3 ghosts each side: padded index = l + 3).
    left: True (left-biased), False (right-biased), or a boolean array broadcastable to the
    face array (True where left-biased).  Returns n + 1 faces along ``axis``.
    """
    axis = axis % g.ndim
    nd = g.ndim
    nf = g.shape[axis] - 5
    D = xp.diff(g, axis=axis)  # D[q] = D_{q-2}: D_{l+k} for l = 0..n is D[2+k : 2+k+nf]
    Dm2, Dm1, D0, Dp1, Dp2 = (D[_sl(nd, axis, s, nf)] for s in range(5))
    h = g[_sl(nd, axis, 2, nf)] + g[_sl(nd, axis, 3, nf)]
    h *= 7.0
    h -= g[_sl(nd, axis, 1, nf)]
    h -= g[_sl(nd, axis, 4, nf)]
    h *= 1.0 / 12.0
    if left is True or left is False:
        if left:
            h += _correction(Dm2, Dm1, D0, Dp1, eps)
        else:
            h -= _correction(Dp2, Dp1, D0, Dm1, eps)
        return h
    mask = left
    a = xp.where(mask, Dm2, Dp2)
    b = xp.where(mask, Dm1, Dp1)
    d = xp.where(mask, Dp1, Dm1)
    del D, Dm2, Dm1, Dp1, Dp2
    corr = _correction(a, b, D0, d, eps)
    del a, b, d
    corr *= xp.where(mask, 1.0, -1.0)  # sgn, on the (small) mask shape
    h += corr
    return h


def weno5_derivative(xp, g, axis, h, left=True, eps=WENO_EPS):
    """(h_{l+1/2} - h_{l-1/2}) / h for l = 0..n-1 of ghost-padded g (n + 6 values along axis)."""
    f = weno5_faces(xp, g, axis, left, eps)
    return xp.diff(f, axis=axis) / h


# ---------------------------------------------------------------------------- masks
def _phi_masks(model):
    """Host masks over (3, NW, NPHI): inflow at the left / right contact, left-biased in x."""
    a1 = model.a1
    zero = np.abs(np.cos(model.phi)) < ZERO_COS
    zero = np.broadcast_to(zero, a1.shape)
    return (a1 >= 0) | zero, (a1 <= 0) | zero, a1 >= 0


# ---------------------------------------------------------------------------- x
def contact_rule(model) -> str:
    """numerics.contact_rule: ``reference`` (physics.md §7, the authors' rule) or ``hybrid`` (docs/iv.md §9.4)."""
    return str(model.cfg.get("numerics", {}).get("contact_rule", "reference"))


def weno_x(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    """d(a1 Phi)/dx with the contact rules of physics.md §7.

    rho_eq0, rho_eqL: THERMEQUIL densities at x_0 and x_{NX-1}, (3, N_sbn); rho0, rhoL: the
    densities of the stage being differentiated there (dw dphi sum Phi).  Inflow lines (a1 >= 0
    at the left, a1 <= 0 at the right, cos phi = 0 at both) get ghosts g_{-k} = a1
    (rho_eq/rho) Phi(x_0); the others constant extension.  ``closed``: zero flux through both
    contact faces (ghosts then by constant extension).  numerics.contact_rule = hybrid (beyond the
    papers; also in the numba and CUDA kernels): inflow ghosts a1 [min(r, 1) Phi(x_0) + max(rho_eq - rho,
    0) s_w M] with r = rho_eq/rho: an excess is removed by the authors' factor, a deficit injected
    with the start-up shape, which has no gain at the contact (docs/iv.md §9, §12).
    """
    fast = _kernels.lookup(model, backend, "WENO_x")
    if fast is not None:
        return fast(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=closed, eps=eps)
    xp = backend.xp
    eps = _eps(model) if eps is None else eps
    NX = Phi.shape[0]
    a1 = model.on(backend, "a1")
    in_l = _cached(model, backend, "inflow_left", lambda: _phi_masks(model)[0])
    in_r = _cached(model, backend, "inflow_right", lambda: _phi_masks(model)[1])
    left = _cached(model, backend, "left_x", lambda: _phi_masks(model)[2])
    hybrid = contact_rule(model) == "hybrid" and not closed
    if not closed:
        r0 = rho_eq0 / rho0  # (3, N_sbn)
        rL = rho_eqL / rhoL
        if hybrid:  # an excess removed by the factor (r < 1), a deficit injected with the start-up shape
            shape = _cached(model, backend, "inflow_shape", lambda: model.s_w * model.maxwellian)  # (3, NW)
            d0 = xp.maximum(rho_eq0 - rho0, 0.0)
            dL = xp.maximum(rho_eqL - rhoL, 0.0)
            r0, rL = xp.minimum(r0, 1.0), xp.minimum(rL, 1.0)
    out = xp.empty_like(Phi)
    inv = 1.0 / model.dx
    for nu in range(Phi.shape[1]):
        P = Phi[:, nu]  # (NX, N_sbn, NW, NPHI)
        gp = xp.empty((NX + 6,) + P.shape[1:], dtype=Phi.dtype)
        g = gp[3:NX + 3]
        xp.multiply(P, a1[nu], out=g)
        if closed:
            gp[0:3] = g[0]
            gp[NX + 3:] = g[NX - 1]
        else:
            fl = xp.where(in_l[nu], r0[nu][:, None, None], 1.0)  # (N_sbn, NW, NPHI)
            fr = xp.where(in_r[nu], rL[nu][:, None, None], 1.0)
            gp[0:3] = g[0] * fl
            gp[NX + 3:] = g[NX - 1] * fr
            if hybrid:  # + a1 max(rho_eq - rho, 0) s_w M on the inflow lines
                inj = a1[nu][None] * shape[nu][None, :, None]  # (1, NW, NPHI)
                gp[0:3] += xp.where(in_l[nu], d0[nu][:, None, None] * inj, 0.0)
                gp[NX + 3:] += xp.where(in_r[nu], dL[nu][:, None, None] * inj, 0.0)
        f = weno5_faces(xp, gp, 0, left[nu], eps)  # (NX + 1, ...)
        del gp, g
        if closed:
            f[0] = 0.0
            f[NX] = 0.0
        xp.subtract(f[1:], f[:-1], out=out[:, nu])
        out[:, nu] *= inv
        del f
    return out


# ---------------------------------------------------------------------------- w
def weno_w(model, backend, Phi, deps_dx, eps=None):
    """d(a2 Phi)/dw, a2 = -deps_dx a1, with the w-boundary rules of physics.md §7.

    Ghosts below w = 0 from the partner angle phi + pi (own-angle velocity), constant extension
    above the top, top face 0, bottom face (h(phi) - h(phi + pi))/2; left-biased per (i, nu, p,
    phi) line where a2(w_0, phi) > 0.
    """
    fast = _kernels.lookup(model, backend, "WENO_w")
    if fast is not None:
        return fast(model, backend, Phi, deps_dx, eps=eps)
    xp = backend.xp
    eps = _eps(model) if eps is None else eps
    NX, _, NS, NW, NPHI = Phi.shape
    half = NPHI // 2
    a1 = model.on(backend, "a1")
    out = xp.empty_like(Phi)
    inv = 1.0 / model.dw
    for nu in range(Phi.shape[1]):
        P = Phi[:, nu]  # (NX, N_sbn, NW, NPHI)
        a2 = a1[nu][None, None] * (-deps_dx[:, nu])[:, :, None, None]  # (NX, N_sbn, NW, NPHI)
        gp = xp.empty((NX, NS, NW + 6, NPHI), dtype=Phi.dtype)
        g = gp[:, :, 3:NW + 3]
        xp.multiply(a2, P, out=g)
        # g_{-k}(phi) = a2(w_{k-1}, phi) Phi(w_{k-1}, phi + pi), padded index 3 - k
        partner = xp.roll(P[:, :, 0:3], -half, axis=-1)
        gp[:, :, 0:3] = (a2[:, :, 0:3] * partner)[:, :, ::-1]
        gp[:, :, NW + 3:] = g[:, :, NW - 1:NW]
        mask = a2[:, :, 0:1] > 0.0  # (NX, N_sbn, 1, NPHI)
        del a2, partner, g
        f = weno5_faces(xp, gp, 2, mask, eps)  # (NX, N_sbn, NW + 1, NPHI)
        del gp
        h0 = f[:, :, 0]
        hb = 0.5 * (h0 - xp.roll(h0, -half, axis=-1))
        f[:, :, 0] = hb
        f[:, :, NW] = 0.0
        xp.subtract(f[:, :, 1:], f[:, :, :-1], out=out[:, nu])
        out[:, nu] *= inv
        del f
    return out


# ---------------------------------------------------------------------------- phi
def weno_phi(model, backend, Phi, deps_dx, A_eps, eps=None):
    """d(a3 Phi)/dphi, a3 = deps_dx a3_factor: periodic, global Lax-Friedrichs splitting
    g+- = (a3 +- alpha) Phi / 2 with alpha = A_eps A_3; g+ left-biased, g- right-biased."""
    fast = _kernels.lookup(model, backend, "WENO_phi")
    if fast is not None:
        return fast(model, backend, Phi, deps_dx, A_eps, eps=eps)
    xp = backend.xp
    eps = _eps(model) if eps is None else eps
    NX, _, NS, NW, NPHI = Phi.shape
    a3f = model.on(backend, "a3_factor")
    alpha = A_eps * model.A3  # float or 0-d backend array
    out = xp.empty_like(Phi)
    inv = 1.0 / model.dphi
    for nu in range(Phi.shape[1]):
        P = Phi[:, nu]
        a3 = a3f[nu][None, None] * deps_dx[:, nu][:, :, None, None]  # (NX, N_sbn, NW, NPHI)
        gp = xp.empty((NX, NS, NW, NPHI + 6), dtype=Phi.dtype)
        g = gp[..., 3:NPHI + 3]
        # g+ = (a3 + alpha) Phi / 2
        xp.add(a3, alpha, out=g)
        g *= P
        g *= 0.5
        gp[..., 0:3] = g[..., NPHI - 3:]
        gp[..., NPHI + 3:] = g[..., 0:3]
        f = weno5_faces(xp, gp, -1, True, eps)
        # g- = (a3 - alpha) Phi / 2
        xp.subtract(a3, alpha, out=g)
        del a3
        g *= P
        g *= 0.5
        gp[..., 0:3] = g[..., NPHI - 3:]
        gp[..., NPHI + 3:] = g[..., 0:3]
        f += weno5_faces(xp, gp, -1, False, eps)
        del gp, g
        xp.subtract(f[..., 1:], f[..., :-1], out=out[:, nu])
        out[:, nu] *= inv
        del f
    return out


__all__ = ["weno5_faces", "weno5_derivative", "weno_x", "weno_w", "weno_phi", "WENO_EPS"]
