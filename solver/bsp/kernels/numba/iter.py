"""numba fast paths of ITER (the Schroedinger-Poisson Newton) for the "numba" backend.

Each function takes exactly the arguments of the function it replaces and returns the same
result to rounding (tests/test_bsp_kernels_numba_iter.py: <= 1e-12 relative); every parallel
loop writes disjoint outputs in a fixed operation order, so a result is bitwise the same from
run to run and for any thread count.

``eigen``            schrodinger.eigen: the N_sbn lowest eigenpairs of all (column, valley)
                     tridiagonal problems, one ``prange`` item each.  Eigenvalues: the N_sbn
                     levels in lockstep (independent division chains), Sturm counts with LAPACK
                     dlaebz's pivmin rule narrowing every level's bracket, multisection of shared
                     brackets, Newton on the characteristic polynomial inside a bracket that holds
                     one level (bisection as the safeguard), to dstebz's tolerance ulp ||T||.
                     Eigenvectors: 3 sweeps of inverse iteration, the levels in lockstep
                     (tridiagonal LU with partial pivoting as dgttrf, tiny pivots replaced by
                     ulp ||T||, a fixed start vector, Gram-Schmidt against the lower levels after
                     every sweep); then chi = v / sqrt(dz), zero at j = 0 and NZ-1, sign fixed as
                     schrodinger.fix_sign.  No warm start: the result depends on V only.
``frechet``          poisson.frechet: per column the products B (pairs and squares) and weights c,
                     then F[j, j':] = sum_r (c_r B[r, j]) B[r, j':] from the diagonal on, mirrored
                     (F is symmetric), one ``prange`` item per (i, j).
``construct_linsys`` poisson.construct_linsys: the row-equilibrated block form ((D, lo, up), b) of
                     blocktri.construct (same arithmetic, so bitwise equal to it).
``solve_linsys``     poisson.solve_linsys: block cyclic reduction (blocktri.solve_cr).  Per level: the LU
                     factors (partial pivoting) of the eliminated blocks (``prange`` over blocks),
                     the solves B^{-1} [A | C | r] (``prange`` over (block, column)), the
                     updates of the kept blocks (``prange`` over (block, row)); level 0 uses that
                     A and C are diagonal there.  Back substitution per level over (block, row).
                     Dirichlet entries equal b exactly.  The factors are kept per system
                     (_cr_factors); ``reuse=True`` with the very matrix object they belong to
                     (numerics.iter_jacobian = step) only substitutes (_cr_resolve: the right-hand
                     side's part of each level, ``prange`` over blocks, then the back substitution;
                     bit-identical to factoring again).
``newton_rhs``       the interior rhs -c_p (N - N_D) + c_p dz F V (poisson._newton_loop's hook).
``newton_norms``     the four Newton norms and all(isfinite(x)): per-row partial results in
                     parallel, combined in row order (deterministic).

No LAPACK/BLAS inside the parallel loops.  Threads: every call sets numba's thread count to
``backend.threads``.  Kernels compile on first use with ``cache=True``.
"""
from __future__ import annotations

import math

import numpy as np

from numba import njit, prange, uint64

from solver.bsp import blocktri
from solver.bsp import constants as K
from solver.bsp import schrodinger
from solver.bsp.kernels import f64 as _to_f64
from solver.bsp.kernels.numba._common import cached as _cached, out_array as _out_array, set_threads as _threads

ULP = float(np.finfo(float).eps)  # LAPACK dlamch('P')
TINY = float(np.finfo(float).tiny)  # LAPACK dlamch('S')
INVERSE_ITERATIONS = 3


def _f64(a):
    return _to_f64(np, a)


# ---------------------------------------------------------------------------- eigen
def _start_vector(n: int) -> np.ndarray:
    """The fixed start vector of inverse iteration: uniform (-1, 1) from a fixed-seed LCG."""
    out = np.empty(n)
    s = 12345
    for j in range(n):
        s = (1103515245 * s + 12345) % 2147483648
        out[j] = 2.0 * s / 2147483648.0 - 1.0
    return out


@njit(cache=True)
def _eigenvalues(d, e2, ns, pivmin, gl, gu, atol, w):
    """The ns lowest eigenvalues of the tridiagonal (d, e^2) into w, all ns in lockstep.

    Each lane k keeps a bracket [lo, hi] of eigenvalue k with the Sturm counts at its ends
    (count(x) = number of eigenvalues below x, LAPACK dlaebz's count with the pivmin guard), and
    every count narrows every lane's bracket.  Lanes sharing one bracket split it evenly
    (multisection); a lane whose bracket holds only eigenvalue k evaluates at the Newton iterate
    x - p/p' of the characteristic polynomial p = prod q_j (p'/p = sum q_j'/q_j from the same
    recurrence) when it lies inside the bracket, else at the midpoint.  Done when the bracket is
    narrower than max(atol, 2 ulp |x|) (result: the midpoint, as dstebz) or the Newton step of an
    isolated lane is below atol (result: the Newton iterate, clamped to the bracket)."""
    n = d.shape[0]
    lo = np.full(ns, gl)
    hi = np.full(ns, gu)
    clo = np.zeros(ns, dtype=np.int64)
    chi = np.full(ns, n, dtype=np.int64)
    xn = np.full(ns, np.nan)
    done = np.zeros(ns, dtype=np.bool_)
    x = np.empty(ns)
    r = np.empty(ns)
    qp = np.empty(ns)
    S = np.empty(ns)
    cnt = np.empty(ns, dtype=np.int64)
    for _it in range(512):
        active = False
        for k in range(ns):
            if done[k]:
                x[k] = w[k]
                continue
            mid = 0.5 * (lo[k] + hi[k])
            if hi[k] - lo[k] <= max(atol, 2.0 * ULP * max(abs(lo[k]), abs(hi[k]))) or mid <= lo[k] or mid >= hi[k]:
                done[k] = True
                w[k] = mid
                x[k] = mid
                continue
            active = True
            if clo[k] == k and chi[k] == k + 1 and lo[k] < xn[k] < hi[k]:
                x[k] = xn[k]
                continue
            same = 0
            rank = 0
            for m in range(ns):
                if not done[m] and lo[m] == lo[k] and hi[m] == hi[k]:
                    same += 1
                    if m < k:
                        rank += 1
            x[k] = lo[k] + (hi[k] - lo[k]) * ((rank + 1.0) / (same + 1.0)) if same > 1 else mid
        if not active:
            break
        # Sturm counts and p'/p at the ns points
        for k in range(ns):
            t = d[0] - x[k]
            if abs(t) < pivmin:
                t = -pivmin
            cnt[k] = 1 if t <= 0.0 else 0
            r[k] = 1.0 / t
            qp[k] = -1.0
            S[k] = -r[k]
        for j in range(1, n):
            dj = d[j]
            ej = e2[j - 1]
            for k in range(ns):
                u = ej * r[k]
                t = dj - x[k] - u
                if abs(t) < pivmin:
                    t = -pivmin
                cnt[k] += 1 if t <= 0.0 else 0
                qp[k] = u * r[k] * qp[k] - 1.0
                r[k] = 1.0 / t
                S[k] += qp[k] * r[k]
        for k in range(ns):
            if done[k]:
                continue
            for m in range(ns):  # count(x) > m <=> lambda_m < x
                if cnt[k] > m:
                    if x[k] < hi[m]:
                        hi[m] = x[k]
                        chi[m] = cnt[k]
                elif x[k] > lo[m]:
                    lo[m] = x[k]
                    clo[m] = cnt[k]
        for k in range(ns):
            if done[k]:
                continue
            if not math.isfinite(S[k]):  # a pivot near 0 overflowed p'/p: bisect instead
                xn[k] = np.nan
                continue
            step = 1.0 / S[k]
            xn[k] = x[k] - step
            if clo[k] == k and chi[k] == k + 1 and abs(step) <= atol:
                done[k] = True
                w[k] = min(max(xn[k], lo[k]), hi[k])


