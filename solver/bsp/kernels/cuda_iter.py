"""CUDA fast paths of the ITER phase (paper 001: ITER on the GPU, no host round trips).

``solve_eigen``  the N_sbn lowest eigenpairs of every (x_i, valley) tridiagonal Schroedinger
                 matrix (schrodinger.py) by two kernels with the names of paper 001 (4.2-4.3),
                 one CUDA thread per (i, nu, p) in both:
                 ``eigenvalues``  eigenvalue p by bisection on the Sturm count (the pivots of
                                  schrodinger.sturm_count, LAPACK's pivmin guard) from Gershgorin
                                  bounds to the last representable bit; also stores the diagonals
                                  of the matrices for the second kernel;
                 ``ipim``         the eigenvector by inverse iteration (IPIM) with a tridiagonal LU
                                  with partial pivoting (the dgttrf / dgtts2 scheme that LAPACK's
                                  dstein uses, three sweeps from a fixed start vector), normalised
                                  to dz sum chi^2 = 1 with schrodinger.fix_sign's sign rule; kernel
                                  A reads the matrix from global memory in every sweep, kernel B
                                  from shared memory (loaded once per block, coalesced).
                 Bitwise equal to the fused kernel ``tri_eigen`` (solve_eigen_fused) that did both
                 in one launch.  Measured and chosen in docs/performance-ipim.md.
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
import os

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

# The split of tri_eigen into the two kernels of paper 001 (sections 4.2-4.3): ``eigenvalues``
# (the bisection of tri_eigen, character for character; thread p = 0 of each (i, nu) also stores
# the diagonal of T_{nu,i} for the second kernel) and ``ipim`` (inverse iteration).  tri_eigen
# factors T - lam I once and keeps the factors (a, u1, u2, l, piv: 4 N doubles + N ints of local
# memory per thread); ipim re-reads the matrix (d, e) in every sweep and recomputes the same
# factorization on the fly, fused with the forward substitution (Algorithm 2 of 001: "solve
# (L - eps I) x = q" every k), keeping only a, u1, u2 and x.  Every value is produced by the same
# expression from the same operands as in tri_eigen, so eps and chi are bitwise identical.
#   kernel A (ipim_a): d and e read from global memory (L1/L2) in every sweep;
#   kernel B (ipim_b): the diagonals of the <= MAXM matrices a thread block touches and the three
#                      off-diagonals loaded once, coalesced, into shared memory, then read from there.
_EIGENVALUES_SRC = r"""
#define N {n}
#define DBL_EPSILON 2.220446049250313e-16
extern "C" __global__ void eigenvalues(
    const double* __restrict__ V, const double* __restrict__ kd, const double* __restrict__ ko,
    const double* __restrict__ Vc, const double pivmin, const int NX, const int NZ, const int NS,
    double* __restrict__ eps, double* __restrict__ Dg)
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
    if (p == 0) for (int j = 0; j < N; ++j) Dg[(i * 3 + nu) * N + j] = d[j];
    double lo = d[0] - fabs(e[0]), hi = d[0] + fabs(e[0]);
    for (int j = 1; j < N; ++j) {{
        double r = fabs(e[j - 1]) + fabs(e[j]);
        lo = fmin(lo, d[j] - r);
        hi = fmax(hi, d[j] + r);
    }}
    double w = hi - lo;
    lo -= 2.0 * DBL_EPSILON * w + pivmin;
    hi += 2.0 * DBL_EPSILON * w + pivmin;
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
    eps[t] = 0.5 * (lo + hi);
}}
"""

# The body shared by kernels A and B: D(j) / E(j) are the matrix reads (global or shared memory).
_IPIM_BODY = r"""
    double lam = eps[t];
    double a[N], u1[N], u2[N], x[N];
    double anorm = 0.0;
    for (int j = 0; j < N; ++j) anorm = fmax(anorm, fabs(D(j) - lam) + fabs(E(j)) + (j ? fabs(E(j - 1)) : 0.0));
    double tiny = fmax(DBL_EPSILON * anorm, pivmin);
    for (int j = 0; j < N; ++j) x[j] = 1.0 + 1e-3 * (double)((j * 7919) % 97) / 97.0;  // fixed start vector
    for (int sweep = 0; sweep < 3; ++sweep) {{
        // dgttrf of T - lam I (as tri_eigen), fused with the forward substitution L y = P x
        double ak = D(0) - lam, u1k = E(0);
        for (int k = 0; k < N - 1; ++k) {{
            double lk = E(k), ak1 = D(k + 1) - lam, u1k1 = E(k + 1);
            u2[k] = 0.0;
            if (fabs(ak) >= fabs(lk)) {{
                if (fabs(ak) < tiny) ak = (ak < 0.0) ? -tiny : tiny;
                double f = lk / ak;
                ak1 -= f * u1k;
                a[k] = ak; u1[k] = u1k;
                x[k + 1] -= f * x[k];
            }} else {{
                double f = ak / lk;
                a[k] = lk;
                double tmp = u1k;
                u1[k] = ak1;
                ak1 = tmp - f * ak1;
                if (k < N - 2) {{ u2[k] = u1k1; u1k1 = -f * u1k1; }}
                tmp = x[k]; x[k] = x[k + 1]; x[k + 1] = tmp - f * x[k];
            }}
            ak = ak1; u1k = u1k1;
        }}
        if (fabs(ak) < tiny) ak = (ak < 0.0) ? -tiny : tiny;
        a[N - 1] = ak;
        x[N - 1] /= a[N - 1];
        if (N > 1) x[N - 2] = (x[N - 2] - u1[N - 2] * x[N - 1]) / a[N - 2];
        for (int k = N - 3; k >= 0; --k) x[k] = (x[k] - u1[k] * x[k + 1] - u2[k] * x[k + 2]) / a[k];
        double s = 0.0;
        for (int j = 0; j < N; ++j) s += x[j] * x[j];
        s = 1.0 / sqrt(s);
        for (int j = 0; j < N; ++j) x[j] *= s;
    }}
    double vmax = 0.0;
    for (int j = 0; j < N; ++j) vmax = fmax(vmax, fabs(x[j]));
    double sg = 1.0;
    for (int j = 0; j < N; ++j) if (fabs(x[j]) > {thr} * vmax) {{ sg = (x[j] < 0.0) ? -1.0 : 1.0; break; }}
    double* out = chi + (size_t)t * NZ;
    out[0] = 0.0;
    out[NZ - 1] = 0.0;
    for (int j = 0; j < N; ++j) out[j + 1] = sg * scale * x[j];
