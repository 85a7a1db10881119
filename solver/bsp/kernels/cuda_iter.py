"""CUDA fast paths of the ITER phase (paper 001: ITER on the GPU, no host round trips).

``solve_eigen``  the N_sbn lowest eigenpairs of every (x_i, valley) tridiagonal Schroedinger
                 matrix (schrodinger.py): one CUDA thread per (i, nu, p).  Eigenvalue p by
                 bisection on the Sturm count (the pivots of schrodinger.sturm_count, LAPACK's
                 pivmin guard) from Gershgorin bounds to the last representable bit; eigenvector
                 by inverse iteration with a tridiagonal LU with partial pivoting (the dgttrf /
                 dgtts2 scheme that LAPACK's dstein uses, three sweeps), then normalised to
                 dz sum chi^2 = 1 with schrodinger.fix_sign's sign rule.  Paper 001 uses the same
                 pair (Sturm multisection + an eigenvector step) for this phase.
``construct_linsys`` / ``solve_linsys``
                 the Newton system as a dense row-equilibrated matrix on the device: the static
                 part (Laplacian, boundary rows) is built once from poisson.NewtonSystem, the
                 Frechet blocks are added on the block diagonal, and cuSOLVER's getrf/getrs
                 (``cupy.linalg.solve``) solve it.  The matrix has NX NZ unknowns (1089 coarse,
                 4225 standard): dense LU costs 2/3 (NX NZ)^3 flop, 5e10 on the standard mesh.

Importing this module needs CuPy (ImportError otherwise: the phases stay on the reference).
"""
from __future__ import annotations

import math

import cupy as cp
import numpy as np

from solver.bsp import constants as K
from solver.bsp import schrodinger

__all__ = ["solve_eigen", "construct_linsys", "solve_linsys"]

_EIGEN_SRC = r"""
#define N {n}
#define DBL_EPSILON 2.220446049250313e-16
extern "C" __global__ void tri_eigen(
    const double* __restrict__ V,      // (NX, NZ)
    const double* __restrict__ kd,     // (3, N)   kinetic diagonal per valley
    const double* __restrict__ ko,     // (3, N-1) off-diagonal per valley
    const double* __restrict__ Vc,     // (N,)     V_c at the interior nodes
    const double pivmin, const double scale,
    const int NX, const int NZ, const int NS,
    double* __restrict__ eps,          // (NX, 3, NS)
    double* __restrict__ chi)          // (NX, 3, NS, NZ), boundary entries set to 0
{{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= NX * 3 * NS) return;
    int p = t % NS;
    int nu = (t / NS) % 3;
    int i = t / (3 * NS);
    double d[N], e[N];
    for (int j = 0; j < N; ++j) d[j] = kd[nu * N + j] - V[i * NZ + j + 1] - Vc[j];
    for (int j = 0; j < N - 1; ++j) e[j] = ko[nu * (N - 1) + j];
    e[N - 1] = 0.0;
    // Gershgorin interval
    double lo = d[0] - fabs(e[0]), hi = d[0] + fabs(e[0]);
    for (int j = 1; j < N; ++j) {{
        double r = fabs(e[j - 1]) + fabs(e[j]);
        lo = fmin(lo, d[j] - r);
        hi = fmax(hi, d[j] + r);
    }}
    double w = hi - lo;
    lo -= 2.0 * DBL_EPSILON * w + pivmin;
    hi += 2.0 * DBL_EPSILON * w + pivmin;
    // bisection: count(x) = #eigenvalues < x; find the (p+1)-th
    for (int it = 0; it < 200; ++it) {{
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        double q = d[0] - mid;
        if (fabs(q) < pivmin) q = -pivmin;
        int c = q < 0.0;
        for (int j = 1; j < N; ++j) {{
            q = d[j] - mid - e[j - 1] * e[j - 1] / q;
            if (fabs(q) < pivmin) q = -pivmin;
            c += q < 0.0;
        }}
        if (c > p) hi = mid; else lo = mid;
    }}
    double lam = 0.5 * (lo + hi);
    eps[t] = lam;
    // inverse iteration: LU with partial pivoting of T - lam I (dgttrf), three solves
    double a[N], u1[N], u2[N], l[N], x[N];
    int piv[N];
    double anorm = 0.0;
    for (int j = 0; j < N; ++j) anorm = fmax(anorm, fabs(d[j] - lam) + fabs(e[j]) + (j ? fabs(e[j - 1]) : 0.0));
    double tiny = fmax(DBL_EPSILON * anorm, pivmin);
    for (int j = 0; j < N; ++j) {{ a[j] = d[j] - lam; u1[j] = e[j]; u2[j] = 0.0; l[j] = e[j]; piv[j] = 0; }}
    for (int k = 0; k < N - 1; ++k) {{
        if (fabs(a[k]) >= fabs(l[k])) {{
            if (fabs(a[k]) < tiny) a[k] = (a[k] < 0.0) ? -tiny : tiny;
            double f = l[k] / a[k];
            l[k] = f;
            a[k + 1] -= f * u1[k];
        }} else {{
            double f = a[k] / l[k];
            a[k] = l[k];
            l[k] = f;
            double tmp = u1[k];
            u1[k] = a[k + 1];
            a[k + 1] = tmp - f * a[k + 1];
            if (k < N - 2) {{ u2[k] = u1[k + 1]; u1[k + 1] = -f * u1[k + 1]; }}
            piv[k] = 1;
        }}
    }}
    if (fabs(a[N - 1]) < tiny) a[N - 1] = (a[N - 1] < 0.0) ? -tiny : tiny;
    for (int j = 0; j < N; ++j) x[j] = 1.0 + 1e-3 * (double)((j * 7919) % 97) / 97.0;  // fixed start vector
    for (int sweep = 0; sweep < 3; ++sweep) {{
        for (int k = 0; k < N - 1; ++k) {{
            if (piv[k]) {{ double tmp = x[k]; x[k] = x[k + 1]; x[k + 1] = tmp - l[k] * x[k]; }}
            else x[k + 1] -= l[k] * x[k];
        }}
        x[N - 1] /= a[N - 1];
        if (N > 1) x[N - 2] = (x[N - 2] - u1[N - 2] * x[N - 1]) / a[N - 2];
        for (int k = N - 3; k >= 0; --k) x[k] = (x[k] - u1[k] * x[k + 1] - u2[k] * x[k + 2]) / a[k];
        double s = 0.0;
        for (int j = 0; j < N; ++j) s += x[j] * x[j];
        s = 1.0 / sqrt(s);
        for (int j = 0; j < N; ++j) x[j] *= s;
    }}
    // sign rule of schrodinger.fix_sign: the first component with |v| > 1e-3 max|v| is positive
    double vmax = 0.0;
    for (int j = 0; j < N; ++j) vmax = fmax(vmax, fabs(x[j]));
    double sg = 1.0;
    for (int j = 0; j < N; ++j) if (fabs(x[j]) > {thr} * vmax) {{ sg = (x[j] < 0.0) ? -1.0 : 1.0; break; }}
    double* out = chi + (size_t)t * NZ;
    out[0] = 0.0;
    out[NZ - 1] = 0.0;
    for (int j = 0; j < N; ++j) out[j + 1] = sg * scale * x[j];
}}
"""