@njit(cache=True)
def _eigenvectors(d, e, w, ptiny, x0, V, work):
    """V (ns, n): unit eigenvectors of the tridiagonal (d, e) for the eigenvalues w (ns,), by
    inverse iteration with a dgttrf-style LU of T - w_k I (tiny pivots replaced by ptiny).  The ns
    levels run in lockstep (independent division chains side by side); after every sweep level
    k is orthogonalised against the levels below it (Gram-Schmidt in order k = 0, 1, ...) and
    normalised.  work: (6, n, ns)."""
    n = d.shape[0]
    ns = w.shape[0]
    AINV = work[0]  # 1 / U diagonal
    DU = work[1]    # U first superdiagonal
    DU2 = work[2]   # U second superdiagonal (row swaps)
    DL = work[3]    # multipliers
    SW = work[4]    # 1.0 where rows j, j+1 were swapped
    Y = work[5]
    a = np.empty(ns)  # the current pivot candidate of each level
    for j in range(n):
        for k in range(ns):
            DU[j, k] = e[j] if j < n - 1 else 0.0
            DU2[j, k] = 0.0
    for k in range(ns):
        a[k] = d[0] - w[k]
    for j in range(n - 1):
        ej = e[j]
        for k in range(ns):
            a0 = a[k]
            a1 = d[j + 1] - w[k]
            if abs(a0) >= abs(ej):
                SW[j, k] = 0.0
                f = ej
                if a0 != 0.0:
                    f = ej / a0
                    a1 = a1 - f * DU[j, k]
                DL[j, k] = f
            else:  # rows j, j+1 swapped
                SW[j, k] = 1.0
                m = a0 / ej
                DL[j, k] = m
                t = DU[j, k]
                DU[j, k] = a1
                a1 = t - m * a1
                a0 = ej
                if j < n - 2:
                    DU2[j, k] = DU[j + 1, k]
                    DU[j + 1, k] = -m * DU[j + 1, k]
            if abs(a0) < ptiny:
                a0 = ptiny if a0 >= 0.0 else -ptiny
            AINV[j, k] = 1.0 / a0
            a[k] = a1
    for k in range(ns):
        a0 = a[k]
        if abs(a0) < ptiny:
            a0 = ptiny if a0 >= 0.0 else -ptiny
        AINV[n - 1, k] = 1.0 / a0
    for j in range(n):
        for k in range(ns):
            Y[j, k] = x0[j]
    for _it in range(INVERSE_ITERATIONS):
        for j in range(n - 1):  # L
            for k in range(ns):
                if SW[j, k] != 0.0:
                    t = Y[j, k]
                    Y[j, k] = Y[j + 1, k]
                    Y[j + 1, k] = t - DL[j, k] * Y[j + 1, k]
                else:
                    Y[j + 1, k] = Y[j + 1, k] - DL[j, k] * Y[j, k]
        for k in range(ns):  # U
            Y[n - 1, k] = Y[n - 1, k] * AINV[n - 1, k]
        if n > 1:
            for k in range(ns):
                Y[n - 2, k] = (Y[n - 2, k] - DU[n - 2, k] * Y[n - 1, k]) * AINV[n - 2, k]
        for j in range(n - 3, -1, -1):
            for k in range(ns):
                Y[j, k] = (Y[j, k] - DU[j, k] * Y[j + 1, k] - DU2[j, k] * Y[j + 2, k]) * AINV[j, k]
        for k in range(ns):
            for m in range(k):  # Gram-Schmidt against the levels below
                s = 0.0
                for j in range(n):
                    s += Y[j, m] * Y[j, k]
                for j in range(n):
                    Y[j, k] -= s * Y[j, m]
            s = 0.0
            for j in range(n):
                s += Y[j, k] * Y[j, k]
            s = 1.0 / math.sqrt(s)
            for j in range(n):
                Y[j, k] *= s
    for k in range(ns):
        for j in range(n):
            V[k, j] = Y[j, k]


@njit(parallel=True, cache=True)
def _eigen_kernel(V, kd, ko, Vc, scale, sign_thr, x0, eps, chi):
    NX, NZ = V.shape
    NV, n = kd.shape
    ns = eps.shape[2]
    for t in prange(NX * NV):
        i = t // NV
        nu = t % NV
        d = np.empty(n)
        e = np.empty(n)  # thread-local copies (no views of shared arrays in the loop); e[n-1] unused
        e[n - 1] = 0.0
        e2 = np.empty(max(n - 1, 1))
        for j in range(n - 1):
            e[j] = ko[nu, j]
        for j in range(n):
            d[j] = kd[nu, j] - V[i, j + 1] - Vc[j + 1]  # the reference's order: (kd - V) - V_c
        emax = 0.0
        for j in range(n - 1):
            e2[j] = e[j] * e[j]
            emax = max(emax, e2[j])
        gl = np.inf
        gu = -np.inf
        for j in range(n):  # Gershgorin interval
            r = 0.0
            if j > 0:
                r += abs(e[j - 1])
            if j < n - 1:
                r += abs(e[j])
            gl = min(gl, d[j] - r)
            gu = max(gu, d[j] + r)
        tnorm = max(abs(gl), abs(gu))
        pivmin = TINY * max(1.0, emax)
        gl -= 2.1 * tnorm * ULP * n + 4.2 * pivmin  # dstebz's widening
        gu += 2.1 * tnorm * ULP * n + 4.2 * pivmin
        w = np.empty(ns)
        _eigenvalues(d, e2, ns, pivmin, gl, gu, ULP * tnorm, w)
        vec = np.empty((ns, n))
        _eigenvectors(d, e, w, ULP * tnorm, x0, vec, np.empty((6, n, ns)))
        for k in range(ns):
            eps[i, nu, k] = w[k]
            amax = 0.0
            for j in range(n):
                amax = max(amax, abs(vec[k, j] * scale))
            sgn = 1.0
            for j in range(n):  # schrodinger.fix_sign: first |chi| > 1e-3 max|chi| positive
                c = vec[k, j] * scale
                if abs(c) > sign_thr * amax:
                    sgn = -1.0 if c < 0.0 else 1.0
                    break
            chi[i, nu, k, 0] = 0.0
            chi[i, nu, k, NZ - 1] = 0.0
            for j in range(n):
                chi[i, nu, k, j + 1] = (vec[k, j] * scale) * sgn


