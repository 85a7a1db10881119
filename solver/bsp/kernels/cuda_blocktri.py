"""CUDA fast paths of the Newton step of ITER: the Frechet kernel and the block-tridiagonal linear
system (solver/bsp/blocktri.py is the array reference and documents the algorithm).

``frechet``          F_i(j, j') for every interior (i, j, j') in ONE launch: one thread per entry
                     sums the 3 valleys' N_sbn squares (when drho is given) and N_sbn (N_sbn-1)/2
                     pairs directly (the array code needs ~15 launches: gathers, concatenations
                     and a batched matmul).
``construct_linsys`` the row-equilibrated block form (D (NX, NZ, NZ), lo, up, b (NX, NZ)) in ONE
                     launch: one thread per block entry adds c_p dz F to the static blocks (built
                     once from poisson.NewtonSystem by blocktri.BlockSystem) and divides by the row
                     diagonal.  No dense (NX NZ)^2 matrix.
``solve_linsys``     block Thomas in ONE launch of ONE thread block (the x-sweep is sequential):
                     per column i, S_i = D_i - diag(lo_i) G_{i-1} and r_i are loaded into
                     registers (thread (warp w, lane l) owns rows w + NWARPS s and columns
                     l + 32 t of [S_i | r_i]), then NZ Gauss-Jordan exchange steps with implicit
                     partial pivoting (every warp finds the pivot row by the same
                     __reduce_max_sync over a 32-bit key, so no extra barrier; two __syncthreads
                     per step) leave the
                     permuted inverse in place (blocktri.exchange_inverse says which entry is
                     which); G_i = S_i^{-1} diag(up_i) and z_i = S_i^{-1} r_i go to global memory
                     (L2-resident: 2.2 MB on the standard mesh); then the back sweep
                     x_i = z_i - G_i x_{i+1}, one warp per row.  Dirichlet entries are set to b
                     exactly, as poisson.solve does.  Pivoting: see blocktri's docstring.

                     Kept as ``solve_linsys_thomas`` (the round-2 baseline).
``solve_linsys``     = ``solve_linsys_cr`` by default (``SOLVE``): block cyclic reduction
                     (blocktri.solve_cr), log2(NX) levels, each one launch of cr_eliminate (a thread
                     block per eliminated column: the Gauss-Jordan exchange steps above on
                     [B | A | C | r], 3 NZ + 1 columns, partial pivoting) and one of cr_update (a
                     thread per entry of the kept blocks), then one single-block cr_backsub.
                     H200: 0.33 ms coarse / 1.21 ms standard vs 1.08 / 5.92 ms for Thomas.
``newton_rhs``       the interior rhs -c_p (N - N_D) + c_p dz F V in one launch, and
``newton_norms``     the four Newton norms + all(isfinite(x)) in one reduction and ONE host read
                     (hooks of poisson._newton_loop).

The dense versions (cuda_iter.construct_linsys / solve_linsys: cuSOLVER getrf on the dense matrix)
stay importable for comparison.  Importing this module needs CuPy.
"""
from __future__ import annotations

import math
import os

import cupy as cp
import numpy as np

from solver.bsp import blocktri

__all__ = ["frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms"]

SOLVE = "cr"      # solve_linsys: "cr" (block cyclic reduction) or "thomas" (single block)
CR_NWARPS = 32    # warps per cr_eliminate block (capped at NZ)
MAX_NZ = 127      # the solve kernels' pivot key holds the row in 7 bits: larger NZ use cuda_iter's dense system

