/* Block cyclic reduction of the block-tridiagonal Newton system (phase solve_linsys), launched by
   newton.solve_linsys_cr; blocktri.solve_cr is the array reference and documents the algorithm.
   Compiled with -std=c++14 and the defines NZ (block size, <= 127: the pivot key below holds the
   row in 7 bits) and NWARPS (warps of a cr_eliminate thread block, <= NZ).

   Pivot search of the Gauss-Jordan exchange steps: the pivot row is the largest |a[r][k]| among
   the unused rows, the first on near-ties, found by every warp alike with one __reduce_max_sync
   over a 32-bit key: the float bits of |a| (monotone for |a| >= 0) with the low 7 mantissa bits
   replaced by 127 - r (so a pivot within a factor 1 + 2^-16 of the largest may be taken: partial
   pivoting's bound is unchanged to that factor); used rows have key 0, which every unused row
   (r < 127) beats. */
#define NC (3 * NZ + 1)                   // columns of [B | A | C | r]
#define RS ((NZ + NWARPS - 1) / NWARPS)   // row slots per thread
#define CS ((NC + 31) / 32)               // column slots per thread
#define AS ((NZ + 31) / 32)               // rows per lane in the pivot search
// One level of block cyclic reduction (blocktri.solve_cr): thread block m eliminates column
// i = first + step m: [XA | XC | Xr] = B_i^{-1} [A_i | C_i | r_i] by NZ Gauss-Jordan exchange
// steps with implicit partial pivoting (3 NZ + 1 columns).
// lvl0: read B = D, A = diag(lo), C = diag(up), r = b; else the work arrays of the last update.
extern "C" __global__ void __launch_bounds__(NWARPS * 32) cr_eliminate(
    const double* __restrict__ D, const double* __restrict__ lo, const double* __restrict__ up,
    const double* __restrict__ b,
    const double* __restrict__ Bw, const double* __restrict__ Aw, const double* __restrict__ Cw,
    const double* __restrict__ rw,
    const int lvl0, const int NX, const int h, const int first, const int step,
    double* __restrict__ XA, double* __restrict__ XC, double* __restrict__ Xr)
{
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
    for (int s = 0; s < RS; ++s) {
        const int r = w + NWARPS * s;
        #pragma unroll
        for (int t = 0; t < CS; ++t) {
            const int c = lane + 32 * t;
            double v = 0.0;
            if (r < NZ) {
                if (c < NZ) v = lvl0 ? D[blk + r * NZ + c] : Bw[blk + r * NZ + c];
                else if (c < 2 * NZ) {
                    const int q = c - NZ;
                    if (hasA) v = lvl0 ? (q == r ? lo[i * NZ + r] : 0.0) : Aw[blk + r * NZ + q];
                } else if (c < 3 * NZ) {
                    const int q = c - 2 * NZ;
                    if (hasC) v = lvl0 ? (q == r ? up[i * NZ + r] : 0.0) : Cw[blk + r * NZ + q];
                } else if (c == 3 * NZ) v = lvl0 ? b[i * NZ + r] : rw[i * NZ + r];
            }
            a[s][t] = v;
            if (c == 0 && r < NZ) colk[0][r] = v;
        }
    }
    unsigned used = 0u;
    __syncthreads();
    for (int k = 0; k < NZ; ++k) {
        const int cur = k & 1, nxt = cur ^ 1;
        unsigned key = 0u;   // |a| as float bits, low 7 bits = 127 - row (see the top of this file)
        #pragma unroll
        for (int s = 0; s < AS; ++s) {
            const int r = lane + 32 * s;
            if (r < NZ && !((used >> s) & 1u)) {
                const float v = (float)fmin(fabs(colk[cur][r]), 3.0e38);
                const unsigned kk = (__float_as_uint(v) & ~0x7Fu) | (unsigned)(127 - r);
                key = kk > key ? kk : key;
            }
        }
        key = __reduce_max_sync(0xffffffffu, key);
        const int p = 127 - (int)(key & 0x7Fu);
        if ((p & 31) == lane) used |= 1u << (p >> 5);
        if (w == p % NWARPS) {
            if (lane == 0) sipiv = 1.0 / colk[cur][p];
            #pragma unroll
            for (int s = 0; s < RS; ++s)
                if (s == p / NWARPS) {
                    #pragma unroll
                    for (int t = 0; t < CS; ++t) rowp[lane + 32 * t] = a[s][t];
                }
        }
        if (threadIdx.x == 0) kOf[p] = k;
        __syncthreads();
        const double ipiv = sipiv;
        #pragma unroll
        for (int s = 0; s < RS; ++s) {
            const int r = w + NWARPS * s;
            if (r < NZ) {
                const double fr = colk[cur][r] * ipiv;
                #pragma unroll
                for (int t = 0; t < CS; ++t) {
                    const int c = lane + 32 * t;
                    double v = a[s][t];
                    if (r == p) v = (c == k) ? ipiv : v * ipiv;
                    else if (c == k) v = -fr;
                    else v -= fr * rowp[c];
                    a[s][t] = v;
                    if (c == k + 1) colk[nxt][r] = v;
                }
            }
        }
        __syncthreads();
    }
    // row rho of the augmented columns holds row kOf[rho] of B^-1 [A | C | r]
    #pragma unroll
    for (int s = 0; s < RS; ++s) {
        const int r = w + NWARPS * s;
        if (r < NZ) {
            const int k = kOf[r];
            #pragma unroll
            for (int t = 0; t < CS; ++t) {
                const int c = lane + 32 * t;
                if (c >= NZ && c < 2 * NZ) XA[blk + k * NZ + (c - NZ)] = a[s][t];
                else if (c >= 2 * NZ && c < 3 * NZ) XC[blk + k * NZ + (c - 2 * NZ)] = a[s][t];
                else if (c == 3 * NZ) Xr[i * NZ + k] = a[s][t];
            }
        }
    }
}