def eigen(model, backend, V, levels=None):
    """schrodinger.eigen (same arguments, same result): (eps (NX, 3, N_sbn), chi (NX, 3, N_sbn, NZ));
    bisection from the Gershgorin bounds: the warm-start ``levels`` are not used."""
    _threads(backend)
    V = _f64(V)
    NX, NZ = V.shape
    ns = model.N_sbn
    return _eigen_into(model, V, np.empty((NX, K.N_VALLEYS, ns)), np.empty((NX, K.N_VALLEYS, ns, NZ)))


def _eigen_into(model, V, eps, chi):
    """eigen's kernel call, into the given eps (NX, 3, N_sbn) and chi (NX, 3, N_sbn, NZ)."""
    kd, ko, Vc, x0 = _cached(model, "eigen.constants", lambda: _eigen_constants(model))
    _eigen_kernel(V, kd, ko, Vc, 1.0 / math.sqrt(model.dz), schrodinger.SIGN_THRESHOLD, x0, eps, chi)
    return eps, chi


def _eigen_constants(model):
    """(kinetic diagonals, off-diagonals, V_c, start vector) of the eigen kernel: per model, built
    once (rebuilding them took ~0.1 ms of serial Python per call, 20 % of the 16-thread kernel)."""
    kin = [schrodinger._kinetic(model, nu) for nu in range(K.N_VALLEYS)]
    return (_f64(np.stack([k[0] for k in kin])), _f64(np.stack([k[1] for k in kin])), _f64(model.V_c),
            _start_vector(model.NZ - 2))


