"""Krylov solvers and preconditioners for the Newton systems of the ITER phase (Table 2 of paper 000).

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
* ``ops``: the vector operations (dot, norm, axpby, axpbypcz).  ``NumpyOps(xp)`` works for
  numpy and cupy arrays; ``NumbaOps(threads)`` are prange kernels (multi-threaded CPU).  The
  algorithms are written once against that namespace.
* Iterations are counted as in LIS: one pass of the main loop (2 matvecs for the product-type
  methods, 1 A + 1 A^T for BiCG/BiCR); IDR(s) counts each of its s + 1 inner steps (one matvec
  each) as one iteration.

Preconditioners (``make_preconditioner``): 'none'; 'ilut' = scipy.sparse.linalg.spilu (SuperLU's
threshold ILU, ILUTP with COLAMD column order and partial pivoting threshold 0.1 by default; the
knobs are drop_tol and fill_factor, see ``ILUT_DEFAULTS``); 'ilu0' = ILU(0) on the matrix pattern
(numba, sequential).  The triangular solves of both are sequential (SuperLU's solve, numba loops):
only SpMV and the vector operations use threads.

Operators (``make_operator``): 'scipy' (CSR SpMV of scipy, one thread) or 'numba' (prange CSR SpMV
over rows; A^T as a second CSR matrix).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

SOLVERS: dict = {}
PRECONDITIONERS = ("none", "ilut", "ilu0")
# ILUT knobs (scipy spilu): drop entries below drop_tol x (norm of the column), keep at most
# fill_factor x nnz(A) in L + U.  LIS's defaults are drop 0.05 and rate 5; SuperLU's drop rule
# differs (relative to the column).  On the captured Newton systems of the standard mesh
# (docs/performance-krylov.md) drop_tol 1e-3 / fill 5 gives nnz(L + U) ~ nnz(A) (as LIS's rate 5
# intends) and ~8 BiCGSTAB iterations per system; 1e-4 / 10 gives ~3 (too few to tell the
# methods apart) at the same setup cost.
ILUT_DEFAULTS = {"drop_tol": 1e-3, "fill_factor": 5.0}
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


# ---------------------------------------------------------------------- vector operations
class NumpyOps:
    """Vector operations of an array module (numpy or cupy)."""

    def __init__(self, xp=np):
        self.xp = xp

    def dot(self, x, y):
        return float(self.xp.dot(x, y))

    def norm(self, x):
        return float(self.xp.sqrt(self.xp.dot(x, x)))

    def axpby(self, a, x, b, y):
        """a x + b y (new array)."""
        return a * x + b * y

    def axpbypcz(self, a, x, b, y, c, z):
        """a x + b y + c z (new array)."""
        return a * x + b * y + c * z

    def zeros_like(self, x):
        return self.xp.zeros_like(x)

    def copy(self, x):
        return x.copy()


_NB = {}


def _numba_kernels():
    """Compile (once) the numba kernels: CSR SpMV, dot, fused axpby / axpbypcz, ILU(0)."""
    if _NB:
        return _NB
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def csr_matvec(indptr, indices, data, x, y):
        for i in prange(indptr.size - 1):
            s = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                s += data[k] * x[indices[k]]
            y[i] = s

    @njit(parallel=True, cache=True)
    def dot(x, y):
        s = 0.0
        for i in prange(x.size):
            s += x[i] * y[i]
        return s

    @njit(parallel=True, cache=True)
    def axpby(a, x, b, y, out):
        for i in prange(x.size):
            out[i] = a * x[i] + b * y[i]

    @njit(parallel=True, cache=True)
    def axpbypcz(a, x, b, y, c, z, out):
        for i in prange(x.size):
            out[i] = a * x[i] + b * y[i] + c * z[i]

    @njit(cache=True)
    def ilu0_factor(indptr, indices, a, diag):
        """In-place ILU(0) of a CSR matrix with sorted indices (IKJ variant); diag[i] = position
        of (i, i).  L (unit lower) and U share the pattern of A."""
        n = indptr.size - 1
        iw = -np.ones(n, dtype=np.int64)
        for i in range(n):
            for kk in range(indptr[i], indptr[i + 1]):
                iw[indices[kk]] = kk
            for kk in range(indptr[i], diag[i]):
                k = indices[kk]
                a[kk] /= a[diag[k]]
                lik = a[kk]
                for jj in range(diag[k] + 1, indptr[k + 1]):
                    p = iw[indices[jj]]
                    if p != -1:
                        a[p] -= lik * a[jj]
            for kk in range(indptr[i], indptr[i + 1]):
                iw[indices[kk]] = -1

    @njit(cache=True)
    def ilu0_solve(indptr, indices, a, diag, v, out):
        n = indptr.size - 1
        for i in range(n):  # L y = v (unit diagonal)
            s = v[i]
            for kk in range(indptr[i], diag[i]):
                s -= a[kk] * out[indices[kk]]
            out[i] = s
        for i in range(n - 1, -1, -1):  # U x = y
            s = out[i]
            for kk in range(diag[i] + 1, indptr[i + 1]):
                s -= a[kk] * out[indices[kk]]
            out[i] = s / a[diag[i]]

    @njit(cache=True)
    def ilu0_solve_T(indptr, indices, a, diag, v, out):
        n = indptr.size - 1
        w = v.copy()
        for i in range(n):  # U^T y = v: column-oriented forward substitution
            yi = w[i] / a[diag[i]]
            out[i] = yi
            for kk in range(diag[i] + 1, indptr[i + 1]):
                w[indices[kk]] -= a[kk] * yi
        for i in range(n - 1, -1, -1):  # L^T x = y (unit diagonal), backward
            xi = out[i]
            for kk in range(indptr[i], diag[i]):
                out[indices[kk]] -= a[kk] * xi

    _NB.update(csr_matvec=csr_matvec, dot=dot, axpby=axpby, axpbypcz=axpbypcz,
               ilu0_factor=ilu0_factor, ilu0_solve=ilu0_solve, ilu0_solve_T=ilu0_solve_T)
    return _NB


def set_threads(threads: int) -> int:
    """numba's thread count (clipped to numba's pool); returns the count in effect."""
    import numba

    t = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(t)
    return t


class NumbaOps:
    """prange vector operations (float64, host).  ``threads``: numba thread count set on creation."""

    def __init__(self, threads: int | None = None):
        self.k = _numba_kernels()
        self.xp = np
        if threads is not None:
            self.threads = set_threads(threads)

    def dot(self, x, y):
        return float(self.k["dot"](x, y))

    def norm(self, x):
        return math.sqrt(self.k["dot"](x, x))

    def axpby(self, a, x, b, y):
        out = np.empty_like(x)
        self.k["axpby"](float(a), x, float(b), y, out)
        return out

    def axpbypcz(self, a, x, b, y, c, z):
        out = np.empty_like(x)
        self.k["axpbypcz"](float(a), x, float(b), y, float(c), z, out)
        return out

    def zeros_like(self, x):
        return np.zeros_like(x)

    def copy(self, x):
        return x.copy()


# ---------------------------------------------------------------------- operators, preconditioners
@dataclass
class Operator:
    matvec: object
    rmatvec: object
    n: int
    nnz: int
    impl: str


def make_operator(A, impl: str = "scipy") -> Operator:
    """A v and A^T v of a scipy sparse matrix: 'scipy' (CSR, one thread) or 'numba' (prange CSR)."""
    A = sp.csr_matrix(A)
    A.sort_indices()
    AT = A.T.tocsr()
    AT.sort_indices()
    if impl == "scipy":
        return Operator(lambda v: A @ v, lambda v: AT @ v, A.shape[0], A.nnz, impl)
    if impl != "numba":
        raise ValueError(f"operator impl must be 'scipy' or 'numba', not {impl!r}")
    k = _numba_kernels()["csr_matvec"]

    def mk(M):
        ip, ix, d = M.indptr.astype(np.int64), M.indices.astype(np.int64), M.data.astype(np.float64)

        def mv(v):
            y = np.empty(M.shape[0])
            k(ip, ix, d, np.ascontiguousarray(v, dtype=np.float64), y)
            return y
        return mv
    return Operator(mk(A), mk(AT), A.shape[0], A.nnz, impl)


@dataclass
class Preconditioner:
    kind: str
    solve: object
    solve_T: object
    setup_s: float
    nnz: int  # nonzeros of L + U (0 for 'none')


def make_preconditioner(A, kind: str = "ilut", drop_tol: float | None = None,
                        fill_factor: float | None = None) -> Preconditioner:
    """'none', 'ilut' (scipy spilu; ``ILUT_DEFAULTS``) or 'ilu0' (numba ILU(0)).  setup_s: the
    factorisation's wall time."""
    if kind == "none":
        ident = lambda v: v  # noqa: E731
        return Preconditioner("none", ident, ident, 0.0, 0)
    t0 = time.perf_counter()
    if kind == "ilut":
        dt = ILUT_DEFAULTS["drop_tol"] if drop_tol is None else drop_tol
        ff = ILUT_DEFAULTS["fill_factor"] if fill_factor is None else fill_factor
        ilu = spla.spilu(sp.csc_matrix(A), drop_tol=dt, fill_factor=ff)
        setup = time.perf_counter() - t0
        return Preconditioner("ilut", ilu.solve, lambda v: ilu.solve(v, trans="T"), setup,
                              int(ilu.L.nnz + ilu.U.nnz))
    if kind == "ilu0":
        k = _numba_kernels()
        M = sp.csr_matrix(A, copy=True)
        M.sort_indices()
        ip, ix = M.indptr.astype(np.int64), M.indices.astype(np.int64)
        a = M.data.astype(np.float64).copy()
        n = M.shape[0]
        diag = np.empty(n, dtype=np.int64)
        for i in range(n):
            row = ix[ip[i]:ip[i + 1]]
            j = np.searchsorted(row, i)
            if j >= row.size or row[j] != i:
                raise ValueError(f"ilu0: zero-pattern diagonal in row {i}")
            diag[i] = ip[i] + j
        k["ilu0_factor"](ip, ix, a, diag)
        setup = time.perf_counter() - t0

        def solve(v):
            out = np.empty(n)
            k["ilu0_solve"](ip, ix, a, diag, np.ascontiguousarray(v, dtype=np.float64), out)
            return out

        def solve_T(v):
            out = np.empty(n)
            k["ilu0_solve_T"](ip, ix, a, diag, np.ascontiguousarray(v, dtype=np.float64), out)
            return out
        return Preconditioner("ilu0", solve, solve_T, setup, int(a.size))
    raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, not {kind!r}")


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