_FRECHET_SRC = r"""
extern "C" __global__ void frechet_kernel(
    const double* __restrict__ eps,    // (NX, 3, NS)
    const double* __restrict__ chi,    // (NX, 3, NS, NZ)
    const double* __restrict__ rho,    // (NX, 3, NS)
    const double* __restrict__ drho,   // (NX, 3, NS) or unused
    const int has_drho, const int NX, const int NZ, const int NS,
    double* __restrict__ F)            // (NX-2, NZ-2, NZ-2)
{
    const int nz = NZ - 2;
    const long long total = (long long)(NX - 2) * nz * nz;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int jp = (int)(t % nz);
    const int j = (int)((t / nz) % nz);
    const int i = (int)(t / ((long long)nz * nz)) + 1;
    double acc = 0.0;
    for (int nu = 0; nu < 3; ++nu) {
        const int base = (i * 3 + nu) * NS;
        const double* c = chi + (size_t)base * NZ;
        for (int p = 0; p < NS; ++p) {
            const double cpj = c[p * NZ + j + 1], cpk = c[p * NZ + jp + 1];
            if (has_drho) acc += 2.0 * drho[base + p] * (cpj * cpj) * (cpk * cpk);
            const double rp = rho[base + p], ep = eps[base + p];
            for (int q = p + 1; q < NS; ++q) {
                const double coef = 4.0 * (rp - rho[base + q]) / (eps[base + q] - ep);
                acc += coef * (cpj * c[q * NZ + j + 1]) * (cpk * c[q * NZ + jp + 1]);
            }
        }
    }
    F[t] = acc;
}

extern "C" __global__ void construct_kernel(
    const double* __restrict__ D0,     // (NX, NZ, NZ) static blocks, unscaled
    const double* __restrict__ lo0,    // (NX, NZ)
    const double* __restrict__ up0,    // (NX, NZ)
    const double* __restrict__ F,      // (NX-2, NZ-2, NZ-2)
    const double* __restrict__ rhs,    // (NX-2, NZ-2)
    const double* __restrict__ bflat,  // (NX, NZ)
    const double cpdz, const int NX, const int NZ,
    double* __restrict__ D, double* __restrict__ lo, double* __restrict__ up, double* __restrict__ b)
{
    const long long total = (long long)NX * NZ * NZ;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int nz = NZ - 2;
    const int c = (int)(t % NZ);
    const int r = (int)((t / NZ) % NZ);
    const int i = (int)(t / ((long long)NZ * NZ));
    const bool in_r = i > 0 && i < NX - 1 && r > 0 && r < NZ - 1;
    const size_t fr = ((size_t)(i - 1) * nz + (r - 1)) * nz;  // only used when in_r
    const size_t row = ((size_t)i * NZ + r) * NZ;
    double dg = D0[row + r];
    if (in_r) dg += cpdz * F[fr + r - 1];
    double v = D0[t];
    if (in_r && c > 0 && c < NZ - 1) v += cpdz * F[fr + c - 1];
    const double s = 1.0 / dg;
    D[t] = v * s;
    if (c == 0) {
        const int k = i * NZ + r;
        lo[k] = lo0[k] * s;
        up[k] = up0[k] * s;
        b[k] = (in_r ? rhs[(size_t)(i - 1) * nz + r - 1] : bflat[k]) * s;
    }
}
"""