_kernels: dict = {}


def _eigen_kernel(n: int):
    if n not in _kernels:
        src = _EIGEN_SRC.format(n=n, thr=repr(schrodinger.SIGN_THRESHOLD))
        _kernels[n] = cp.RawKernel(src, "tri_eigen", options=("-std=c++14",))
    return _kernels[n]


def _static(model, key, build):
    cache = model._device_cache
    k = ("cuda_iter", key)
    if k not in cache:
        cache[k] = build()
    return cache[k]


def solve_eigen(model, backend, V):
    """(eps (NX, 3, N_sbn), chi (NX, 3, N_sbn, NZ)) on the device; see the module docstring."""
    V = cp.ascontiguousarray(cp.asarray(V, dtype=cp.float64))
    NX, NZ = V.shape
    n = NZ - 2
    NS = model.N_sbn

    def build():
        kd = np.empty((K.N_VALLEYS, n))
        ko = np.empty((K.N_VALLEYS, n - 1))
        for nu in range(K.N_VALLEYS):
            kd[nu], ko[nu] = schrodinger._kinetic(model, nu)
        piv = np.finfo(float).tiny * max(1.0, float(np.max(ko**2)) if ko.size else 1.0)
        return cp.asarray(kd), cp.asarray(ko), cp.asarray(np.ascontiguousarray(model.V_c[1:-1])), piv

    kd, ko, Vc, pivmin = _static(model, "eigen", build)
    eps = cp.empty((NX, K.N_VALLEYS, NS))
    chi = cp.empty((NX, K.N_VALLEYS, NS, NZ))
    nthr = NX * K.N_VALLEYS * NS
    block = 64
    _eigen_kernel(n)(((nthr + block - 1) // block,), (block,),
                     (V, kd, ko, Vc, np.float64(pivmin), np.float64(1.0 / math.sqrt(model.dz)),
                      np.int32(NX), np.int32(NZ), np.int32(NS), eps, chi))
    return eps, chi


# ---------------------------------------------------------------------- the Newton system
def construct_linsys(model, backend, sysm, F, rhs_int, bflat):
    """Dense row-equilibrated (A, b) on the device (phase constrlinsys)."""
    NX, NZ = sysm.NX, sysm.NZ
    A0, interior = _static(model, ("linsys", sysm.x_bc),
                           lambda: (cp.asarray(sysm.dense_static()), cp.asarray(sysm.interior)))
    A = A0.copy()
    A4 = A.reshape(NX, NZ, NX, NZ)
    ii = cp.arange(1, NX - 1)
    A4[ii, 1:-1, ii, 1:-1] += sysm.cp_dz * F  # Frechet blocks on the block diagonal
    b = cp.asarray(bflat).copy()
    b[interior] = rhs_int.ravel()
    s = 1.0 / cp.diagonal(A)
    A *= s[:, None]
    b *= s
    return A, b


def solve_linsys(model, backend, sysm, A, b):
    """x of A x = b by cuSOLVER LU (getrf/getrs), Dirichlet entries set exactly (phase solvelinsys)."""
    x = cp.linalg.solve(A, b)
    d = _static(model, ("dirichlet", sysm.x_bc), lambda: cp.asarray(sysm.dirichlet_flat))
    x[d] = b[d]
    return x