# ---------------------------------------------------------------------- captured Newton systems
def capture_systems(cfg_path=None, overrides=(), steps: int = 2, backend: str = "numpy") -> list[dict]:
    """Run the solver (reference NumPy path) for ``steps`` time steps and return every linear
    system it solved: dicts with A (CSR), b, x (the sparse-LU solution the solver used), x_bc,
    step (0 = start-up: INITCOND with Neumann, THERMEQUIL with Dirichlet rows) and the call index.
    The solver's own ``poisson.solve`` is wrapped (not changed): the systems are the real ones."""
    from solver.backend import get_backend
    from solver.bsp import poisson
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(cfg_path, list(overrides) + [f"time.steps={int(steps)}", "time.t_end_ps=null",
                                            f"numerics.backend={backend}", "output.checkpoint_every_steps=0"])
    be = get_backend(backend)
    label = {"step": 0}
    out: list[dict] = []
    orig_solve = poisson.solve

    def recording_solve(model, backend_, sysm, A, b):
        x = orig_solve(model, backend_, sysm, A, b)
        out.append({"A": sp.csr_matrix(A, copy=True), "b": np.array(backend_.to_numpy(b), dtype=float),
                    "x": np.array(backend_.to_numpy(x), dtype=float), "x_bc": sysm.x_bc,
                    "step": label["step"], "call": len(out)})
        return x

    sim = Simulation(cfg, backend=be, progress=False)
    orig_step = sim.step

    def counting_step():
        label["step"] += 1
        return orig_step()

    sim.step = counting_step
    poisson.solve = recording_solve
    try:
        sim.run(resume=False)
    finally:
        poisson.solve = orig_solve
    for s in out:
        s["A"].sort_indices()
    return out