_SOLVE_SRC = r"""
#define NZ {nz}
#define NWARPS {nwarps}
#define RS ((NZ + NWARPS - 1) / NWARPS)   // row slots per thread
#define CS ((NZ + 1 + 31) / 32)           // column slots per thread (NZ columns + the rhs)
#define AS ((NZ + 31) / 32)               // rows per lane in the pivot search
extern "C" __global__ void __launch_bounds__(NWARPS * 32) blocktri_solve(
    const double* __restrict__ D,      // (NX, NZ, NZ) row-equilibrated blocks
    const double* __restrict__ lo,     // (NX, NZ)
    const double* __restrict__ up,     // (NX, NZ)
    const double* __restrict__ b,      // (NX, NZ)
    const unsigned char* __restrict__ dir,  // (NX, NZ) Dirichlet mask
    const int NX,
    double* G,                         // (NX, NZ, NZ) work: S_i^{{-1}} diag(up_i)
    double* z,                         // (NX, NZ)     work: S_i^{{-1}} r_i
    double* __restrict__ x)            // (NX, NZ)     the solution
{{
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    __shared__ double colk[2][NZ];
    __shared__ double rowp[CS * 32];
    __shared__ double zs[NZ];
    __shared__ double xs[NZ];
    __shared__ int pOf[NZ];
    __shared__ int kOf[NZ];
    __shared__ double sipiv;
    double a[RS][CS];
    for (int i = 0; i < NX; ++i) {{
        // [S_i | r_i] into registers; column 0 into colk[0]
        #pragma unroll
        for (int s = 0; s < RS; ++s) {{
            const int r = w + NWARPS * s;
            const double l = (r < NZ && i > 0) ? lo[i * NZ + r] : 0.0;
            #pragma unroll
            for (int t = 0; t < CS; ++t) {{
                const int c = lane + 32 * t;
                double v = 0.0;
                if (r < NZ && c < NZ) {{
                    v = D[((size_t)i * NZ + r) * NZ + c];
                    if (i > 0) v -= l * G[((size_t)(i - 1) * NZ + r) * NZ + c];
                }} else if (r < NZ && c == NZ) {{
                    v = b[i * NZ + r];
                    if (i > 0) v -= l * zs[r];
                }}
                a[s][t] = v;
                if (c == 0 && r < NZ) colk[0][r] = v;
            }}
        }}
        unsigned used = 0u;  // bit s: row lane + 32 s has been a pivot row
        __syncthreads();
        for (int k = 0; k < NZ; ++k) {{
            const int cur = k & 1, nxt = cur ^ 1;
            // pivot row: largest |a[r][k]| among unused rows, the first on near-ties, found by every
            // warp alike with one __reduce_max_sync over a 32-bit key: the float bits of |a| (monotone
            // for |a| >= 0) with the low 7 mantissa bits replaced by 127 - r (so a pivot within a factor
            // 1 + 2^-16 of the largest may be taken: partial pivoting's bound is unchanged to that
            // factor); used rows have key 0, which every unused row (r < 127) beats.
            unsigned key = 0u;
            #pragma unroll
            for (int s = 0; s < AS; ++s) {{
                const int r = lane + 32 * s;
                if (r < NZ && !((used >> s) & 1u)) {{
                    const float v = (float)fmin(fabs(colk[cur][r]), 3.0e38);
                    const unsigned kk = (__float_as_uint(v) & ~0x7Fu) | (unsigned)(127 - r);
                    key = kk > key ? kk : key;
                }}
            }}
            key = __reduce_max_sync(0xffffffffu, key);
            const int p = 127 - (int)(key & 0x7Fu);
            if ((p & 31) == lane) used |= 1u << (p >> 5);
            if (w == p % NWARPS) {{
                if (lane == 0) sipiv = 1.0 / colk[cur][p];
                #pragma unroll
                for (int s = 0; s < RS; ++s)
                    if (s == p / NWARPS) {{
                        #pragma unroll
                        for (int t = 0; t < CS; ++t) rowp[lane + 32 * t] = a[s][t];
                    }}
            }}
            if (threadIdx.x == 0) {{ pOf[k] = p; kOf[p] = k; }}
            __syncthreads();
            const double ipiv = sipiv;
            #pragma unroll
            for (int s = 0; s < RS; ++s) {{
                const int r = w + NWARPS * s;
                if (r < NZ) {{
                    const double fr = colk[cur][r] * ipiv;
                    #pragma unroll
                    for (int t = 0; t < CS; ++t) {{
                        const int c = lane + 32 * t;
                        double v = a[s][t];
                        if (r == p) v = (c == k) ? ipiv : v * ipiv;
                        else if (c == k) v = -fr;
                        else v -= fr * rowp[c];
                        a[s][t] = v;
                        if (c == k + 1) colk[nxt][r] = v;
                    }}
                }}
            }}
            __syncthreads();
        }}
        // a[rho][kappa] = S^-1[kOf[rho]][pOf[kappa]], a[rho][NZ] = z[kOf[rho]]
        #pragma unroll
        for (int s = 0; s < RS; ++s) {{
            const int r = w + NWARPS * s;
            if (r < NZ) {{
                const int k = kOf[r];
                #pragma unroll
                for (int t = 0; t < CS; ++t) {{
                    const int c = lane + 32 * t;
                    if (c < NZ) {{
                        const int q = pOf[c];
                        G[((size_t)i * NZ + k) * NZ + q] = a[s][t] * up[i * NZ + q];
                    }} else if (c == NZ) {{
                        z[i * NZ + k] = a[s][t];
                        zs[k] = a[s][t];
                    }}
                }}
            }}
        }}
        __syncthreads();
    }}
    // back sweep: x_{{NX-1}} = z_{{NX-1}}, x_i = z_i - G_i x_{{i+1}}
    for (int k = threadIdx.x; k < NZ; k += blockDim.x) {{
        xs[k] = zs[k];
        const int g = (NX - 1) * NZ + k;
        x[g] = dir[g] ? b[g] : zs[k];
    }}
    __syncthreads();
    for (int i = NX - 2; i >= 0; --i) {{
        double val[RS];
        #pragma unroll
        for (int s = 0; s < RS; ++s) {{
            const int k = w + NWARPS * s;
            double acc = 0.0;
            if (k < NZ) {{
                const double* g = G + ((size_t)i * NZ + k) * NZ;
                for (int q = lane; q < NZ; q += 32) acc += g[q] * xs[q];
            }}
            #pragma unroll
            for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
            val[s] = (k < NZ) ? z[i * NZ + k] - acc : 0.0;
        }}
        __syncthreads();
        if (lane == 0) {{
            #pragma unroll
            for (int s = 0; s < RS; ++s) {{
                const int k = w + NWARPS * s;
                if (k < NZ) {{
                    xs[k] = val[s];
                    const int g = i * NZ + k;
                    x[g] = dir[g] ? b[g] : val[s];
                }}
            }}
        }}
        __syncthreads();
    }}
}}
"""