// The kept columns i = 2 h m of a level: one thread per (m, row, col) (blocktri.solve_cr).
// B and r are updated in place (each entry by its own thread); A and C go to the other buffer.
extern "C" __global__ void cr_update(
    const double* __restrict__ D, const double* __restrict__ lo, const double* __restrict__ up,
    const double* __restrict__ b,
    double* Bw, const double* __restrict__ Asrc, const double* __restrict__ Csrc, double* rw,
    const double* __restrict__ XA, const double* __restrict__ XC, const double* __restrict__ Xr,
    const int lvl0, const int NX, const int h, const int nkept,
    double* __restrict__ Adst, double* __restrict__ Cdst)
{
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
    if (i - h >= 0) {
        const size_t wb = (size_t)(i - h) * NZ * NZ;
        if (lvl0) {
            const double l = lo[i * NZ + r];
            bv -= l * XC[wb + (size_t)r * NZ + c];
            an = -(l * XA[wb + (size_t)r * NZ + c]);
            if (doR) rv -= l * Xr[(i - h) * NZ + r];
        } else {
            const double* ar = Asrc + blk + (size_t)r * NZ;
            double sb = 0.0, sa = 0.0, sr = 0.0;
            for (int q = 0; q < NZ; ++q) {
                const double aq = ar[q];
                sb += aq * XC[wb + (size_t)q * NZ + c];
                sa += aq * XA[wb + (size_t)q * NZ + c];
                if (doR) sr += aq * Xr[(i - h) * NZ + q];
            }
            bv -= sb; an = -sa; rv -= sr;
        }
    }
    if (i + h < NX) {
        const size_t eb = (size_t)(i + h) * NZ * NZ;
        if (lvl0) {
            const double u = up[i * NZ + r];
            bv -= u * XA[eb + (size_t)r * NZ + c];
            cn = -(u * XC[eb + (size_t)r * NZ + c]);
            if (doR) rv -= u * Xr[(i + h) * NZ + r];
        } else {
            const double* cr = Csrc + blk + (size_t)r * NZ;
            double sb = 0.0, sc = 0.0, sr = 0.0;
            for (int q = 0; q < NZ; ++q) {
                const double cq = cr[q];
                sb += cq * XA[eb + (size_t)q * NZ + c];
                sc += cq * XC[eb + (size_t)q * NZ + c];
                if (doR) sr += cq * Xr[(i + h) * NZ + q];
            }
            bv -= sb; cn = -sc; rv -= sr;
        }
    }
    Bw[e] = bv;
    Adst[e] = an;
    Cdst[e] = cn;
    if (doR) rw[i * NZ + r] = rv;
}

// Back substitution, ONE thread block: x_0 = Xr_0, then per level (h = htop .. 1, a barrier
// between levels) x_i = Xr_i - XA_i x_{i-h} - XC_i x_{i+h} for the odd multiples i of h, one
// thread per (i, row).  Dirichlet entries = b exactly, as poisson.solve_linsys.
extern "C" __global__ void cr_backsub(
    const double* __restrict__ XA, const double* __restrict__ XC, const double* __restrict__ Xr,
    const double* __restrict__ b, const unsigned char* __restrict__ dir,
    const int NX, const int htop, double* x)
{
    for (int k = threadIdx.x; k < NZ; k += blockDim.x) x[k] = dir[k] ? b[k] : Xr[k];
    __syncthreads();
    for (int h = htop; h >= 1; h >>= 1) {
        const int ne = (NX - 1 - h) / (2 * h) + 1;
        for (int t = threadIdx.x; t < ne * NZ; t += blockDim.x) {
            const int r = t % NZ;
            const int i = h * (2 * (t / NZ) + 1);
            const double* xa = XA + ((size_t)i * NZ + r) * NZ;
            const double* xw = x + (size_t)(i - h) * NZ;
            double s0 = 0.0, s1 = 0.0;
            for (int q = 0; q < NZ; ++q) s0 += xa[q] * xw[q];
            if (i + h < NX) {
                const double* xc = XC + ((size_t)i * NZ + r) * NZ;
                const double* xe = x + (size_t)(i + h) * NZ;
                for (int q = 0; q < NZ; ++q) s1 += xc[q] * xe[q];
            }
            const int g = i * NZ + r;
            x[g] = dir[g] ? b[g] : Xr[g] - s0 - s1;
        }
        __syncthreads();
    }
}