def save_systems(path, systems, attrs: dict | None = None) -> None:
    """Systems to one HDF5 file (solver.io.write_hdf5, atomic; *.h5 is not committed); patterns
    shared between systems are stored once."""
    from solver import io

    arrays, pats = {}, []
    for i, s in enumerate(systems):
        A = s["A"]
        key = None
        for j, (ip, ix) in enumerate(pats):
            if ip.size == A.indptr.size and np.array_equal(ip, A.indptr) and np.array_equal(ix, A.indices):
                key = j
                break
        if key is None:
            pats.append((A.indptr.copy(), A.indices.copy()))
            key = len(pats) - 1
        arrays[f"data_{i}"] = A.data
        arrays[f"b_{i}"] = s["b"]
        arrays[f"x_{i}"] = s["x"]
        arrays[f"pattern_{i}"] = np.array(key)
    for j, (ip, ix) in enumerate(pats):
        arrays[f"indptr_p{j}"] = ip
        arrays[f"indices_p{j}"] = ix
    arrays["step"] = np.array([s["step"] for s in systems])
    arrays["call"] = np.array([s["call"] for s in systems])
    arrays["x_bc"] = np.array([s["x_bc"] for s in systems], dtype="S")
    arrays["n"] = np.array(systems[0]["A"].shape[0] if systems else 0)
    io.write_hdf5(path, arrays, attrs or {})