"""

_IPIM_SRC = r"""
#define N {n}
#define DBL_EPSILON 2.220446049250313e-16
#define MAXM {maxm}
extern "C" __global__ void ipim_a(
    const double* __restrict__ eps, const double* __restrict__ Dg, const double* __restrict__ ko,
    const double pivmin, const double scale, const int NX, const int NZ, const int NS,
    double* __restrict__ chi)
{{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= NX * 3 * NS) return;
    int nu = (t / NS) % 3;
    int i = t / (3 * NS);
    const double* dg = Dg + (size_t)(i * 3 + nu) * N;
    const double* eg = ko + nu * (N - 1);
#define D(j) dg[j]
#define E(j) ((j) < N - 1 ? eg[j] : 0.0)
""" + _IPIM_BODY + r"""
#undef D
#undef E
}}

extern "C" __global__ void ipim_b(
    const double* __restrict__ eps, const double* __restrict__ Dg, const double* __restrict__ ko,
    const double pivmin, const double scale, const int NX, const int NZ, const int NS,
    double* __restrict__ chi)
{{
    __shared__ double sd[MAXM * N];
    __shared__ double se[3 * N];
    int nthr = NX * 3 * NS;
    int t0 = blockIdx.x * blockDim.x;
    int m0 = t0 / NS;
    int tl = t0 + (int)blockDim.x - 1;
    if (tl > nthr - 1) tl = nthr - 1;
    int cnt = (tl / NS - m0 + 1) * N;  // the block's matrices are contiguous in Dg: one coalesced copy
    for (int k = threadIdx.x; k < cnt; k += blockDim.x) sd[k] = Dg[(size_t)m0 * N + k];
    for (int k = threadIdx.x; k < 3 * N; k += blockDim.x) {{
        int nu = k / N, j = k % N;
        se[k] = (j < N - 1) ? ko[nu * (N - 1) + j] : 0.0;
    }}
    __syncthreads();
    int t = t0 + threadIdx.x;
    if (t >= nthr) return;
    int nu = (t / NS) % 3;
    const double* dg = sd + (t / NS - m0) * N;
    const double* eg = se + nu * N;
#define D(j) dg[j]
#define E(j) eg[j]
""" + _IPIM_BODY + r"""
#undef D
#undef E
}}
"""

IPIM = os.environ.get("BSP_IPIM", "a")  # solve_eigen's ipim variant: "a" (global memory; faster on the H200 at
#   every NZ 33..129, 14 % at NZ 65) or "b" (shared memory); docs/performance-ipim.md
IPIM_BLOCK = 32     # threads per block of eigenvalues / ipim (paper 001: one-dimensional blocks of 32)

_kernels: dict = {}


def _eigen_kernel(n: int):
    if n not in _kernels:
        src = _EIGEN_SRC.format(n=n, thr=repr(schrodinger.SIGN_THRESHOLD))
        _kernels[n] = cp.RawKernel(src, "tri_eigen", options=("-std=c++14",))
    return _kernels[n]


def ipim_maxm(NS: int, block: int) -> int:
    """Most (i, nu) matrices the threads t0 .. t0 + block - 1 can touch (t = (i 3 + nu) NS + p)."""
    return (block - 1 + NS - 1) // NS + 1


def _split_module(n: int, NS: int, block: int):
    key = ("split", n, NS, block)
    if key not in _kernels:
        thr = repr(schrodinger.SIGN_THRESHOLD)
        _kernels[key] = (cp.RawModule(code=_EIGENVALUES_SRC.format(n=n), options=("-std=c++14",)),
                         cp.RawModule(code=_IPIM_SRC.format(n=n, thr=thr, maxm=ipim_maxm(NS, block)),
                                      options=("-std=c++14",)))
    return _kernels[key]


def _static(model, key, build):
    cache = model._device_cache
    k = ("cuda_iter", key)
    if k not in cache:
        cache[k] = build()
    return cache[k]


def _eigen_static(model, n):
    def build():
        kd = np.empty((K.N_VALLEYS, n))
        ko = np.empty((K.N_VALLEYS, n - 1))
        for nu in range(K.N_VALLEYS):
            kd[nu], ko[nu] = schrodinger._kinetic(model, nu)
        piv = np.finfo(float).tiny * max(1.0, float(np.max(ko**2)) if ko.size else 1.0)
        return cp.asarray(kd), cp.asarray(ko), cp.asarray(np.ascontiguousarray(model.V_c[1:-1])), piv

    return _static(model, "eigen", build)


def _prepare(model, V):
    V = cp.ascontiguousarray(cp.asarray(V, dtype=cp.float64))
    NX, NZ = V.shape
    return V, NX, NZ, NZ - 2, model.N_sbn


def solve_eigen_fused(model, backend, V, block=64):
    """(eps, chi) by the fused kernel tri_eigen (bisection + inverse iteration in one launch):
    the version before the split, kept as the bitwise reference of eigenvalues + ipim."""
    V, NX, NZ, n, NS = _prepare(model, V)
    kd, ko, Vc, pivmin = _eigen_static(model, n)
    eps = cp.empty((NX, K.N_VALLEYS, NS))
    chi = cp.empty((NX, K.N_VALLEYS, NS, NZ))
    nthr = NX * K.N_VALLEYS * NS
    _eigen_kernel(n)(((nthr + block - 1) // block,), (block,),
                     (V, kd, ko, Vc, np.float64(pivmin), np.float64(1.0 / math.sqrt(model.dz)),
                      np.int32(NX), np.int32(NZ), np.int32(NS), eps, chi))
    return eps, chi


def eigenvalues(model, V, block=IPIM_BLOCK):
    """Kernel ``eigenvalues``: (eps (NX, 3, N_sbn), Dg (NX, 3, NZ-2) the diagonals of T_{nu,i})."""
    V, NX, NZ, n, NS = _prepare(model, V)
    kd, ko, Vc, pivmin = _eigen_static(model, n)
    eps = cp.empty((NX, K.N_VALLEYS, NS))
    Dg = cp.empty((NX, K.N_VALLEYS, n))
    nthr = NX * K.N_VALLEYS * NS
    mod = _split_module(n, NS, block)[0]
    mod.get_function("eigenvalues")(((nthr + block - 1) // block,), (block,),
                                    (V, kd, ko, Vc, np.float64(pivmin), np.int32(NX), np.int32(NZ), np.int32(NS),
                                     eps, Dg))
    return eps, Dg


def ipim(model, eps, Dg, variant=None, block=IPIM_BLOCK):
    """Kernel ``ipim`` (inverse iteration, variant "a" or "b"): chi (NX, 3, N_sbn, NZ) from the
    eigenvalues and the diagonals of kernel ``eigenvalues``."""
    variant = IPIM if variant is None else variant
    NX, _, NS = eps.shape
    n = Dg.shape[-1]
    NZ = n + 2
    kd, ko, Vc, pivmin = _eigen_static(model, n)
    chi = cp.empty((NX, K.N_VALLEYS, NS, NZ))
    nthr = NX * K.N_VALLEYS * NS
    mod = _split_module(n, NS, block)[1]
    mod.get_function({"a": "ipim_a", "b": "ipim_b"}[variant])(
        ((nthr + block - 1) // block,), (block,),
        (eps, Dg, ko, np.float64(pivmin), np.float64(1.0 / math.sqrt(model.dz)), np.int32(NX), np.int32(NZ),
         np.int32(NS), chi))
    return chi


def solve_eigen(model, backend, V):
    """(eps (NX, 3, N_sbn), chi (NX, 3, N_sbn, NZ)) on the device: kernels ``eigenvalues`` and
    ``ipim`` (variant IPIM); bitwise equal to solve_eigen_fused.  See the module docstring."""
    eps, Dg = eigenvalues(model, V)
    return eps, ipim(model, eps, Dg)


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