_CR_SRC = r"""
#define NZ {nz}
#define NWARPS {nwarps}
#define NC (3 * NZ + 1)                   // columns of [B | A | C | r]
#define RS ((NZ + NWARPS - 1) / NWARPS)   // row slots per thread
#define CS ((NC + 31) / 32)               // column slots per thread
#define AS ((NZ + 31) / 32)               // rows per lane in the pivot search
// One level of block cyclic reduction (blocktri.solve_cr): thread block m eliminates column
// i = first + step m: [XA | XC | Xr] = B_i^{{-1}} [A_i | C_i | r_i] by NZ Gauss-Jordan exchange
// steps with implicit partial pivoting (the single-block kernel's step, 3 NZ + 1 columns).
// lvl0: read B = D, A = diag(lo), C = diag(up), r = b; else the work arrays of the last update.
extern "C" __global__ void __launch_bounds__(NWARPS * 32) cr_eliminate(
    const double* __restrict__ D, const double* __restrict__ lo, const double* __restrict__ up,
    const double* __restrict__ b,
    const double* __restrict__ Bw, const double* __restrict__ Aw, const double* __restrict__ Cw,
    const double* __restrict__ rw,
    const int lvl0, const int NX, const int h, const int first, const int step,
    double* __restrict__ XA, double* __restrict__ XC, double* __restrict__ Xr)
{{
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int i = first + step * (int)blockIdx.x;
    const bool hasA = i - h >= 0, hasC = i + h < NX;
    __shared__ double colk[2][NZ];
    __shared__ double rowp[CS * 32];
    __shared__ int kOf[NZ];
    __shared__ double sipiv;
    double a[RS][CS];
    const size_t blk = (size_t)i * NZ * NZ;
    #pragma unroll
    for (int s = 0; s < RS; ++s) {{
        const int r = w + NWARPS * s;
        #pragma unroll
        for (int t = 0; t < CS; ++t) {{
            const int c = lane + 32 * t;
            double v = 0.0;
            if (r < NZ) {{
                if (c < NZ) v = lvl0 ? D[blk + r * NZ + c] : Bw[blk + r * NZ + c];
                else if (c < 2 * NZ) {{
                    const int q = c - NZ;
                    if (hasA) v = lvl0 ? (q == r ? lo[i * NZ + r] : 0.0) : Aw[blk + r * NZ + q];
                }} else if (c < 3 * NZ) {{
                    const int q = c - 2 * NZ;
                    if (hasC) v = lvl0 ? (q == r ? up[i * NZ + r] : 0.0) : Cw[blk + r * NZ + q];
                }} else if (c == 3 * NZ) v = lvl0 ? b[i * NZ + r] : rw[i * NZ + r];
            }}
            a[s][t] = v;
            if (c == 0 && r < NZ) colk[0][r] = v;
        }}
    }}
    unsigned used = 0u;
    __syncthreads();
    for (int k = 0; k < NZ; ++k) {{
        const int cur = k & 1, nxt = cur ^ 1;
        unsigned key = 0u;   // see _SOLVE_SRC: |a| as float bits, low 7 bits = 127 - row
        #pragma unroll
        for (int s = 0; s < AS; ++s) {{
            const int r = lane + 32 * s;
            if (r < NZ && !((used >> s) & 1u)) {{
                const float v = (float)fmin(fabs(colk[cur][r]), 3.0e38);
                const unsigned kk = (__float_as_uint(v) & ~0x7Fu) | (unsigned)(127 - r);
                key = kk > key ? kk : key;
            }}
        }}
        key = __reduce_max_sync(0xffffffffu, key);
        const int p = 127 - (int)(key & 0x7Fu);
        if ((p & 31) == lane) used |= 1u << (p >> 5);
        if (w == p % NWARPS) {{
            if (lane == 0) sipiv = 1.0 / colk[cur][p];
            #pragma unroll
            for (int s = 0; s < RS; ++s)
                if (s == p / NWARPS) {{
                    #pragma unroll
                    for (int t = 0; t < CS; ++t) rowp[lane + 32 * t] = a[s][t];
                }}
        }}
        if (threadIdx.x == 0) kOf[p] = k;
        __syncthreads();
        const double ipiv = sipiv;
        #pragma unroll
        for (int s = 0; s < RS; ++s) {{
            const int r = w + NWARPS * s;
            if (r < NZ) {{
                const double fr = colk[cur][r] * ipiv;
                #pragma unroll
                for (int t = 0; t < CS; ++t) {{
                    const int c = lane + 32 * t;
                    double v = a[s][t];
                    if (r == p) v = (c == k) ? ipiv : v * ipiv;
                    else if (c == k) v = -fr;
                    else v -= fr * rowp[c];
                    a[s][t] = v;
                    if (c == k + 1) colk[nxt][r] = v;
                }}
            }}
        }}
        __syncthreads();
    }}
    // row rho of the augmented columns holds row kOf[rho] of B^-1 [A | C | r]
    #pragma unroll
    for (int s = 0; s < RS; ++s) {{
        const int r = w + NWARPS * s;
        if (r < NZ) {{
            const int k = kOf[r];
            #pragma unroll
            for (int t = 0; t < CS; ++t) {{
                const int c = lane + 32 * t;
                if (c >= NZ && c < 2 * NZ) XA[blk + k * NZ + (c - NZ)] = a[s][t];
                else if (c >= 2 * NZ && c < 3 * NZ) XC[blk + k * NZ + (c - 2 * NZ)] = a[s][t];
                else if (c == 3 * NZ) Xr[i * NZ + k] = a[s][t];
            }}
        }}
    }}
}}

// The kept columns i = 2 h m of a level: one thread per (m, row, col) (blocktri.solve_cr).
// B and r are updated in place (each entry by its own thread); A and C go to the other buffer.
extern "C" __global__ void cr_update(
    const double* __restrict__ D, const double* __restrict__ lo, const double* __restrict__ up,
    const double* __restrict__ b,
    double* Bw, const double* __restrict__ Asrc, const double* __restrict__ Csrc, double* rw,
    const double* __restrict__ XA, const double* __restrict__ XC, const double* __restrict__ Xr,
    const int lvl0, const int NX, const int h, const int nkept,
    double* __restrict__ Adst, double* __restrict__ Cdst)
{{
    const long long total = (long long)nkept * NZ * NZ;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int c = (int)(t % NZ);
    const int r = (int)((t / NZ) % NZ);
    const int i = 2 * h * (int)(t / ((long long)NZ * NZ));
    const size_t blk = (size_t)i * NZ * NZ;
    const size_t e = blk + (size_t)r * NZ + c;
    double bv = lvl0 ? D[e] : Bw[e];
    double an = 0.0, cn = 0.0;
    const bool doR = (c == 0);
    double rv = 0.0;
    if (doR) rv = lvl0 ? b[i * NZ + r] : rw[i * NZ + r];
    if (i - h >= 0) {{
        const size_t wb = (size_t)(i - h) * NZ * NZ;
        if (lvl0) {{
            const double l = lo[i * NZ + r];
            bv -= l * XC[wb + (size_t)r * NZ + c];
            an = -(l * XA[wb + (size_t)r * NZ + c]);
            if (doR) rv -= l * Xr[(i - h) * NZ + r];
        }} else {{
            const double* ar = Asrc + blk + (size_t)r * NZ;
            double sb = 0.0, sa = 0.0, sr = 0.0;
            for (int q = 0; q < NZ; ++q) {{
                const double aq = ar[q];
                sb += aq * XC[wb + (size_t)q * NZ + c];
                sa += aq * XA[wb + (size_t)q * NZ + c];
                if (doR) sr += aq * Xr[(i - h) * NZ + q];
            }}
            bv -= sb; an = -sa; rv -= sr;
        }}
    }}
    if (i + h < NX) {{
        const size_t eb = (size_t)(i + h) * NZ * NZ;
        if (lvl0) {{
            const double u = up[i * NZ + r];
            bv -= u * XA[eb + (size_t)r * NZ + c];
            cn = -(u * XC[eb + (size_t)r * NZ + c]);
            if (doR) rv -= u * Xr[(i + h) * NZ + r];
        }} else {{
            const double* cr = Csrc + blk + (size_t)r * NZ;
            double sb = 0.0, sc = 0.0, sr = 0.0;
            for (int q = 0; q < NZ; ++q) {{
                const double cq = cr[q];
                sb += cq * XA[eb + (size_t)q * NZ + c];
                sc += cq * XC[eb + (size_t)q * NZ + c];
                if (doR) sr += cq * Xr[(i + h) * NZ + q];
            }}
            bv -= sb; cn = -sc; rv -= sr;
        }}
    }}
    Bw[e] = bv;
    Adst[e] = an;
    Cdst[e] = cn;
    if (doR) rw[i * NZ + r] = rv;
}}

// Back substitution, ONE thread block: x_0 = Xr_0, then per level (h = htop .. 1, a barrier
// between levels) x_i = Xr_i - XA_i x_{{i-h}} - XC_i x_{{i+h}} for the odd multiples i of h, one
// thread per (i, row).  Dirichlet entries = b exactly, as poisson.solve.
extern "C" __global__ void cr_backsub(
    const double* __restrict__ XA, const double* __restrict__ XC, const double* __restrict__ Xr,
    const double* __restrict__ b, const unsigned char* __restrict__ dir,
    const int NX, const int htop, double* x)
{{
    for (int k = threadIdx.x; k < NZ; k += blockDim.x) x[k] = dir[k] ? b[k] : Xr[k];
    __syncthreads();
    for (int h = htop; h >= 1; h >>= 1) {{
        const int ne = (NX - 1 - h) / (2 * h) + 1;
        for (int t = threadIdx.x; t < ne * NZ; t += blockDim.x) {{
            const int r = t % NZ;
            const int i = h * (2 * (t / NZ) + 1);
            const double* xa = XA + ((size_t)i * NZ + r) * NZ;
            const double* xw = x + (size_t)(i - h) * NZ;
            double s0 = 0.0, s1 = 0.0;
            for (int q = 0; q < NZ; ++q) s0 += xa[q] * xw[q];
            if (i + h < NX) {{
                const double* xc = XC + ((size_t)i * NZ + r) * NZ;
                const double* xe = x + (size_t)(i + h) * NZ;
                for (int q = 0; q < NZ; ++q) s1 += xc[q] * xe[q];
            }}
            const int g = i * NZ + r;
            x[g] = dir[g] ? b[g] : Xr[g] - s0 - s1;
        }}
        __syncthreads();
    }}
}}
"""