def systems_key(path) -> str | None:
    """The config hash a systems file was captured with (None for files without one)."""
    import h5py

    with h5py.File(path, "r") as z:
        v = z.attrs.get("config_hash")
    return v.decode() if isinstance(v, bytes) else v


def load_systems(path) -> list[dict]:
    import h5py

    with h5py.File(path, "r") as z:
        n = int(z["n"][()])
        steps, calls, bcs = z["step"][()], z["call"][()], z["x_bc"][()]
        out = []
        for i in range(steps.size):
            k = int(z[f"pattern_{i}"][()])
            A = sp.csr_matrix((z[f"data_{i}"][()], z[f"indices_p{k}"][()], z[f"indptr_p{k}"][()]), shape=(n, n))
            out.append({"A": A, "b": z[f"b_{i}"][()], "x": z[f"x_{i}"][()], "x_bc": bcs[i].decode(),
                        "step": int(steps[i]), "call": int(calls[i])})
    return out


# ---------------------------------------------------------------------- the Table 2 benchmark
def _variants(threads_list, with_scipy=True):
    """(impl, threads): scipy SpMV/NumPy vector ops (one thread) and numba at each thread count."""
    out = [("scipy", 1)] if with_scipy else []
    return out + [("numba", int(t)) for t in threads_list]


def _warmup():
    """Compile the numba kernels outside the timings."""
    A = sp.csr_matrix(sp.eye(8) * 2.0 + sp.eye(8, k=1) * 0.1)
    b = np.ones(8)
    ops = NumbaOps()
    op = make_operator(A, "numba")
    P = make_preconditioner(A, "ilu0")
    for f in SOLVERS.values():  # every kernel (axpby, axpbypcz, dot, SpMV, ILU(0) solves) is used
        f(op.matvec, b, P.solve, rmatvec=op.rmatvec, precond_T=P.solve_T, ops=ops)