# ---------------------------------------------------------------------------- Frechet
@njit(parallel=True, cache=True)
def _frechet_kernel(eps, chi, rho, drho, use_drho, B, c, F):
    NX, NV, NS, NZ = chi.shape
    nz = NZ - 2
    NXi = NX - 2
    nk = c.shape[1]
    for i in prange(NXi):
        r = 0
        for nu in range(NV):
            for p in range(NS):
                for q in range(p + 1, NS):
                    c[i, r] = 4.0 * (rho[i + 1, nu, p] - rho[i + 1, nu, q]) / (eps[i + 1, nu, q] - eps[i + 1, nu, p])
                    for j in range(nz):
                        B[i, r, j] = chi[i + 1, nu, p, j + 1] * chi[i + 1, nu, q, j + 1]
                    r += 1
            if use_drho:
                for p in range(NS):
                    c[i, r] = 2.0 * drho[i + 1, nu, p]
                    for j in range(nz):
                        B[i, r, j] = chi[i + 1, nu, p, j + 1] * chi[i + 1, nu, p, j + 1]
                    r += 1
    unz = uint64(nz)
    for t in prange(NXi * nz):  # row j from the diagonal on; F is symmetric: mirrored into column j
        ui = uint64(t // nz)
        uj = uint64(t % nz)
        for jj in range(uj, unz):
            F[ui, uj, jj] = 0.0
        for r in range(nk):
            a = B[ui, r, uj] * c[ui, r]
            for jj in range(uj, unz):
                F[ui, uj, jj] += a * B[ui, r, jj]
        for jj in range(uj + uint64(1), unz):
            F[ui, jj, uj] = F[ui, uj, jj]


def frechet(model, backend, eps, chi, rho, drho=None):
    """poisson.frechet (same arguments, same result): F (NX-2, NZ-2, NZ-2)."""
    _threads(backend)
    chi = _f64(chi)
    NX, _, _, NZ = chi.shape
    rho = _f64(rho)
    NS = chi.shape[2]
    nk = K.N_VALLEYS * (NS * (NS - 1) // 2 + (NS if drho is not None else 0))
    B, c = _work(("frechet", NX, NZ, nk), lambda: (np.empty((NX - 2, nk, NZ - 2)), np.empty((NX - 2, nk))))
    F = np.empty((NX - 2, NZ - 2, NZ - 2))
    _frechet_kernel(_f64(eps), chi, rho, rho if drho is None else _f64(drho), drho is not None, B, c, F)
    return F


# ---------------------------------------------------------------------------- the Newton system
@njit(parallel=True, cache=True)
def _construct_kernel(D0, lo0, up0, F, rhs, bflat, cp_dz, D, lo, up, b):
    NX, NZ = lo0.shape
    for t in prange(NX * NZ):
        i = t // NZ
        j = t % NZ
        inner = 0 < i < NX - 1 and 0 < j < NZ - 1
        for jj in range(NZ):
            v = D0[i, j, jj]
            if inner and 0 < jj < NZ - 1:
                v += cp_dz * F[i - 1, j - 1, jj - 1]
            D[i, j, jj] = v
        s = 1.0 / D[i, j, j]
        for jj in range(NZ):
            D[i, j, jj] *= s
        lo[i, j] = lo0[i, j] * s
        up[i, j] = up0[i, j] * s
        b[i, j] = (rhs[i - 1, j - 1] if inner else bflat[t]) * s


def construct_linsys(model, backend, sysm, F, rhs_int, bflat):
    """poisson.construct's fast path: ((D, lo, up), b), the row-equilibrated block form
    (D (NX, NZ, NZ), lo/up/b (NX, NZ)) of blocktri.construct."""
    _threads(backend)
    bs = blocktri.block_system(model, sysm)
    NX, NZ = sysm.NX, sysm.NZ
    D = np.empty((NX, NZ, NZ))
    lo = np.empty((NX, NZ))
    up = np.empty((NX, NZ))
    b = np.empty((NX, NZ))
    _construct_kernel(bs.D0, bs.lo0, bs.up0, _f64(F), _f64(rhs_int), _f64(bflat), float(sysm.cp_dz), D, lo, up, b)
    return (D, lo, up), b


# Inside the parallel loops below no view of a shared array is taken (a view's reference count
# is one atomic counter for all threads) and the inner loops index with unsigned integers: numba
# then omits its negative-index wrap-around, and LLVM vectorises them (with signed indices it does not).
@njit(cache=True)
def _lu(M, piv, i):
    """In-place LU with partial pivoting (first of equal maxima) of M[i] (n, n); row k swapped with piv[i, k]."""
    n = M.shape[1]
    un = uint64(n)
    ui = uint64(i)
    for k in range(n):
        p = k
        amax = abs(M[ui, k, k])
        for r in range(k + 1, n):
            if abs(M[ui, r, k]) > amax:
                amax = abs(M[ui, r, k])
                p = r
        piv[ui, k] = p
        if p != k:
            for c in range(n):
                t = M[ui, k, c]
                M[ui, k, c] = M[ui, p, c]
                M[ui, p, c] = t
        inv = 1.0 / M[ui, k, k]
        uk = uint64(k)
        for r in range(k + 1, n):
            f = M[ui, r, k] * inv
            M[ui, r, k] = f
            if f != 0.0:
                ur = uint64(r)
                for c in range(uk + uint64(1), un):
                    M[ui, ur, c] -= f * M[ui, uk, c]


@njit(cache=True)
def _lu_solve_row(LUT, piv, i, X, c):
    """X[i, c] <- (LU_i)^{-1} X[i, c] for one right-hand side (a contiguous row); LUT[i] = the
    transposed factors of _lu (LUT[i, k, r] = LU_i[r, k]), so both sweeps run along rows."""
    n = X.shape[2]
    un = uint64(n)
    ui = uint64(i)
    uc = uint64(c)
    for k in range(n):
        p = piv[ui, k]
        if p != k:
            t = X[ui, uc, k]
            X[ui, uc, k] = X[ui, uc, p]
            X[ui, uc, p] = t
    for k in range(n):  # L (unit diagonal): column k of L is row k of LUT beyond the diagonal
        xk = X[ui, uc, k]
        if xk != 0.0:
            uk = uint64(k)
            for r in range(uk + uint64(1), un):
                X[ui, uc, r] -= LUT[ui, uk, r] * xk
    for k in range(n - 1, -1, -1):  # U: column k of U is row k of LUT up to the diagonal
        xk = X[ui, uc, k] / LUT[ui, k, k]
        X[ui, uc, k] = xk
        if xk != 0.0:
            uk = uint64(k)
            for r in range(uk):
                X[ui, uc, r] -= LUT[ui, uk, r] * xk


@njit(parallel=True, cache=True)
def _cr_eliminate(D, lo, up, B, A, C, r, piv, LUT, XT, XA, XC, XAT, XCT, Xr, NX, h, first, step, n_elim, level0):
    """[XA | XC | Xr]_i = B_i^{-1} [A_i | C_i | r_i] for the eliminated i = first + step m (A_i = 0
    when i - h < 0, C_i = 0 when i + h >= NX).  Three parallel passes: the LU factors of the
    blocks; one right-hand side per item, solved as a contiguous row of XT; XT transposed into
    XA, XC, Xr, and copied as they are into XAT, XCT (XAT[i, c, j] = XA[i, j, c]: the back substitution's
    layout, rows side by side).  Level 0 reads the blocks from (D, lo, up): B_i = D_i (copied here, in parallel),
    A_i = diag(lo_i), C_i = diag(up_i), so column c of B_i^{-1} is computed once and scaled by
    lo_i[c] and up_i[c]."""
    NZ = r.shape[1]
    for m in prange(n_elim):
        i = first + step * m
        if level0:
            for k in range(NZ):
                for q in range(NZ):
                    B[i, k, q] = D[i, k, q]
        _lu(B, piv, i)
        for k in range(NZ):
            for q in range(NZ):
                LUT[i, k, q] = B[i, q, k]
    nrhs = (NZ if level0 else 2 * NZ) + 1
    for t in prange(n_elim * nrhs):
        i = first + step * (t // nrhs)
        c = t % nrhs
        if c == nrhs - 1:
            for j in range(NZ):
                XT[i, c, j] = r[i, j]
        elif level0:
            for j in range(NZ):
                XT[i, c, j] = 0.0
            XT[i, c, c] = 1.0
        elif c < NZ:
            if i - h < 0:
                for j in range(NZ):
                    XT[i, c, j] = 0.0
                continue
            for j in range(NZ):
                XT[i, c, j] = A[i, j, c]
        else:
            if i + h >= NX:
                for j in range(NZ):
                    XT[i, c, j] = 0.0
                continue
            for j in range(NZ):
                XT[i, c, j] = C[i, j, c - NZ]
        _lu_solve_row(LUT, piv, i, XT, c)
    for t in prange(n_elim * NZ):
        i = first + step * (t // NZ)
        j = t % NZ
        Xr[i, j] = XT[i, nrhs - 1, j]
        if level0:
            west = 1.0 if i - h >= 0 else 0.0
            east = 1.0 if i + h < NX else 0.0
            for c in range(NZ):
                v = XT[i, c, j]
                va = v * (lo[i, c] * west)
                vc = v * (up[i, c] * east)
                XA[i, j, c] = va
                XC[i, j, c] = vc
                XAT[i, c, j] = va
                XCT[i, c, j] = vc
        else:
            for c in range(NZ):
                XA[i, j, c] = XT[i, c, j]
                XC[i, j, c] = XT[i, NZ + c, j]
                XAT[i, c, j] = XT[i, c, j]
                XCT[i, c, j] = XT[i, NZ + c, j]


@njit(parallel=True, cache=True)
def _cr_update(D, lo, up, B, A, C, r, XA, XC, Xr, NX, h, n_kept, level0, A2, C2, SA, SC, off):
    """The kept i = 2 h m, row by row: B_i -= A_i XC_{i-h} + C_i XA_{i+h}, A2_i = -A_i XA_{i-h},
    C2_i = -C_i XC_{i+h}, r_i -= A_i Xr_{i-h} + C_i Xr_{i+h} (level 0: B_i = D_i, A_i = diag(lo_i),
    C_i = diag(up_i)).  Levels >= 1 also keep A_i and C_i (the couplings this level replaces) in
    SA[off + m], SC[off + m], transposed (SA[off + m, k, j] = A_i[j, k]), for the re-solve (_rs_block)."""
    NZ = r.shape[1]
    un = uint64(NZ)
    for t in prange(n_kept * NZ):
        i = 2 * h * (t // NZ)
        j = t % NZ
        ui = uint64(i)
        uj = uint64(j)
        uo = uint64(off + t // NZ)
        for q in range(un):
            A2[ui, uj, q] = 0.0
            C2[ui, uj, q] = 0.0
        if level0:
            for q in range(un):
                B[ui, uj, q] = D[ui, uj, q]
        rn = r[i, j]
        k0 = j if level0 else 0
        k1 = j + 1 if level0 else NZ
        if i - h >= 0:
            uw = uint64(i - h)
            for k in range(k0, k1):
                f = lo[i, j] if level0 else A[i, j, k]
                if not level0:
                    SA[uo, uint64(k), uj] = f
                if f != 0.0:
                    uk = uint64(k)
                    for q in range(un):
                        B[ui, uj, q] -= f * XC[uw, uk, q]
                        A2[ui, uj, q] -= f * XA[uw, uk, q]
                    rn -= f * Xr[uw, uk]
        if i + h < NX:
            ue = uint64(i + h)
            for k in range(k0, k1):
                f = up[i, j] if level0 else C[i, j, k]
                if not level0:
                    SC[uo, uint64(k), uj] = f
                if f != 0.0:
                    uk = uint64(k)
                    for q in range(un):
                        B[ui, uj, q] -= f * XA[ue, uk, q]
                        C2[ui, uj, q] -= f * XC[ue, uk, q]
                    rn -= f * Xr[ue, uk]
        r[i, j] = rn


@njit(cache=True)
def _backsub_item(XAT, XCT, Xr, b, dirichlet, NX, h, first, step, t, x):
    """Item t of _cr_backsub: block i = first + step t: x_i[j] = Xr_i[j] - sum_k XA_i[j, k] x_{i-h}[k] - sum_k XC_i[j, k] x_{i+h}[k] (b_i[j]
    at Dirichlet entries), each row's sum one chain in k order, as the one-row loop of 850f4a3 (the same
    bits); the rows side by side: for each k a contiguous row of XAT (= XA transposed) times x_{i-h}[k] is
    subtracted from the rows' partial sums in x_i (a vectorised loop along j instead of one latency-bound
    chain per row; the whole block per item: XAT_i and XCT_i read in order)."""
    NZ = b.shape[1]
    i = first + step * t
    uj0 = uint64(0)
    uj1 = uint64(NZ)
    ui = uint64(i)
    uw = uint64(i - h)
    for j in range(uj0, uj1):
        x[ui, j] = Xr[ui, j]
    for k in range(uint64(NZ)):
        xk = x[uw, k]
        for j in range(uj0, uj1):
            x[ui, j] -= XAT[ui, k, j] * xk
    if i + h < NX:
        ue = uint64(i + h)
        for k in range(uint64(NZ)):
            xk = x[ue, k]
            for j in range(uj0, uj1):
                x[ui, j] -= XCT[ui, k, j] * xk
    for j in range(uj0, uj1):
        if dirichlet[ui, j]:
            x[ui, j] = b[ui, j]


@njit(parallel=True, cache=True)
def _cr_backsub(XAT, XCT, Xr, b, dirichlet, NX, h, first, step, n_elim, x):
    """The back substitution of one level: x_i for the eliminated i = first + step m (_backsub_item),
    one item per block."""
    for t in prange(n_elim):
        _backsub_item(XAT, XCT, Xr, b, dirichlet, NX, h, first, step, t, x)


@njit(parallel=True, cache=True)
def _rs_first(r, piv, LUT, X, n_elim):
    """The re-solve's level 0: X[i, 0] = B_i^{-1} r_i for the eliminated i = 1 + 2 m (the kept LU
    factors, _lu_solve_row as in _cr_eliminate: the same bits)."""
    NZ = r.shape[1]
    for m in prange(n_elim):
        i = 1 + 2 * m
        for j in range(NZ):
            X[i, 0, j] = r[i, j]
        _lu_solve_row(LUT, piv, i, X, 0)


@njit(cache=True)
def _rs_block(lo, up, SA, SC, off, r, piv, LUT, X, NX, h, n_kept, level0, m):
    """Block m of _rs_level: r_i -= A_i X_{i-h} + C_i X_{i+h} for the kept i = 2 h m, each row's sum one
    chain in _cr_update's order (k ascending, the west coupling then the east one, a zero coupling skipped:
    the same bits as the one-row loop of 850f4a3); at levels >= 1 the rows side by side (SA, SC transposed:
    for each k a contiguous row SA[off + m, k, :] times X_{i-h}[k], a vectorised loop along j); then, for
    the blocks the next level eliminates (m odd; column 0 after the last level), X[i, 0] = B_i^{-1} r_i."""
    NZ = r.shape[1]
    un = uint64(NZ)
    i = 2 * h * m
    ui = uint64(i)
    uo = uint64(off + m)
    if level0:
        for j in range(un):
            rn = r[ui, j]
            if i - h >= 0:
                f = lo[ui, j]
                if f != 0.0:
                    rn -= f * X[uint64(i - h), 0, j]
            if i + h < NX:
                f = up[ui, j]
                if f != 0.0:
                    rn -= f * X[uint64(i + h), 0, j]
            r[ui, j] = rn
    else:
        if i - h >= 0:
            uw = uint64(i - h)
            for k in range(un):
                xk = X[uw, 0, k]
                for j in range(un):
                    f = SA[uo, k, j]
                    rn = r[ui, j]
                    r[ui, j] = rn - f * xk if f != 0.0 else rn
        if i + h < NX:
            ue = uint64(i + h)
            for k in range(un):
                xk = X[ue, 0, k]
                for j in range(un):
                    f = SC[uo, k, j]
                    rn = r[ui, j]
                    r[ui, j] = rn - f * xk if f != 0.0 else rn
    if m % 2 == 1 or n_kept == 1:
        for j in range(NZ):
            X[i, 0, j] = r[i, j]
        _lu_solve_row(LUT, piv, i, X, 0)


@njit(parallel=True, cache=True)
def _rs_level(lo, up, SA, SC, off, r, piv, LUT, X, NX, h, n_kept, level0):
    """The re-solve of level h for the kept i = 2 h m, one item per block (_rs_block).  An item writes
    only r_i and X[i]; it reads X at the odd multiples of h, written by the previous pass."""
    for m in prange(n_kept):
        _rs_block(lo, up, SA, SC, off, r, piv, LUT, X, NX, h, n_kept, level0, m)


_WORK: dict = {}


def _work(key, build):
    """Work arrays kept between calls, per shape: allocating arrays of megabytes per call costs
    page faults (the allocator returns freed blocks of that size to the system).  Callers write
    every entry before reading it."""
    if key not in _WORK:
        _WORK[key] = build()
    return _WORK[key]


def _cr_work(NX: int, NZ: int) -> dict:
    """The work arrays of _cr_solve shared by all systems (5 NX NZ^2 + NX (2 NZ + 2) NZ doubles:
    14 MB on the standard mesh; the factors are the system's, _cr_factors)."""
    def build():
        blk = lambda: np.empty((NX, NZ, NZ))  # noqa: E731
        return dict(B=blk(), A=blk(), C=blk(), A2=blk(), C2=blk(),
                    XT=np.empty((NX, 2 * NZ + 1, NZ)), Xr=np.empty((NX, NZ)), r=np.empty((NX, NZ)))
    return _work(("cr", NX, NZ), build)


def _cr_factors(model, sysm, NX: int, NZ: int) -> dict:
    """The factorization of the last block system solved of ``sysm``'s kind (x_bc), kept on the model
    for solve_linsys(..., reuse=True), as poisson.solve_linsys keeps its SuperLU object and
    GaussJordanCR its inverses: the LU factors of every eliminated block (LUT transposed, piv) and
    B^{-1} A, B^{-1} C (XA, XC for the updates; XAT, XCT, the same transposed, for the back
    substitution), each block column eliminated once (indices disjoint over the levels), and the
    couplings A_i, C_i of the kept blocks of the levels >= 1 (SA, SC, transposed, level l at off[l]:
    _cr_update replaces them).  "A": the matrix object they belong to (None: none valid).
    5 NX NZ^2 + 2 sum n_kept NZ^2 doubles (13.2 MB standard, 102 MB at 129 x 129)."""
    key = ("numba", "iter.cr_factors", sysm.x_bc)
    cache = model.device_cache
    f = cache.get(key)
    if f is None or f["shape"] != (NX, NZ):
        levels = blocktri.cr_levels(NX)
        off, n = [], 0
        for lvl, (_, _, _, _, n_kept) in enumerate(levels):
            off.append(n)
            n += n_kept if lvl > 0 else 0
        blk = lambda k: np.empty((k, NZ, NZ))  # noqa: E731
        f = dict(shape=(NX, NZ), A=None, levels=levels, off=off, LUT=blk(NX), XA=blk(NX), XC=blk(NX),
                 XAT=blk(NX), XCT=blk(NX),
                 piv=np.empty((NX, NZ), dtype=np.int64), SA=blk(max(n, 1)), SC=blk(max(n, 1)))
        cache[key] = f
    return f


def _cr_solve(D, lo, up, b, dirichlet, fac):
    """x (NX, NZ) by block cyclic reduction, the factors into ``fac`` (_cr_factors).  The work arrays
    are not initialised: every entry is written by a parallel pass before it is read (no serial
    copies or zero fills)."""
    NX, NZ = b.shape
    w = _cr_work(NX, NZ)
    B, A, C, A2, C2 = w["B"], w["A"], w["C"], w["A2"], w["C2"]  # A, C of this level and the next
    XT, Xr = w["XT"], w["Xr"]
    piv, LUT, XA, XC, SA, SC = fac["piv"], fac["LUT"], fac["XA"], fac["XC"], fac["SA"], fac["SC"]
    XAT, XCT = fac["XAT"], fac["XCT"]
    r = b.copy()
    levels = fac["levels"]
    for lvl, (h, first, step, n_elim, n_kept) in enumerate(levels):
        _cr_eliminate(D, lo, up, B, A, C, r, piv, LUT, XT, XA, XC, XAT, XCT, Xr, NX, h, first, step, n_elim, lvl == 0)
        _cr_update(D, lo, up, B, A, C, r, XA, XC, Xr, NX, h, n_kept, lvl == 0, A2, C2, SA, SC, fac["off"][lvl])
        A, C, A2, C2 = A2, C2, A, C
    _cr_eliminate(D, lo, up, B, A, C, r, piv, LUT, XT, XA, XC, XAT, XCT, Xr, NX, NX, 0, 0, 1, NX == 1)
    return _cr_backsub_all(XAT, XCT, Xr, b, dirichlet, levels)


def _cr_backsub_all(XAT, XCT, Xr, b, dirichlet, levels):
    NX, NZ = b.shape
    x = np.empty((NX, NZ))
    x[0] = np.where(dirichlet[0], b[0], Xr[0])
    for h, first, step, n_elim, _ in reversed(levels):
        _cr_backsub(XAT, XCT, Xr, b, dirichlet, NX, h, first, step, n_elim, x)
    return x


def _cr_resolve(lo, up, b, dirichlet, fac, x=None):
    """x (NX, NZ) for a new b with the kept factors of _cr_solve (NX >= 2): the right-hand side's
    part of every level (B^{-1} r of the eliminated blocks, the updates of the kept r), one parallel
    pass per level, then the same back substitution.  The same operations in the same order as
    _cr_solve: the same bits.  ~8 NX NZ^2 flops against ~NX NZ^3 (docs/performance-numba-iter.md §8).
    The level loop runs compiled (_resolve_levels: one call from Python instead of ~2 log2(NX) + 1).
    x: the output (NX, NZ) (None: a new array)."""
    NX, NZ = b.shape
    lv = fac.get("levels_arr")
    if lv is None:
        lv = fac["levels_arr"] = np.array(fac["levels"], dtype=np.int64).reshape(-1, 5)
        fac["off_arr"] = np.array(fac["off"], dtype=np.int64)
    if x is None:
        x = np.empty((NX, NZ))
    w = _cr_work(NX, NZ)
    _resolve_levels(lo, up, b, dirichlet, fac["piv"], fac["LUT"], fac["SA"], fac["SC"], fac["XAT"], fac["XCT"],
                    w["Xr"], lv, fac["off_arr"], w["r"], x)
    return x


@njit(cache=True)
def _resolve_levels(lo, up, b, dirichlet, piv, LUT, SA, SC, XAT, XCT, Xr, lv, off, r, x):
    """_cr_resolve's passes (_rs_first, _rs_level per level, then _cr_backsub per level from the last,
    each a parallel region) called from compiled code: the same calls, the same bits.  A level of one
    block (the top levels: 1 of the 7 _rs_level and 2 of the 7 _cr_backsub passes at NX = 65) runs its
    items here in order instead (the same item functions: the same bits), without a parallel region's
    start and barrier (~7 us at 16 threads) for one thread's work."""
    NX, NZ = b.shape
    X = Xr.reshape((NX, 1, NZ))  # the rows X[i, 0] are the rows Xr[i] (_lu_solve_row's layout)
    for i in range(NX):  # r: the work copy of b (shared work array, _cr_work)
        for j in range(NZ):
            r[i, j] = b[i, j]
    _rs_first(r, piv, LUT, X, lv[0, 3])
    for lvl in range(lv.shape[0]):
        h, n_kept = lv[lvl, 0], lv[lvl, 4]
        if n_kept == 1:
            _rs_block(lo, up, SA, SC, off[lvl], r, piv, LUT, X, NX, h, n_kept, lvl == 0, 0)
        else:
            _rs_level(lo, up, SA, SC, off[lvl], r, piv, LUT, X, NX, h, n_kept, lvl == 0)
    for j in range(NZ):
        x[0, j] = b[0, j] if dirichlet[0, j] else Xr[0, j]
    for lvl in range(lv.shape[0] - 1, -1, -1):
        h, first, step, n_elim = lv[lvl, 0], lv[lvl, 1], lv[lvl, 2], lv[lvl, 3]
        if n_elim == 1:
            _backsub_item(XAT, XCT, Xr, b, dirichlet, NX, h, first, step, 0, x)
        else:
            _cr_backsub(XAT, XCT, Xr, b, dirichlet, NX, h, first, step, n_elim, x)


def solve_linsys(model, backend, sysm, A, b, reuse=False):
    """poisson.solve's fast path: x (NX NZ,) of the block system of construct_linsys by block
    cyclic reduction; Dirichlet entries equal b exactly.  The factors of the last factorization are
    kept per system (_cr_factors); ``reuse`` and A the very object they belong to: only the
    right-hand side's part (_cr_resolve, the same bits as factoring again)."""
    _threads(backend)
    D, lo, up = (_f64(a) for a in A)
    b = _f64(b)
    NX, NZ = b.shape
    dirichlet = np.asarray(sysm.dirichlet, dtype=np.bool_)
    fac = _cr_factors(model, sysm, NX, NZ)
    if reuse and fac["A"] is A and fac["levels"]:
        x = _cr_resolve(lo, up, b, dirichlet, fac)
    else:
        fac["A"] = None  # invalid while they are overwritten
        x = _cr_solve(D, lo, up, b, dirichlet, fac)
        fac["A"] = A
    return x.ravel()


# ---------------------------------------------------------------------------- Newton glue
@njit(parallel=True, cache=True)
def _rhs_kernel(F, V, N, ND, cp, cp_dz, rhs):
    NXi, nz = rhs.shape
    for t in prange(NXi * nz):
        i = t // nz
        j = t % nz
        s = 0.0
        for q in range(nz):
            s += F[i, j, q] * V[i + 1, q + 1]
        rhs[i, j] = -cp * (N[i + 1, j + 1] - ND[i + 1, j + 1]) + cp_dz * s


def newton_rhs(model, backend, sysm, F, V, N, ND):
    """rhs (NX-2, NZ-2) of the interior rows, -c_p (N - N_D) + c_p dz F V (poisson._newton_loop's hook)."""
    _threads(backend)
    rhs = np.empty((sysm.NX - 2, sysm.NZ - 2))
    _rhs_kernel(_f64(F), _f64(V), _f64(N), _f64(ND), float(model.cp), float(sysm.cp_dz), rhs)
    return rhs


@njit(cache=True)
def _nanmax(a, b):
    """max(a, b) that keeps the first NaN (a NaN anywhere makes the norm NaN)."""
    if a != a:
        return a
    return b if (b > a or b != b) else a


@njit(cache=True)
def _row_norms(Vn, Vo, Nn, No, x, i, part):
    """Row i's partial norms of the changes of V and N (max |dV|, sum dV^2, max |dN|, sum dN^2) and
    whether x's row (flat, NZ values from i NZ) is finite, into part[i, :5]."""
    NZ = Vn.shape[1]
    m0 = 0.0
    s0 = 0.0
    m1 = 0.0
    s1 = 0.0
    fin = 1.0
    for j in range(NZ):
        dv = Vn[i, j] - Vo[i, j]
        dn = Nn[i, j] - No[i, j]
        m0 = _nanmax(m0, abs(dv))
        m1 = _nanmax(m1, abs(dn))
        s0 += dv * dv
        s1 += dn * dn
        if not np.isfinite(x[i * NZ + j]):
            fin = 0.0
    part[i, 0] = m0
    part[i, 1] = s0
    part[i, 2] = m1
    part[i, 3] = s1
    part[i, 4] = fin


@njit(parallel=True, cache=True)
def _norms_kernel(Vn, Vo, Nn, No, x, part):
    for i in prange(Vn.shape[0]):
        _row_norms(Vn, Vo, Nn, No, x, i, part)


def newton_norms(model, backend, V_new, V_old, N_new, N_old, x):
    """(norms dict as poisson._norms, all(isfinite(x))): per-row partial results in parallel,
    combined in row order."""
    _threads(backend)
    Vn = _f64(V_new)
    part = np.empty((Vn.shape[0], 5))
    _norms_kernel(Vn, _f64(V_old), _f64(N_new), _f64(N_old), _f64(x).ravel(), part)
    m0, s0, m1, s1, fin = _norms_combine(part)
    w = math.sqrt(model.dx * model.dz)
    vals = [float(m0), w * math.sqrt(s0), float(m1), w * math.sqrt(s1)]
    return dict(zip(("dV_inf", "dV_l2", "dN_inf", "dN_l2"), vals)), bool(fin)


@njit(cache=True)
def _norms_combine(part):
    """The rows of _norms_kernel's partial results combined in row order (one compiled call: the
    Python loop over the rows took ~0.15 ms per Newton iteration)."""
    m0 = s0 = m1 = s1 = 0.0
    fin = True
    for i in range(part.shape[0]):
        m0 = _nanmax(m0, part[i, 0])
        m1 = _nanmax(m1, part[i, 2])
        s0 += part[i, 1]
        s1 += part[i, 3]
        fin = fin and part[i, 4] != 0.0
    return m0, s0, m1, s1, fin



# ---------------------------------------------------------------------------- the kept-Jacobian iteration
# poisson.newton_iteration (numerics.iter_graph, on for numba with auto): one call per simplified-Newton
# iteration of POTENTIAL instead of the ~10 dispatched calls of _newton_loop, with the serial NumPy pieces
# in numba: b of the kept system with the rhs (one pass, no 2 MB D), the density N = 2 sum rho chi^2, the
# norms with the stage tail (d eps/dx, A_eps, finite V).  docs/performance-numba-iter.md §9.
@njit(parallel=True, cache=True)
def _b_kernel(D0, F, V, N, ND, cp, cp_dz, bflat, b):
    """b (NX, NZ) of the kept Newton system: the interior rhs -c_p (N - N_D) + c_p dz F V (_rhs_kernel's
    operations) and the boundary values, scaled by 1 / the diagonal of D0 + c_p dz F (_construct_kernel's):
    bitwise the b of newton_rhs + construct_linsys.  One item per (column, 4 rows): four dot products
    side by side (each summed in _rhs_kernel's order)."""
    NX, NZ = b.shape
    nz = NZ - 2
    ng = (NZ + 3) // 4
    for t in prange(NX * ng):
        i = t // ng
        j0 = 4 * (t % ng)
        inner_i = 0 < i < NX - 1
        if inner_i and j0 > 0 and j0 + 3 < NZ - 1:  # four interior rows
            ui = uint64(i - 1)
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            r0 = uint64(j0 - 1)
            for q in range(uint64(nz)):
                vq = V[i, q + 1]
                s0 += F[ui, r0, q] * vq
                s1 += F[ui, r0 + uint64(1), q] * vq
                s2 += F[ui, r0 + uint64(2), q] * vq
                s3 += F[ui, r0 + uint64(3), q] * vq
            for k in range(4):
                j = j0 + k
                s = s0 if k == 0 else (s1 if k == 1 else (s2 if k == 2 else s3))
                v = -cp * (N[i, j] - ND[i, j]) + cp_dz * s
                d = D0[i, j, j] + cp_dz * F[i - 1, j - 1, j - 1]
                b[i, j] = v * (1.0 / d)
            continue
        for j in range(j0, min(j0 + 4, NZ)):
            if inner_i and 0 < j < NZ - 1:
                s = 0.0
                for q in range(nz):
                    s += F[i - 1, j - 1, q] * V[i, q + 1]
                v = -cp * (N[i, j] - ND[i, j]) + cp_dz * s
                d = D0[i, j, j] + cp_dz * F[i - 1, j - 1, j - 1]
            else:
                v = bflat[i * NZ + j]
                d = D0[i, j, j]
            b[i, j] = v * (1.0 / d)


@njit(cache=True)
def _density_row(rho, chi, i, N):
    """N[i] = 2 sum_{nu, p} rho chi^2, summed in (nu, p) order per node: poisson.density to rounding."""
    NV, NS, NZ = chi.shape[1], chi.shape[2], chi.shape[3]
    ui = uint64(i)
    for z in range(uint64(NZ)):
        N[ui, z] = 0.0
    for nu in range(NV):
        for p in range(NS):
            r = rho[i, nu, p]
            for z in range(uint64(NZ)):
                c = chi[ui, nu, p, z]
                N[ui, z] += r * (c * c)
    for z in range(uint64(NZ)):
        N[ui, z] *= 2.0


@njit(parallel=True, cache=True)
def _density_kernel(rho, chi, N):
    """N (NX, NZ) = 2 sum_{nu, p} rho chi^2 (_density_row per column): poisson.density to rounding."""
    for i in prange(N.shape[0]):
        _density_row(rho, chi, i, N)


@njit(parallel=True, cache=True)
def _norms_tail_kernel(rho, chi, Vn, Vo, Nn, No, eps, two_dx, dx, part, d):
    """Per row i: the density Nn[i] of (rho, chi) (_density_row), _norms_kernel's partial results (the same
    operations; the finite check of x = Vn) and the tail: d = d eps/dx as schrodinger.deps_dx (the same
    operations) and per row max |d|.  Row i's norms read only row i of Nn: one pass for the three."""
    NX, NZ = Vn.shape
    NV, NS = eps.shape[1], eps.shape[2]
    flat = Vn.reshape(NX * NZ)
    for i in prange(NX):
        _density_row(rho, chi, i, Nn)
        _row_norms(Vn, Vo, Nn, No, flat, i, part)
        amax = 0.0
        for nu in range(NV):
            for p in range(NS):
                if i == 0:
                    g = (eps[1, nu, p] - eps[0, nu, p]) / dx
                elif i == NX - 1:
                    g = (eps[NX - 1, nu, p] - eps[NX - 2, nu, p]) / dx
                else:
                    g = (eps[i + 1, nu, p] - eps[i - 1, nu, p]) / two_dx
                d[i, nu, p] = g
                amax = _nanmax(amax, abs(g))
        part[i, 5] = amax


@njit(cache=True)
def _tail_combine(part):
    """_norms_combine, and the largest max |d eps/dx| of the rows."""
    m0, s0, m1, s1, fin = _norms_combine(part)
    a = 0.0
    for i in range(part.shape[0]):
        a = _nanmax(a, part[i, 5])
    return m0, s0, m1, s1, fin, a


def _usable(model, backend) -> bool:
    """newton_iteration runs where this module's eigen and CR solve are the phases' implementations
    (not with numerics.linsys = batched_cr, whose array code keeps its own factors)."""
    from solver.bsp import kernels

    return kernels.lookup(model, backend, "solve_linsys") is solve_linsys and kernels.lookup(model, backend, "eigen") is eigen


OUT_POOL = 8  # newton_iteration's results kept per kind (V: up to 6 held at once, see there)


def newton_iteration(model, backend, sysm, jac, V, N, eps, rho, bflat, levels=None, before_read=None):
    """poisson.newton_iteration (same arguments, same result to rounding; None where it cannot run): one
    simplified-Newton iteration of POTENTIAL with the kept Jacobian jac = (F, A) and the kept block-CR
    factors of A (_cr_factors; a resumed run's A is factored here first, as solve_linsys's first call
    would).  The start's eigenpairs and density where N is None (from V, as _newton_loop's start), b of
    the kept system with the rhs (_b_kernel: bitwise newton_rhs + linsys_rhs), the re-solve (_cr_resolve),
    the new iterate's eigenpairs, its density (_density_row: poisson.density to rounding), the norms
    (bitwise newton_norms's) and the stage tail (bitwise schrodinger.deps_dx's d eps/dx and A_eps), these
    three in one pass (_norms_tail_kernel).  Parallel regions: the start's eigen and density, b, the
    re-solve's 12 (standard mesh), eigen, the norms pass."""
    if N is None and levels is None or not _cached(model, "newton_iteration.usable", lambda: _usable(model, backend)):
        return None
    _threads(backend)
    F, A = jac
    NX, NZ = sysm.NX, sysm.NZ
    fac = _cr_factors(model, sysm, NX, NZ)
    if not (fac["A"] is A and fac["levels"]):
        if NX < 2:
            return None
        solve_linsys(model, backend, sysm, A, np.zeros((NX, NZ)), False)  # factors A alone
    rho = _f64(rho)
    ns = model.N_sbn
    work = _cached(model, "newton_iteration.work", lambda: dict(
        b=np.empty((NX, NZ)), part=np.empty((NX, 6)), N=np.empty((NX, NZ)), eps=np.empty((NX, K.N_VALLEYS, ns)),
        chi=np.empty((NX, K.N_VALLEYS, ns, NZ))))
    if N is None:  # the start's eigenpairs and density: work arrays (not returned)
        eps, chi = _eigen_into(model, _f64(V), work["eps"], work["chi"])
        N = work["N"]
        _density_kernel(rho, chi, N)
    V = _f64(V)
    bs = blocktri.block_system(model, sysm)
    b = work["b"]
    _b_kernel(bs.D0, _f64(F), V, _f64(N), _f64(model.on(backend, "N_D")), float(model.cp), float(sysm.cp_dz),
              _f64(bflat), b)
    dirichlet = _cached(model, ("dirichlet", sysm.x_bc), lambda: np.asarray(sysm.dirichlet, dtype=np.bool_))
    # the results: the model's earlier ones that nobody holds any more (_common.out_array; the V of up to 6
    # stages are held at once: State, stage_V, the last step's V^n and V^(1), IterResult)
    V_new = _cr_resolve(_f64(A[1]), _f64(A[2]), b, dirichlet, fac,
                        _out_array(model, "newton_iteration.V", (NX, NZ), OUT_POOL))
    eps_new, chi_new = _eigen_into(model, V_new, _out_array(model, "newton_iteration.eps", (NX, K.N_VALLEYS, ns), OUT_POOL),
                                   _out_array(model, "newton_iteration.chi", (NX, K.N_VALLEYS, ns, NZ), OUT_POOL))
    N_new = _out_array(model, "newton_iteration.N", (NX, NZ), OUT_POOL)
    part = work["part"]
    d = _out_array(model, "newton_iteration.deps_dx", eps_new.shape, OUT_POOL)
    dx = model.dx
    _norms_tail_kernel(rho, chi_new, V_new, V, N_new, _f64(N), eps_new, 2.0 * dx, dx, part, d)
    m0, s0, m1, s1, fin, a = _tail_combine(part)
    w = math.sqrt(model.dx * model.dz)
    nrm = dict(zip(("dV_inf", "dV_l2", "dN_inf", "dN_l2"), [float(m0), w * math.sqrt(s0), float(m1), w * math.sqrt(s1)]))
    if before_read is not None:  # (poisson.newton_iteration's: everything computed, so just before the return)
        before_read(eps_new, chi_new, d, float(a))
    return V_new, eps_new, chi_new, N_new, nrm, bool(fin), (d, float(a), bool(fin))


@njit(parallel=True, cache=True)
def _iter_start_kernel(s, Vn, V1, V2, L0, L1, has_last, dt, dt_o, c2, out):
    """poisson.iter_start's formulas element by element, the same operations in the same order (no
    contraction: the same bits); d_o = (V1_o - V0_o) / dt_o formed per element as LastStep.d_o."""
    n = out.shape[0]
    for e in prange(n):
        if has_last:
            d_o = (L1[e] - L0[e]) / dt_o
        if s == 0:
            out[e] = Vn[e] + dt * (2.0 * (Vn[e] - L0[e]) / dt_o - d_o)
            continue
        if s == 1:
            v = 0.5 * (Vn[e] + V1[e])
        else:
            v = (2.0 / 3.0) * (V1[e] + V2[e]) - (1.0 / 3.0) * Vn[e]
        if has_last:
            v = v + c2 * (((V1[e] - Vn[e]) / dt - d_o) / dt_o)
        out[e] = v


def iter_start(model, backend, s, V_n, stage_V, last, dt):
    """poisson.iter_start (same arguments, the same bits): the prediction of stage s's POTENTIAL start in
    one parallel pass instead of ~10 NumPy operations (serial: ~0.07 ms per stage on the standard mesh)."""
    if s == 0 and last is None:
        return None
    _threads(backend)
    Vn = _f64(V_n)
    flat = lambda a: _f64(a).reshape(-1)  # noqa: E731
    z = flat(Vn)
    V1 = flat(stage_V[0]) if s >= 1 else z
    V2 = flat(stage_V[1]) if s == 2 else z
    L0, L1 = (flat(last.V0), flat(last.V1)) if last is not None else (z, z)
    dt_o = float(last.dt_o) if last is not None else 1.0
    c2 = dt * dt / (4.0 if s == 1 else 3.0)
    out = np.empty(Vn.shape)
    _iter_start_kernel(int(s), z, V1, V2, L0, L1, last is not None, float(dt), dt_o, c2, out.reshape(-1))
    return out