_GLUE_SRC = r"""
// rhs of the interior rows: -c_p (N - N_D) + c_p dz sum_j' F_i(j, j') V(i, j'), one thread per (i, j)
extern "C" __global__ void newton_rhs(
    const double* __restrict__ F, const double* __restrict__ V, const double* __restrict__ N,
    const double* __restrict__ ND, const double cp, const double cpdz, const int NXg, const int NZg,
    double* __restrict__ rhs)
{
    const int nz = NZg - 2;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (NXg - 2) * nz) return;
    const int j = t % nz, i = t / nz + 1;
    const double* f = F + (size_t)t * nz;
    const double* v = V + (size_t)i * NZg + 1;
    double s = 0.0;
    for (int q = 0; q < nz; ++q) s += f[q] * v[q];
    const int g = i * NZg + j + 1;
    rhs[t] = -cp * (N[g] - ND[g]) + cpdz * s;
}

// Newton norms in one block: out = [max|dV|, sum dV^2, max|dN|, sum dN^2, all finite(x)]
// (NaN propagates through the maxima and the sums)
#define NT 1024
extern "C" __global__ void newton_norms(
    const double* __restrict__ Vn, const double* __restrict__ Vo, const double* __restrict__ Nn,
    const double* __restrict__ No, const double* __restrict__ x, const int n, double* __restrict__ out)
{
    __shared__ double sh[4][NT];
    __shared__ int fin[NT];
    double m0 = 0.0, s0 = 0.0, m1 = 0.0, s1 = 0.0;
    int f = 1;
    for (int k = threadIdx.x; k < n; k += NT) {
        const double dv = Vn[k] - Vo[k], dn = Nn[k] - No[k];
        const double av = fabs(dv), an = fabs(dn);
        m0 = (av > m0 || av != av) ? av : m0;
        m1 = (an > m1 || an != an) ? an : m1;
        s0 += dv * dv;
        s1 += dn * dn;
        if (!isfinite(x[k])) f = 0;
    }
    sh[0][threadIdx.x] = m0; sh[1][threadIdx.x] = s0; sh[2][threadIdx.x] = m1; sh[3][threadIdx.x] = s1;
    fin[threadIdx.x] = f;
    __syncthreads();
    for (int st = NT / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) {
            const int o = threadIdx.x + st;
            double a = sh[0][threadIdx.x], c = sh[0][o];
            sh[0][threadIdx.x] = (c > a || c != c) ? c : a;
            a = sh[2][threadIdx.x]; c = sh[2][o];
            sh[2][threadIdx.x] = (c > a || c != c) ? c : a;
            sh[1][threadIdx.x] += sh[1][o];
            sh[3][threadIdx.x] += sh[3][o];
            fin[threadIdx.x] &= fin[o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = sh[0][0]; out[1] = sh[1][0]; out[2] = sh[2][0]; out[3] = sh[3][0];
        out[4] = fin[0] ? 1.0 : 0.0;
    }
}
"""