def benchmark(systems, solvers=TABLE2_ORDER, preconds=("ilut",), threads=(1,), tol=1e-8, maxiter=1000,
              stage="steps", with_scipy=True, ilut=None, superlu=True, log=None) -> tuple:
    """Solve every system with every (solver, preconditioner, impl/threads); returns
    (per_system DataFrame, table DataFrame).  ``stage``: 'steps' (the time-step systems: the cost
    per step), 'startup' or 'all'.  Preconditioner setup is done once per system and
    preconditioner and timed separately (setup_s); it is added to every solver's cost per step."""
    import pandas as pd

    ilut = dict(ilut or {})
    sel = [s for s in systems if stage == "all" or (stage == "steps") == (s["step"] > 0)]
    if not sel:
        raise ValueError(f"no captured systems for stage {stage!r}")
    n_steps = max(1, len({s["step"] for s in sel if s["step"] > 0})) if stage != "startup" else 1
    _warmup()
    rows = []
    for impl, t in _variants(threads, with_scipy):
        if impl == "numba":
            t = set_threads(t)
            ops = NumbaOps()
        else:
            ops = NumpyOps(np)
        ops_list = [make_operator(s["A"], impl) for s in sel]
        for pk in preconds:
            pcs = [make_preconditioner(s["A"], pk, **(ilut if pk == "ilut" else {})) for s in sel]
            for name in solvers:
                f = SOLVERS[name]
                for s, op, pc in zip(sel, ops_list, pcs):
                    nmv = {"mv": 0, "ps": 0}

                    def mv(v, _op=op):
                        nmv["mv"] += 1
                        return _op.matvec(v)

                    def ps(v, _pc=pc):
                        nmv["ps"] += 1
                        return _pc.solve(v)
                    t0 = time.perf_counter()
                    res = f(mv, s["b"], ps, rmatvec=op.rmatvec, precond_T=pc.solve_T, tol=tol,
                            maxiter=maxiter, ops=ops)
                    dt = time.perf_counter() - t0
                    x = np.asarray(res.x)
                    bn = np.linalg.norm(s["b"])
                    rows.append({"solver": name, "precond": pk, "impl": impl, "threads": t, "step": s["step"],
                                 "call": s["call"], "x_bc": s["x_bc"], "iterations": res.iterations,
                                 "matvecs": nmv["mv"], "psolves": nmv["ps"], "converged": bool(res.converged),
                                 "breakdown": res.breakdown or "", "setup_s": pc.setup_s, "solve_s": dt,
                                 "precond_nnz": pc.nnz,
                                 "rel_residual": float(np.linalg.norm(s["b"] - s["A"] @ x) / bn),
                                 "rel_error_vs_lu": float(np.linalg.norm(x - s["x"]) / np.linalg.norm(s["x"]))})
                if log:
                    last = rows[-len(sel):]
                    print(f"{impl} t={t} {pk} {name}: {sum(r['solve_s'] for r in last):.3f} s solve, "
                          f"{sum(r['iterations'] for r in last)} it, conv {sum(r['converged'] for r in last)}/{len(sel)}",
                          file=log, flush=True)
    if superlu:
        for s in sel:
            for order in ("NATURAL", "COLAMD"):
                A = sp.csc_matrix(s["A"])
                t0 = time.perf_counter()
                lu = spla.splu(A, permc_spec=order)
                t1 = time.perf_counter()
                x = lu.solve(s["b"])
                t2 = time.perf_counter()
                bn = np.linalg.norm(s["b"])
                rows.append({"solver": f"superlu_{order.lower()}", "precond": "", "impl": "scipy", "threads": 1,
                             "step": s["step"], "call": s["call"], "x_bc": s["x_bc"], "iterations": 0, "matvecs": 0,
                             "psolves": 0, "converged": True, "breakdown": "", "setup_s": t1 - t0, "solve_s": t2 - t1,
                             "precond_nnz": int(lu.L.nnz + lu.U.nnz),
                             "rel_residual": float(np.linalg.norm(s["b"] - s["A"] @ x) / bn),
                             "rel_error_vs_lu": float(np.linalg.norm(x - s["x"]) / np.linalg.norm(s["x"]))})
    per = pd.DataFrame(rows)
    g = per.groupby(["solver", "precond", "impl", "threads"], sort=False)
    table = g.agg(systems=("call", "size"), iterations=("iterations", "sum"), matvecs=("matvecs", "sum"),
                  setup_s=("setup_s", "sum"), solve_s=("solve_s", "sum"), converged=("converged", "all"),
                  n_converged=("converged", "sum"), max_rel_residual=("rel_residual", "max"),
                  max_rel_error_vs_lu=("rel_error_vs_lu", "max"), precond_nnz=("precond_nnz", "mean")).reset_index()
    table["systems_per_step"] = table["systems"] / n_steps
    table["iterations_per_system"] = table["iterations"] / table["systems"]
    table["setup_per_step_s"] = table["setup_s"] / n_steps
    table["solve_per_step_s"] = table["solve_s"] / n_steps
    table["time_per_step_s"] = (table["setup_s"] + table["solve_s"]) / n_steps
    table["stage"] = stage
    table["paper_1core_s"] = [PAPER_TABLE2.get(s, (np.nan, np.nan))[0] for s in table["solver"]]
    table["paper_16core_s"] = [PAPER_TABLE2.get(s, (np.nan, np.nan))[1] for s in table["solver"]]
    cols = ["solver", "precond", "impl", "threads", "iterations_per_system", "time_per_step_s", "setup_per_step_s",
            "solve_per_step_s", "converged", "n_converged", "systems", "systems_per_step", "max_rel_residual",
            "max_rel_error_vs_lu", "matvecs", "precond_nnz", "stage", "paper_1core_s", "paper_16core_s"]
    return per, table[cols]


