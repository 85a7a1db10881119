"""The ten Krylov solvers of Table 2 of paper 000, written once against a vector-operations namespace.

Paper 000 solved the Newton system (order NX NZ = 4225 on the standard mesh, ~250 000 nonzeros)
with LIS: ILUT + one of ten Krylov methods, tolerance 1e-8, on 1 and 16 OpenMP cores.  This module
implements those ten methods once, following the recurrences of LIS (which are the published ones:
BiCG (Fletcher 1976), BiCGSTAB (van der Vorst 1992), GPBiCG (Zhang 1997), BiCGSafe (Fujino 2005),
IDR(s) (Sonneveld & van Gijzen 2008; the biorthogonal variant of van Gijzen & Sonneveld 2011,
s = 4 as LIS), BiCR (Sogabe, Sugihara & Zhang 2009), CRS, BiCRSTAB, GPBiCR and BiCRSafe (Abe,
Sogabe, Fujino, Zhang 2008-2010, the "CR" variants: BiCG-type recurrences with the shadow vector
A^T r0, i.e. the bilinear form (r0*, A .) instead of (r0*, .)).

Every solver: ``f(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8,
maxiter=..., ops=None)`` -> ``KrylovResult(x, iterations, converged, history, breakdown)``.

* ``matvec(v)`` = A v; ``rmatvec(v)`` = A^T v (BiCG, BiCR, and the CR shadow vector);
  ``precond(v)`` = M^-1 v; ``precond_T(v)`` = M^-T v (BiCG, BiCR).  Preconditioning as in LIS:
  the iterate x and the residual r = b - A x are those of the original system (right
  preconditioning in effect), so the stopping test is the true-recurrence ||r|| / ||b|| < tol.
* x0 = 0; ``history``: ||r_k|| / ||b|| after every iteration (iteration 0 = 1).
* ``ops``: the vector operations (dot, norm, axpby, axpbypcz), see ``solver.bsp.krylov.ops``
  (default: ``NumpyOps()``).
* Iterations are counted as in LIS: one pass of the main loop (2 matvecs for the product-type
  methods, 1 A + 1 A^T for BiCG/BiCR); IDR(s) counts each of its s + 1 inner steps (one matvec
  each) as one iteration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from solver.bsp.krylov.ops import NumpyOps

SOLVERS: dict = {}
IDR_S = 4


def register(name):
    def deco(f):
        SOLVERS[name] = f
        f.solver_name = name
        return f
    return deco


@dataclass
class KrylovResult:
    x: object
    iterations: int
    converged: bool
    history: list = field(default_factory=list)
    breakdown: str | None = None


# ---------------------------------------------------------------------- helpers
def _start(b, precond, ops, maxiter):
    """The prelude every solver shares: the defaults (NumPy ops, no preconditioner, maxiter =
    2 n), ||b||, x0 = 0, r0 = b and the history [||r0|| / ||b||] = [1.0].  Returns
    (ops, precond, maxiter, bnorm, x, r, hist); a solver stops at once when bnorm = 0 (x = 0 is
    then exact: ``KrylovResult(x, 0, True, [0.0])``)."""
    ops = ops or NumpyOps()
    precond = precond or (lambda v: v)
    maxiter = maxiter if maxiter is not None else 2 * b.shape[0]
    bnorm = ops.norm(b)
    return ops, precond, maxiter, bnorm, ops.zeros_like(b), ops.copy(b), [1.0]


def _converged(ops, hist, r, bnorm, tol):
    """Append ||r|| / ||b|| to the history; True when it is below tol."""
    hist.append(ops.norm(r) / bnorm)
    return hist[-1] < tol


def _converged_half(ops, hist, s, bnorm, tol):
    """The mid-iteration test of the product-type methods on s = r - alpha A p: ||s|| / ||b||
    enters the history only when it ends the iteration."""
    ns = ops.norm(s) / bnorm
    if ns < tol:
        hist.append(ns)
        return True
    return False


def _bad(v):
    return v == 0.0 or not math.isfinite(v)


def _two_sided_start(ops, r, precond, precond_T):
    """BiCG / BiCR: shadow residual r* = r0, z = M^-1 r, z* = M^-T r*, p = z, p* = z*.
    Returns (precond_T, r*, z, z*, p, p*)."""
    precond_T = precond_T or (lambda v: v)
    rt = ops.copy(r)
    z, zt = precond(r), precond_T(rt)
    return precond_T, rt, z, zt, ops.copy(z), ops.copy(zt)


def _stabilise(ops, matvec, x, alpha, p, s, ms):
    """The one-dimensional minimal-residual step of BiCGSTAB / BiCRSTAB: t = A ms (ms = M^-1 s),
    omega = (t, s) / (t, t) (0 when t = 0).  Returns (omega, x + alpha p + omega ms, s - omega t)."""
    t = matvec(ms)
    tt = ops.dot(t, t)
    omega = ops.dot(t, s) / tt if tt > 0 else 0.0
    return omega, ops.axpbypcz(1.0, x, alpha, p, omega, ms), ops.axpby(1.0, s, -omega, t)


def _qsi_eta(ops, it, y, a, t):
    """The two-parameter minimisation of GPBiCG / BiCGSafe and their CR variants: (qsi, eta)
    minimising ||t - qsi a - eta y|| (eta = 0 at the first iteration)."""
    yy, at, yt, ay, aa = ops.dot(y, y), ops.dot(a, t), ops.dot(y, t), ops.dot(a, y), ops.dot(a, a)
    if it == 1:
        return at / aa, 0.0
    den = aa * yy - ay * ay
    return (yy * at - yt * ay) / den, (aa * yt - ay * at) / den


# ---------------------------------------------------------------------- the ten solvers
@register("bicg")
def bicg(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    precond_T, rt, z, zt, p, pt = _two_sided_start(ops, r, precond, precond_T)
    rho = ops.dot(z, rt)
    for it in range(1, maxiter + 1):
        q, qt = matvec(p), rmatvec(pt)
        den = ops.dot(pt, q)
        if _bad(den) or _bad(rho):
            return KrylovResult(x, it - 1, False, hist, "pt.Ap = 0")
        alpha = rho / den
        x = ops.axpby(1.0, x, alpha, p)
        r = ops.axpby(1.0, r, -alpha, q)
        rt = ops.axpby(1.0, rt, -alpha, qt)
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
        z, zt = precond(r), precond_T(rt)
        rho_new = ops.dot(z, rt)
        beta = rho_new / rho
        rho = rho_new
        p = ops.axpby(1.0, z, beta, p)
        pt = ops.axpby(1.0, zt, beta, pt)
    return KrylovResult(x, maxiter, False, hist)


@register("bicgstab")
def bicgstab(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    rt = ops.copy(r)
    p = ops.copy(r)
    v = ops.zeros_like(b)
    rho = ops.dot(rt, r)
    alpha = omega = 1.0
    for it in range(1, maxiter + 1):
        if it > 1:
            rho_new = ops.dot(rt, r)
            if _bad(rho_new) or _bad(omega):
                return KrylovResult(x, it - 1, False, hist, "rho = 0 or omega = 0")
            beta = (rho_new / rho) * (alpha / omega)
            rho = rho_new
            p = ops.axpbypcz(1.0, r, beta, p, -beta * omega, v)
        ph = precond(p)
        v = matvec(ph)
        den = ops.dot(rt, v)
        if _bad(den):
            return KrylovResult(x, it - 1, False, hist, "rt.v = 0")
        alpha = rho / den
        s = ops.axpby(1.0, r, -alpha, v)
        if _converged_half(ops, hist, s, bnorm, tol):
            return KrylovResult(ops.axpby(1.0, x, alpha, ph), it, True, hist)
        omega, x, r = _stabilise(ops, matvec, x, alpha, ph, s, precond(s))
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
    return KrylovResult(x, maxiter, False, hist)


@register("gpbicg")
def gpbicg(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    """GPBiCG (Zhang 1997) in the LIS arrangement: shadow r0, rho = (r0, r)."""
    return _gpbi(matvec, b, precond, rmatvec, tol, maxiter, ops, cr=False)


@register("gpbicr")
def gpbicr(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    """GPBiCR (Abe & Sogabe): GPBiCG with the shadow vector A^T r0 and rho = (A^T r0, M^-1 r)."""
    return _gpbi(matvec, b, precond, rmatvec, tol, maxiter, ops, cr=True)


def _gpbi(matvec, b, precond, rmatvec, tol, maxiter, ops, cr):
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    rt = rmatvec(r) if cr else ops.copy(r)
    mr = precond(r)
    p = ops.copy(mr)
    rho = ops.dot(rt, mr if cr else r)
    t, w, u, z, mt_old = (ops.zeros_like(b) for _ in range(5))
    beta = 0.0
    for it in range(1, maxiter + 1):
        ap = matvec(p)
        mapv = precond(ap)
        den = ops.dot(rt, mapv if cr else ap)
        if _bad(den) or _bad(rho):
            return KrylovResult(x, it - 1, False, hist, "breakdown (rt.Ap = 0)")
        alpha = rho / den
        y = ops.axpbypcz(1.0, t, -1.0, r, alpha, ops.axpby(1.0, ap, -1.0, w))
        t = ops.axpby(1.0, r, -alpha, ap)
        if _converged_half(ops, hist, t, bnorm, tol):
            return KrylovResult(ops.axpby(1.0, x, alpha, p), it, True, hist)
        mt = ops.axpby(1.0, mr, -alpha, mapv)
        amt = matvec(mt)
        qsi, eta = _qsi_eta(ops, it, y, amt, t)
        if _bad(qsi) or not math.isfinite(eta):
            return KrylovResult(x, it - 1, False, hist, "qsi = 0")
        # u = qsi map + eta (mt_old - mr + beta u); z = qsi mr + eta z - alpha u
        u = ops.axpby(qsi, mapv, eta, ops.axpbypcz(1.0, mt_old, -1.0, mr, beta, u))
        z = ops.axpbypcz(qsi, mr, eta, z, -alpha, u)
        x = ops.axpbypcz(1.0, x, alpha, p, 1.0, z)
        r = ops.axpbypcz(1.0, t, -qsi, amt, -eta, y)
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
        mr = precond(r)
        rho_new = ops.dot(rt, mr if cr else r)
        if _bad(rho_new):
            return KrylovResult(x, it, False, hist, "rho = 0")
        beta = (rho_new / rho) * (alpha / qsi)
        rho = rho_new
        w = ops.axpby(1.0, amt, beta, ap)
        p = ops.axpbypcz(1.0, mr, beta, p, -beta, u)
        mt_old = mt
    return KrylovResult(x, maxiter, False, hist)


@register("bicgsafe")
def bicgsafe(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    """BiCGSafe (Fujino, Fujiwara & Yoshida 2005), LIS arrangement."""
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    rt = ops.copy(r)
    mr = precond(r)
    amr = matvec(mr)
    rho = ops.dot(rt, r)
    ap, p = ops.copy(amr), ops.copy(mr)
    y, u, z = (ops.zeros_like(b) for _ in range(3))
    beta = 0.0
    for it in range(1, maxiter + 1):
        den = ops.dot(rt, ap)
        if _bad(den) or _bad(rho):
            return KrylovResult(x, it - 1, False, hist, "rt.Ap = 0")
        alpha = rho / den
        qsi, eta = _qsi_eta(ops, it, y, amr, r)
        if _bad(qsi) or not math.isfinite(eta):
            return KrylovResult(x, it - 1, False, hist, "qsi = 0")
        mt = precond(ops.axpby(qsi, ap, eta, y))
        u = ops.axpby(1.0, mt, eta * beta, u)
        au = matvec(u)
        z = ops.axpbypcz(qsi, mr, eta, z, -alpha, u)
        y = ops.axpbypcz(qsi, amr, eta, y, -alpha, au)
        x = ops.axpbypcz(1.0, x, alpha, p, 1.0, z)
        r = ops.axpbypcz(1.0, r, -alpha, ap, -1.0, y)
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
        rho_new = ops.dot(rt, r)
        if _bad(rho_new):
            return KrylovResult(x, it, False, hist, "rho = 0")
        beta = (rho_new / rho) * (alpha / qsi)
        rho = rho_new
        mr = precond(r)
        amr = matvec(mr)
        p = ops.axpbypcz(1.0, mr, beta, p, -beta, u)
        ap = ops.axpbypcz(1.0, amr, beta, ap, -beta, au)
    return KrylovResult(x, maxiter, False, hist)


@register("bicrsafe")
def bicrsafe(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    """BiCRSafe (Fujino & Sekimoto / Abe): BiCGSafe with the bilinear form (r0, A .)."""
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    rt = ops.copy(r)
    art = rmatvec(rt)  # A^T r0
    mr = precond(r)
    amr = matvec(mr)
    rho = ops.dot(rt, amr)
    ap, p = ops.copy(amr), ops.copy(mr)
    y, my, u, z = (ops.zeros_like(b) for _ in range(4))
    beta = 0.0
    for it in range(1, maxiter + 1):
        mapv = precond(ap)
        den = ops.dot(art, mapv)
        if _bad(den) or _bad(rho):
            return KrylovResult(x, it - 1, False, hist, "breakdown")
        alpha = rho / den
        qsi, eta = _qsi_eta(ops, it, y, amr, r)
        if _bad(qsi) or not math.isfinite(eta):
            return KrylovResult(x, it - 1, False, hist, "qsi = 0")
        u = ops.axpbypcz(eta * beta, u, qsi, mapv, eta, my)
        au = matvec(u)
        z = ops.axpbypcz(qsi, mr, eta, z, -alpha, u)
        y = ops.axpbypcz(qsi, amr, eta, y, -alpha, au)
        my = precond(y)
        x = ops.axpbypcz(1.0, x, alpha, p, 1.0, z)
        r = ops.axpbypcz(1.0, r, -alpha, ap, -1.0, y)
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
        mr = ops.axpbypcz(1.0, mr, -alpha, mapv, -1.0, my)
        amr = matvec(mr)
        rho_new = ops.dot(rt, amr)
        if _bad(rho_new):
            return KrylovResult(x, it, False, hist, "rho = 0")
        beta = (rho_new / rho) * (alpha / qsi)
        rho = rho_new
        p = ops.axpbypcz(1.0, mr, beta, p, -beta, u)
        ap = ops.axpbypcz(1.0, amr, beta, ap, -beta, au)
    return KrylovResult(x, maxiter, False, hist)


@register("bicr")
def bicr(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    """BiCR (Sogabe, Sugihara & Zhang 2009), LIS arrangement (A and A^T products)."""
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    precond_T, rt, z, zt, p, pt = _two_sided_start(ops, r, precond, precond_T)
    ap = matvec(z)
    rho = ops.dot(zt, ap)
    for it in range(1, maxiter + 1):
        apt = rmatvec(pt)
        mapv = precond(ap)
        den = ops.dot(apt, mapv)
        if _bad(den) or _bad(rho):
            return KrylovResult(x, it - 1, False, hist, "breakdown")
        alpha = rho / den
        x = ops.axpby(1.0, x, alpha, p)
        r = ops.axpby(1.0, r, -alpha, ap)
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
        rt = ops.axpby(1.0, rt, -alpha, apt)
        z = ops.axpby(1.0, z, -alpha, mapv)
        zt = precond_T(rt)
        az = matvec(z)
        rho_new = ops.dot(zt, az)
        if _bad(rho_new):
            return KrylovResult(x, it, False, hist, "rho = 0")
        beta = rho_new / rho
        rho = rho_new
        p = ops.axpby(1.0, z, beta, p)
        pt = ops.axpby(1.0, zt, beta, pt)
        ap = ops.axpby(1.0, az, beta, ap)
    return KrylovResult(x, maxiter, False, hist)


@register("crs")
def crs(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    """Conjugate Residual Squared (Abe et al.), LIS arrangement: shadow A^T r0."""
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    rt = rmatvec(r)
    rho_old = 1.0
    q = ops.zeros_like(b)
    p = ops.zeros_like(b)
    for it in range(1, maxiter + 1):
        z = precond(r)
        rho = ops.dot(rt, z)
        if _bad(rho):
            return KrylovResult(x, it - 1, False, hist, "rho = 0")
        beta = rho / rho_old
        u = ops.axpby(1.0, z, beta, q)
        p = ops.axpbypcz(1.0, u, beta, q, beta * beta, p)
        mapv = precond(matvec(p))
        den = ops.dot(rt, mapv)
        if _bad(den):
            return KrylovResult(x, it - 1, False, hist, "rt.M^-1 A p = 0")
        alpha = rho / den
        q = ops.axpby(1.0, u, -alpha, mapv)
        uq = ops.axpby(1.0, u, 1.0, q)
        auq = matvec(uq)
        x = ops.axpby(1.0, x, alpha, uq)
        r = ops.axpby(1.0, r, -alpha, auq)
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
        rho_old = rho
    return KrylovResult(x, maxiter, False, hist)


@register("bicrstab")
def bicrstab(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None):
    """BiCRSTAB (Abe et al.), LIS arrangement: shadow A^T r0, rho = (A^T r0, M^-1 r)."""
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    rt = rmatvec(r)
    z = precond(r)
    p = ops.copy(z)
    rho = ops.dot(rt, z)
    for it in range(1, maxiter + 1):
        ap = matvec(p)
        mapv = precond(ap)
        den = ops.dot(rt, mapv)
        if _bad(den) or _bad(rho):
            return KrylovResult(x, it - 1, False, hist, "breakdown")
        alpha = rho / den
        s = ops.axpby(1.0, r, -alpha, ap)
        if _converged_half(ops, hist, s, bnorm, tol):
            return KrylovResult(ops.axpby(1.0, x, alpha, p), it, True, hist)
        omega, x, r = _stabilise(ops, matvec, x, alpha, p, s, ops.axpby(1.0, z, -alpha, mapv))  # M^-1 s
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
        z = precond(r)
        rho_new = ops.dot(rt, z)
        if _bad(rho_new) or _bad(omega):
            return KrylovResult(x, it, False, hist, "rho = 0 or omega = 0")
        beta = (rho_new / rho) * (alpha / omega)
        rho = rho_new
        p = ops.axpbypcz(1.0, z, beta, p, -beta * omega, mapv)
    return KrylovResult(x, maxiter, False, hist)


@register("idr")
def idrs(matvec, b, precond=None, *, rmatvec=None, precond_T=None, tol=1e-8, maxiter=None, ops=None,
         s=IDR_S, seed=0, angle=0.7):
    """IDR(s) with biorthogonal residuals (van Gijzen & Sonneveld 2011, Alg. 913), right
    preconditioned; shadow space P: s orthonormalised random vectors (fixed seed); omega with
    the 'maintaining the convergence' rule (angle 0.7).  Every inner step counts as an iteration."""
    ops, precond, maxiter, bnorm, x, r, hist = _start(b, precond, ops, maxiter)
    if bnorm == 0.0:
        return KrylovResult(x, 0, True, [0.0])
    xp = getattr(ops, "xp", np)
    n = b.shape[0]
    Pq, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, s)))
    P = [xp.asarray(np.ascontiguousarray(Pq[:, i])) for i in range(s)]
    G = [ops.zeros_like(b) for _ in range(s)]
    U = [ops.zeros_like(b) for _ in range(s)]
    Mm = np.eye(s)
    om = 1.0
    it = 0
    while it < maxiter:
        f = np.array([ops.dot(P[i], r) for i in range(s)])
        for k in range(s):
            c = np.linalg.solve(Mm[k:, k:], f[k:])
            v = ops.copy(r)
            for j, cj in enumerate(c):
                v = ops.axpby(1.0, v, -cj, G[k + j])
            v = precond(v)
            uk = ops.axpby(om, v, c[0], U[k])
            for j in range(1, c.size):
                uk = ops.axpby(1.0, uk, c[j], U[k + j])
            U[k] = uk
            G[k] = matvec(U[k])
            for i in range(k):
                a = ops.dot(P[i], G[k]) / Mm[i, i]
                G[k] = ops.axpby(1.0, G[k], -a, G[i])
                U[k] = ops.axpby(1.0, U[k], -a, U[i])
            for i in range(k, s):
                Mm[i, k] = ops.dot(P[i], G[k])
            if _bad(Mm[k, k]):
                return KrylovResult(x, it, False, hist, "M[k,k] = 0")
            beta = f[k] / Mm[k, k]
            r = ops.axpby(1.0, r, -beta, G[k])
            x = ops.axpby(1.0, x, beta, U[k])
            it += 1
            if _converged(ops, hist, r, bnorm, tol):
                return KrylovResult(x, it, True, hist)
            if it >= maxiter:
                return KrylovResult(x, it, False, hist)
            if k + 1 < s:
                f[k + 1:] -= beta * Mm[k + 1:, k]
        v = precond(r)
        t = matvec(v)
        nt, nr, ts = ops.norm(t), ops.norm(r), ops.dot(t, r)
        if nt == 0.0:
            return KrylovResult(x, it, False, hist, "t = 0")
        rho = abs(ts / (nt * nr))
        om = ts / (nt * nt)
        if rho < angle:
            om *= angle / rho
        if _bad(om):
            return KrylovResult(x, it, False, hist, "omega = 0")
        r = ops.axpby(1.0, r, -om, t)
        x = ops.axpby(1.0, x, om, v)
        it += 1
        if _converged(ops, hist, r, bnorm, tol):
            return KrylovResult(x, it, True, hist)
    return KrylovResult(x, it, False, hist)


# Order and names of Table 2 of paper 000
TABLE2_ORDER = ("bicg", "bicgstab", "gpbicg", "bicgsafe", "idr", "bicr", "crs", "bicrstab", "gpbicr", "bicrsafe")
PAPER_NAMES = {"bicg": "BiCG", "bicgstab": "BiCGSTAB", "gpbicg": "GPBiCG", "bicgsafe": "BiCGSafe", "idr": "IDR",
               "bicr": "BiCR", "crs": "CRS", "bicrstab": "BiCRSTAB", "gpbicr": "GPBiCR", "bicrsafe": "BiCRSafe"}
# Paper 000, Table 2: cost per step (s) of the linear system, ILUT, 1 and 16 cores (LIS, OpenMP)
PAPER_TABLE2 = {"bicg": (0.764657, 0.196927), "bicgstab": (0.659210, 0.148999), "gpbicg": (0.686384, 0.199920),
                "bicgsafe": (0.660219, 0.176699), "idr": (0.645309, 0.165456), "bicr": (0.772417, 0.207286),
                "crs": (0.689740, 0.158914), "bicrstab": (0.675243, 0.158104), "gpbicr": (0.705240, 0.207514),
                "bicrsafe": (0.667985, 0.184428)}
# per-iteration work of each method (LIS arrangement): A products, A^T products, M^-1 and M^-T
# applications, dot products (norm included), vector updates (axpy-equivalents)
WORK_PER_ITER = {
    "bicg": dict(matvec=1, rmatvec=1, psolve=1, psolve_T=1, dots=2, axpys=5),
    "bicgstab": dict(matvec=2, rmatvec=0, psolve=2, psolve_T=0, dots=5, axpys=6),
    "gpbicg": dict(matvec=2, rmatvec=0, psolve=2, psolve_T=0, dots=9, axpys=16),
    "bicgsafe": dict(matvec=2, rmatvec=0, psolve=2, psolve_T=0, dots=8, axpys=17),
    "idr": dict(matvec=1, rmatvec=0, psolve=1, psolve_T=0, dots=(IDR_S + 3) / 2 + 1, axpys=IDR_S + 2),
    "bicr": dict(matvec=1, rmatvec=1, psolve=1, psolve_T=1, dots=3, axpys=7),
    "crs": dict(matvec=2, rmatvec=0, psolve=2, psolve_T=0, dots=3, axpys=8),
    "bicrstab": dict(matvec=2, rmatvec=0, psolve=2, psolve_T=0, dots=5, axpys=7),
    "gpbicr": dict(matvec=2, rmatvec=0, psolve=2, psolve_T=0, dots=9, axpys=16),
    "bicrsafe": dict(matvec=2, rmatvec=0, psolve=2, psolve_T=0, dots=8, axpys=18),
}