_cache: dict = {}


def _module():
    if "mod" not in _cache:
        _cache["mod"] = cp.RawModule(code=_FRECHET_SRC, options=("-std=c++14",))
    return _cache["mod"]


def _solve_kernel(NZ: int):
    key = ("solve", NZ)
    if key not in _cache:
        if NZ > MAX_NZ:
            raise ValueError(f"cuda_blocktri: NZ <= {MAX_NZ} (the pivot key holds the row in 7 bits)")
        nwarps = min(32, NZ)
        src = _SOLVE_SRC.format(nz=NZ, nwarps=nwarps)
        _cache[key] = (cp.RawKernel(src, "blocktri_solve", options=("-std=c++14",)), nwarps * 32)
    return _cache[key]


def _static(model, sysm):
    """Device copies of the static block form, cached on the model per boundary condition."""
    cache = model._device_cache
    k = ("cuda_blocktri", sysm.x_bc)
    if k not in cache or cache[k][0] is not sysm:
        bs = blocktri.block_system(model, sysm)
        cache[k] = (sysm, cp.asarray(bs.D0), cp.asarray(bs.lo0), cp.asarray(bs.up0),
                    cp.asarray(bs.dirichlet.astype(np.uint8)))
    return cache[k][1:]


def _f64(a):
    return cp.ascontiguousarray(cp.asarray(a, dtype=cp.float64))