def run_table2(out_dir, cfg_path=None, overrides=(), steps=2, solvers=TABLE2_ORDER, preconds=("ilut",),
               threads=(1,), tol=1e-8, maxiter=1000, stage="steps", ilut=None, systems_path=None,
               with_scipy=True, log=None) -> dict:
    """Capture (or load) the systems, run the benchmark, write table2_krylov.csv,
    table2_krylov_systems.csv and run.json into ``out_dir`` (atomically)."""
    from pathlib import Path

    import pandas as pd

    from solver import io, provenance
    from solver.bsp.model import load

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = load(cfg_path, list(overrides) + [f"time.steps={int(steps)}", "time.t_end_ps=null"])
    t0 = time.perf_counter()
    key = provenance.config_hash(cfg)  # the resolved run config: mesh, physics, steps
    systems = None
    if systems_path and Path(systems_path).exists():
        if systems_key(systems_path) == key:
            systems = load_systems(systems_path)
        elif log:
            log(f"{systems_path}: captured with another configuration; capturing again")
    if systems is None:
        systems = capture_systems(cfg_path, overrides, steps)
        if systems_path:
            save_systems(systems_path, systems, {"config": str(cfg_path), "overrides": list(overrides),
                                                 "steps": int(steps), "config_hash": key})
    capture_s = time.perf_counter() - t0
    per, table = benchmark(systems, solvers, preconds, threads, tol, maxiter, stage, with_scipy, ilut, log=log)
    io.write_csv(per, out / "table2_krylov_systems.csv", float_format="%.6e")
    io.write_csv(table, out / "table2_krylov.csv", float_format="%.6g")
    A0 = systems[-1]["A"]
    calls = pd.Series([s["step"] for s in systems]).value_counts().sort_index()
    extra = {"krylov": {"solvers": list(solvers), "preconds": list(preconds), "threads": list(threads), "tol": tol,
                        "maxiter": maxiter, "stage": stage, "ilut": {**ILUT_DEFAULTS, **(ilut or {})},
                        "idr_s": IDR_S, "n": int(A0.shape[0]), "nnz": int(A0.nnz),
                        "systems_per_step": {int(k): int(v) for k, v in calls.items()},
                        "capture_s": capture_s, "systems_file": str(systems_path) if systems_path else None,
                        "numba_threading_layer": _threading_layer()}}
    io.write_json(out / "run.json", provenance.collect(cfg, None, extra))
    return {"table": table, "per_system": per, "systems": systems}


def _threading_layer():
    try:
        import numba
        return numba.threading_layer()
    except Exception:  # noqa: BLE001 - not initialised or not installed
        return None


def register_cli(bs) -> None:
    k = bs.add_parser("krylov", help="Table 2 of paper 000: ILUT + 10 Krylov solvers on the captured Newton systems")
    k.add_argument("config", nargs="?", default=None, help="run configuration (mesh, physics)")
    k.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    k.add_argument("--out", required=True, help="output folder (table2_krylov.csv, table2_krylov_systems.csv, run.json)")
    k.add_argument("--steps", type=int, default=2, help="time steps whose Newton systems are captured")
    k.add_argument("--solvers", default=",".join(TABLE2_ORDER))
    k.add_argument("--precond", default="ilut", help="comma list of none, ilut, ilu0")
    k.add_argument("--threads", default="1", help="comma list of numba thread counts")
    k.add_argument("--tol", type=float, default=1e-8)
    k.add_argument("--maxiter", type=int, default=1000)
    k.add_argument("--stage", choices=["steps", "startup", "all"], default="steps")
    k.add_argument("--drop-tol", type=float, default=None)
    k.add_argument("--fill-factor", type=float, default=None)
    k.add_argument("--systems", default=None, help="HDF5 file of captured systems (.h5): loaded if it exists, else written")
    k.add_argument("--no-scipy", action="store_true", help="skip the scipy (one-thread) variant")
    k.set_defaults(func=_cli)


def _cli(args) -> int:
    import sys

    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    bad = [s for s in solvers if s not in SOLVERS]
    if bad:
        print(f"unknown solver(s) {bad}; known: {list(SOLVERS)}", file=sys.stderr)
        return 2
    ilut = {k: v for k, v in (("drop_tol", args.drop_tol), ("fill_factor", args.fill_factor)) if v is not None}
    r = run_table2(args.out, args.config, args.overrides, args.steps, solvers,
                   [p.strip() for p in args.precond.split(",")], [int(t) for t in args.threads.split(",")],
                   args.tol, args.maxiter, args.stage, ilut, args.systems, not args.no_scipy, log=sys.stderr)
    t = r["table"]
    print(t[["solver", "precond", "impl", "threads", "iterations_per_system", "time_per_step_s", "setup_per_step_s",
             "converged", "max_rel_error_vs_lu"]].to_string(index=False))
    return 0 if t["converged"].all() else 1