def _grid(n, block=256):
    return ((n + block - 1) // block,), (block,)


def frechet(model, backend, eps, chi, rho, drho=None):
    """F (NX-2, NZ-2, NZ-2) on the device, one launch (poisson.frechet's fast path)."""
    eps, chi, rho = _f64(eps), _f64(chi), _f64(rho)
    NX, _, NS, NZ = chi.shape
    F = cp.empty((NX - 2, NZ - 2, NZ - 2))
    dr = _f64(drho) if drho is not None else rho
    g, b = _grid(F.size)
    _module().get_function("frechet_kernel")(
        g, b, (eps, chi, rho, dr, np.int32(drho is not None), np.int32(NX), np.int32(NZ), np.int32(NS), F))
    return F


def _dense():
    """cuda_iter's dense Newton system (cuSOLVER LU), used where NZ > MAX_NZ."""
    from solver.bsp.kernels import cuda_iter

    return cuda_iter


def construct_linsys(model, backend, sysm, F, rhs_int, bflat):
    """((D, lo, up), b): the row-equilibrated block form on the device (phase constrlinsys).
    NZ > MAX_NZ: cuda_iter's dense form instead (solve_linsys follows the same rule)."""
    if sysm.NZ > MAX_NZ:
        return _dense().construct_linsys(model, backend, sysm, F, rhs_int, bflat)
    NX, NZ = sysm.NX, sysm.NZ
    D0, lo0, up0, _ = _static(model, sysm)
    D = cp.empty((NX, NZ, NZ))
    lo = cp.empty((NX, NZ))
    up = cp.empty((NX, NZ))
    b = cp.empty((NX, NZ))
    g, blk = _grid(D.size)
    _module().get_function("construct_kernel")(
        g, blk, (D0, lo0, up0, _f64(F), _f64(rhs_int), _f64(bflat), np.float64(sysm.cp_dz),
                 np.int32(NX), np.int32(NZ), D, lo, up, b))
    return (D, lo, up), b


def solve_linsys_thomas(model, backend, sysm, A, b):
    """x (NX NZ,) of the block system by block Thomas in one single-block launch (the round-2
    kernel, kept as the baseline); Dirichlet entries equal b exactly."""
    D, lo, up = A
    NX, NZ = sysm.NX, sysm.NZ
    dirm = _static(model, sysm)[3]
    G = cp.empty((NX, NZ, NZ))
    z = cp.empty((NX, NZ))
    x = cp.empty(NX * NZ)
    kern, nthr = _solve_kernel(NZ)
    kern((1,), (nthr,), (D, lo, up, b, dirm, np.int32(NX), G, z, x))
    return x


def cr_nwarps(NZ: int) -> int:
    """Warps of the cr_eliminate thread block: env BSP_CR_NWARPS (benchmarks), else CR_NWARPS."""
    n = int(os.environ.get("BSP_CR_NWARPS", CR_NWARPS))
    return max(1, min(32, n, NZ))


def _cr_module(NZ: int, nwarps: int):
    key = ("cr", NZ, nwarps)
    if key not in _cache:
        if NZ > MAX_NZ:
            raise ValueError(f"cuda_blocktri: NZ <= {MAX_NZ} (the pivot key holds the row in 7 bits)")
        _cache[key] = cp.RawModule(code=_CR_SRC.format(nz=NZ, nwarps=nwarps), options=("-std=c++14",))
    return _cache[key]


def _cr_work(NX: int, NZ: int):
    """Work arrays of solve_linsys_cr, reused between calls (one stream: calls are ordered)."""
    key = ("crwork", NX, NZ)
    if key not in _cache:
        blk = lambda: cp.empty((NX, NZ, NZ))  # noqa: E731
        _cache[key] = dict(Bw=blk(), A=(blk(), blk()), C=(blk(), blk()), rw=cp.empty((NX, NZ)),
                           XA=blk(), XC=blk(), Xr=cp.empty((NX, NZ)))
    return _cache[key]


def solve_linsys_cr(model, backend, sysm, A, b, nwarps=None):
    """x (NX NZ,) by block cyclic reduction (blocktri.solve_cr): per level one cr_eliminate launch
    (a thread block per eliminated column, Gauss-Jordan with partial pivoting on [B | A | C | r])
    and one cr_update launch (a thread per entry of the kept blocks); then one single-block
    cr_backsub.  2 log2(NX) + 2 launches, no host synchronisation."""
    D, lo, up = A
    NX, NZ = sysm.NX, sysm.NZ
    nw = cr_nwarps(NZ) if nwarps is None else nwarps
    mod = _cr_module(NZ, nw)
    elim, upd, back = (mod.get_function(n) for n in ("cr_eliminate", "cr_update", "cr_backsub"))
    dirm = _static(model, sysm)[3]
    W = _cr_work(NX, NZ)
    Bw, rw, XA, XC, Xr = W["Bw"], W["rw"], W["XA"], W["XC"], W["Xr"]
    i32 = np.int32
    src = 0
    htop = 0
    for lvl, (h, first, step, n_elim, n_kept) in enumerate(blocktri.cr_levels(NX)):
        l0 = i32(lvl == 0)
        Asrc, Csrc = W["A"][src], W["C"][src]
        elim((n_elim,), (nw * 32,), (D, lo, up, b, Bw, Asrc, Csrc, rw, l0, i32(NX), i32(h), i32(first),
                                      i32(step), XA, XC, Xr))
        dst = 1 - src
        g, blk = _grid(n_kept * NZ * NZ)
        upd(g, blk, (D, lo, up, b, Bw, Asrc, Csrc, rw, XA, XC, Xr, l0, i32(NX), i32(h), i32(n_kept),
                     W["A"][dst], W["C"][dst]))
        src = dst
        htop = h
    elim((1,), (nw * 32,), (D, lo, up, b, Bw, W["A"][src], W["C"][src], rw, i32(NX == 1), i32(NX), i32(NX),
                            i32(0), i32(0), XA, XC, Xr))
    x = cp.empty(NX * NZ)
    back((1,), (1024,), (XA, XC, Xr, b, dirm, i32(NX), i32(htop), x))
    return x


SOLVERS = {"cr": solve_linsys_cr, "thomas": solve_linsys_thomas}


def solve_linsys(model, backend, sysm, A, b):
    """x (NX NZ,) of the block system (phase solvelinsys): block cyclic reduction by default
    (``SOLVE`` / env BSP_BLOCKTRI_SOLVE = 'thomas' selects the single-block block Thomas);
    Dirichlet entries equal b exactly.  NZ > MAX_NZ: cuda_iter's dense cuSOLVER solve of the
    dense form construct_linsys built."""
    if sysm.NZ > MAX_NZ:
        return _dense().solve_linsys(model, backend, sysm, A, b)
    return SOLVERS[os.environ.get("BSP_BLOCKTRI_SOLVE", SOLVE)](model, backend, sysm, A, b)


# ---------------------------------------------------------------------- the Newton glue
def _glue():
    if "glue" not in _cache:
        _cache["glue"] = cp.RawModule(code=_GLUE_SRC, options=("-std=c++14",))
    return _cache["glue"]


def newton_rhs(model, backend, sysm, F, V, N, ND):
    """rhs (NX-2, NZ-2) of the interior rows, -c_p (N - N_D) + c_p dz F V, in one launch
    (poisson._newton_loop's fast path)."""
    NX, NZ = sysm.NX, sysm.NZ
    rhs = cp.empty((NX - 2, NZ - 2))
    g, blk = _grid(rhs.size, 128)
    _glue().get_function("newton_rhs")(
        g, blk, (_f64(F), _f64(V), _f64(N), _f64(ND), np.float64(model.cp), np.float64(sysm.cp_dz),
                 np.int32(NX), np.int32(NZ), rhs))
    return rhs


def newton_norms(model, backend, V_new, V_old, N_new, N_old, x):
    """(norms dict as poisson._norms, all(isfinite(x))) from ONE kernel and ONE host read."""
    out = cp.empty(5)
    Vn = _f64(V_new)
    _glue().get_function("newton_norms")(
        (1,), (1024,), (Vn, _f64(V_old), _f64(N_new), _f64(N_old), _f64(x), np.int32(Vn.size), out))
    v = out.get()
    w = math.sqrt(model.dx * model.dz)
    vals = [float(v[0]), w * math.sqrt(v[1]), float(v[2]), w * math.sqrt(v[3])]
    return dict(zip(("dV_inf", "dV_l2", "dN_inf", "dN_l2"), vals)), bool(v[4] != 0.0)
