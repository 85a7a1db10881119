/* The fused level kernels of the batched block cyclic reduction with Gauss-Jordan block inverses
   (newton.GaussJordanCR, numerics.batched_blocks = gauss_jordan; blocktri.solve_cr is the array
   reference of the algorithm).  Compiled with -std=c++14 and the define N (block size).

   Layout (all row-major, indexed by the block column i of the mesh, no compaction):
     Bw (NX, N, N)       the kept blocks B_i; an eliminated column's block becomes its inverse
                         (written by gj_inverse, batched_inverse.cu);
     R  (NX, N, 2N + 1)  [A_i | C_i | r_i] of the columns active after level 0;
     X  (NX, N, 2N + 1)  B_i^-1 [A_i | C_i | r_i] of the columns eliminated at h >= 2 (one GEMM);
     z  (NX, N)          B_i^-1 b_i of level 0 (h = 1) and of column 0 (the top).
   Level 0: A = diag(lo), C = diag(up), so B^-1 [A | C | r] = [W diag(lo) | W diag(up) | z] with
   W = B^-1: its kept updates are row and column scalings of W (bcr_update0, no GEMM).  Level h >= 2:
   P = A_k X_{k-h}, Q = C_k X_{k+h} (two strided-batched GEMMs), then bcr_update:
     B_k -= P[:, N:2N] + Q[:, :N],  A_k = -P[:, :N],  C_k = -Q[:, N:2N],  r_k -= P[:, 2N] + Q[:, 2N].
   A kept column without a left (right) neighbour gets A = 0 (C = 0); bcr_update keeps the couplings it
   replaces in S (per level, (nkept, N, 2N)) for bcr_rhs.  bcr_backsub: one level of the back
   substitution (h = 0: column 0).  bcr_rhs: the right-hand side of one level again for a new b with the
   factorization of the last solve (GaussJordanCR.resolve, numerics.iter_jacobian = step). */
#define LD (2 * N + 1)

// Level 0, kept columns k = 2m: one thread per (m, r, c < N).  D, lo, up, b: the system; Bw holds
// W = B^-1 at the odd columns (read) and receives the kept B at the even ones.
extern "C" __global__ void bcr_update0(
    const double* __restrict__ D, const double* __restrict__ lo, const double* __restrict__ up,
    const double* __restrict__ b, const double* __restrict__ z, const int NX, const int nkept,
    double* Bw, double* __restrict__ R)
{
    const long long total = (long long)nkept * N * N;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int c = (int)(t % N);
    const int r = (int)((t / N) % N);
    const int k = 2 * (int)(t / ((long long)N * N));
    const size_t e = (size_t)k * N * N + (size_t)r * N + c;
    const size_t o = (size_t)k * N * LD + (size_t)r * LD;
    double bv = D[e], an = 0.0, cn = 0.0;
    double rv = b[k * N + r];
    if (k >= 1) {
        const double l = lo[k * N + r];
        const double w = Bw[e - (size_t)N * N];
        bv -= l * w * up[(k - 1) * N + c];
        an = -(l * w * lo[(k - 1) * N + c]);
        rv -= l * z[(k - 1) * N + r];
    }
    if (k + 1 < NX) {
        const double u = up[k * N + r];
        const double w = Bw[e + (size_t)N * N];
        bv -= u * w * lo[(k + 1) * N + c];
        if (k + 2 < NX) cn = -(u * w * up[(k + 1) * N + c]);
        rv -= u * z[(k + 1) * N + r];
    }
    Bw[e] = bv;
    R[o + c] = an;
    R[o + N + c] = cn;
    if (c == 0) R[o + 2 * N] = rv;
}

// Level h >= 2, kept columns k = 2 h m (m < nkept): one thread per (m, r, c < N); P[m - 1] (m >= 1)
// and Q[m] (m < nelim) are (N, 2N + 1) products of the GEMMs, contiguous.
extern "C" __global__ void bcr_update(
    const double* __restrict__ P, const double* __restrict__ Q, const int h, const int nkept,
    const int nelim, double* __restrict__ Bw, double* __restrict__ R, double* __restrict__ S)
{
    const long long total = (long long)nkept * N * N;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int c = (int)(t % N);
    const int r = (int)((t / N) % N);
    const int m = (int)(t / ((long long)N * N));
    const int k = 2 * h * m;
    const size_t e = (size_t)k * N * N + (size_t)r * N + c;
    const size_t o = (size_t)k * N * LD + (size_t)r * LD;
    double bv = Bw[e], an = 0.0, cn = 0.0, dr = 0.0;
    if (m >= 1) {
        const double* p = P + (size_t)(m - 1) * N * LD + (size_t)r * LD;
        bv -= p[N + c];
        an = -p[c];
        dr += p[2 * N];
    }
    if (m < nelim) {
        const double* q = Q + (size_t)m * N * LD + (size_t)r * LD;
        bv -= q[c];
        cn = -q[N + c];
        dr += q[2 * N];
    }
    Bw[e] = bv;
    const size_t so = (size_t)m * N * 2 * N + (size_t)r * 2 * N;
    S[so + c] = R[o + c];
    S[so + N + c] = R[o + N + c];
    R[o + c] = an;
    R[o + N + c] = cn;
    if (c == 0) R[o + 2 * N] -= dr;
}

// The dot products y[r] = sum_q M[r, q] v[q] (r < N) of one N x N row-major block, a warp per row,
// the lanes over q in a fixed order (bitwise repeatable).
__device__ void bcr_matvec(const double* __restrict__ M, const double* v, double* y)
{
    const int lane = threadIdx.x & 31;
    const int nw = blockDim.x >> 5;
    for (int r = threadIdx.x >> 5; r < N; r += nw) {
        double s = 0.0;
        for (int q = lane; q < N; q += 32) s += M[(size_t)r * N + q] * v[q];
        #pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) y[r] = s;
    }
}

// The right-hand side of level h for a new b, the blocks of the last factorization kept (resolve).
// Block m: kept column k = 2 h m with its eliminated neighbours k - h (m >= 1) and k + h (< NX):
//   y_e = B_e^-1 r_e (Bw holds the inverse; r_e = b_e at h = 1, else R[e][:, 2N]), stored by the
//   block of its left kept neighbour (h = 1: z[e]; h >= 2: X[e][:, 2N], read by bcr_backsub), then
//   h = 1:  r_k = b_k - lo_k y_{k-1} - up_k y_{k+1};  h >= 2: r_k -= A_k y_{k-h} + C_k y_{k+h}
//   (A_k, C_k as bcr_update kept them in S), into R[k][:, 2N];
//   h = 0:  column 0 (one block): z[0] = B_0^-1 R[0][:, 2N].
extern "C" __global__ void __launch_bounds__(1024) bcr_rhs(
    const double* __restrict__ Bw, const double* __restrict__ lo, const double* __restrict__ up,
    const double* __restrict__ b, const double* __restrict__ S, const int NX, const int h,
    double* __restrict__ z, double* __restrict__ X, double* __restrict__ R)
{
    __shared__ double v[2 * N];
    __shared__ double y[2 * N];
    if (h == 0) {
        for (int q = threadIdx.x; q < N; q += blockDim.x) v[q] = R[(size_t)q * LD + 2 * N];
        __syncthreads();
        bcr_matvec(Bw, v, z);
        return;
    }
    const int m = (int)blockIdx.x;
    const int k = 2 * h * m;
    const bool left = m >= 1, right = k + h < NX;
    for (int q = threadIdx.x; q < N; q += blockDim.x) {
        if (left) v[q] = h == 1 ? b[(k - 1) * N + q] : R[(size_t)(k - h) * N * LD + (size_t)q * LD + 2 * N];
        if (right) v[N + q] = h == 1 ? b[(k + 1) * N + q] : R[(size_t)(k + h) * N * LD + (size_t)q * LD + 2 * N];
    }
    __syncthreads();
    if (left) bcr_matvec(Bw + (size_t)(k - h) * N * N, v, y);
    if (right) bcr_matvec(Bw + (size_t)(k + h) * N * N, v + N, y + N);
    __syncthreads();
    if (right) {
        for (int q = threadIdx.x; q < N; q += blockDim.x) {
            if (h == 1) z[(k + 1) * N + q] = y[N + q];
            else X[(size_t)(k + h) * N * LD + (size_t)q * LD + 2 * N] = y[N + q];
        }
    }
    double* rk = R + (size_t)k * N * LD + 2 * N;
    if (h == 1) {
        for (int r = threadIdx.x; r < N; r += blockDim.x) {
            double rv = b[k * N + r];
            if (left) rv -= lo[k * N + r] * y[r];
            if (right) rv -= up[k * N + r] * y[N + r];
            rk[(size_t)r * LD] = rv;
        }
        return;
    }
    const int lane = threadIdx.x & 31;
    const int nw = blockDim.x >> 5;
    const double* sk = S + (size_t)m * N * 2 * N;
    for (int r = threadIdx.x >> 5; r < N; r += nw) {
        double s = 0.0;
        for (int q = lane; q < N; q += 32) {
            if (left) s += sk[(size_t)r * 2 * N + q] * y[q];
            if (right) s += sk[(size_t)r * 2 * N + N + q] * y[N + q];
        }
        #pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) rk[(size_t)r * LD] -= s;
    }
}

// Back substitution of the columns eliminated at stride h (block m: column i = h + 2 h m), a warp
// per row, the lanes over the dot products (fixed order: bitwise repeatable):
//   h = 1:  x_i = z_i - W_i (lo_i x_{i-1} + up_i x_{i+1})
//   h >= 2: x_i = Xr_i - XA_i x_{i-h} - XC_i x_{i+h}
//   h = 0:  x_0 = z_0 (one block).
// Dirichlet entries = b exactly, as poisson.solve_linsys.
// bcr_resolve's back-substitution phase repeats this row body on purpose, not through a shared helper:
// there X and z are written by other blocks of the same launch (plain loads, not this kernel's
// const __restrict__ read-only path), and each kernel's FP contractions are the compiler's (fused and
// levels differ by rounding on the device, schema numerics.resolve): moving the body could change
// either kernel's bits.  Change one, change the other (tests/test_bsp_kernels_cuda_resolve.py:
// fused == levels bitwise on the emulation, to rounding on the device).
extern "C" __global__ void __launch_bounds__(1024) bcr_backsub(
    const double* __restrict__ Bw, const double* __restrict__ X, const double* __restrict__ z,
    const double* __restrict__ lo, const double* __restrict__ up, const double* __restrict__ b,
    const unsigned char* __restrict__ dir, const int NX, const int h, double* x)
{
    const int lane = threadIdx.x & 31;
    const int nw = blockDim.x >> 5;
    const int i = h == 0 ? 0 : h + 2 * h * (int)blockIdx.x;
    const bool right = h > 0 && i + h < NX;
    for (int r = threadIdx.x >> 5; r < N; r += nw) {
        double s = 0.0, v;
        if (h == 1) {
            const double* w = Bw + (size_t)i * N * N + (size_t)r * N;
            for (int q = lane; q < N; q += 32) {
                double tq = lo[i * N + q] * x[(i - 1) * N + q];
                if (right) tq += up[i * N + q] * x[(i + 1) * N + q];
                s += w[q] * tq;
            }
        } else if (h > 1) {
            const double* xa = X + (size_t)i * N * LD + (size_t)r * LD;
            for (int q = lane; q < N; q += 32) {
                s += xa[q] * x[(i - h) * N + q];
                if (right) s += xa[N + q] * x[(i + h) * N + q];
            }
        }
        #pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (h > 1) v = X[(size_t)i * N * LD + (size_t)r * LD + 2 * N] - s;
        else v = z[i * N + r] - s;
        const int gidx = i * N + r;
        if (lane == 0) x[gidx] = dir[gidx] ? b[gidx] : v;
    }
}

// ------------------------------------------------------------------ the resolve in one launch
// bcr_resolve (numerics.resolve = fused): GaussJordanCR.resolve's 2 log2(NX) + 2 launches of bcr_rhs and
// bcr_backsub as ONE persistent launch of nb thread blocks, nb <= the SM count with one block fitting an
// SM alone (GaussJordanCR chooses it), so all blocks are resident at once and the phases are ordered by a
// grid barrier on the global counter bar (integer atomics only; zero before the launch, reset to zero by
// the last block to leave: graph replays start from zero).  Each row of a block matrix-vector product is
// one warp task (a warp per row, the lanes over q in the order of bcr_matvec and bcr_backsub, the
// same shuffle reduction, lane 0's sum stored), the tasks of a phase spread over all warps of the grid:
// every stored value is computed by the same operations in the same order as by the level kernels (the
// same bits).  Phases, with a grid barrier after each (data written by one block is read by others after
// it; those arrays are read through plain loads, never the read-only path):
//   per level h = 1, 2, 4, ... (< NX):
//     A(h)  eliminated columns e = h + 2 h m:  y_e = B_e^-1 r_e (r_e = b_e at h = 1, R[e][:, 2N] after),
//           into z[e] (h = 1) or X[e][:, 2N] (bcr_rhs stores the same y as its right neighbour's);
//     B(h)  kept columns k = 2 h m:  h = 1: R[k][:, 2N] = b_k - lo_k y_{k-1} - up_k y_{k+1} (a thread
//           per row); h >= 2: R[k][:, 2N] -= A_k y_{k-h} + C_k y_{k+h} (A_k, C_k in S, the levels'
//           S arrays one after the other in S);
//   C     column 0: z_0 = B_0^-1 R[0][:, 2N] and x_0 (bcr_backsub at h = 0: z_0 - 0 or b);
//   per level h = top, ..., 2, 1: the back substitution of bcr_backsub.
// No shared memory (the CPU emulation runs this kernel's blocks concurrently, tests/conftest.py).
#ifndef BCR_SPIN_PAUSE
#define BCR_SPIN_PAUSE()
#endif

// All blocks wait until every block has arrived ``target`` / nb times (target grows by nb per call).
__device__ void grid_barrier(unsigned* bar, const unsigned nb, unsigned& target)
{
    __syncthreads();
    target += nb;
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        while (*(volatile unsigned*)bar < target) BCR_SPIN_PAUSE();
        __threadfence();
    }
    __syncthreads();
}

__device__ __forceinline__ double warp_sum(double s)
{
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s;
}

extern "C" __global__ void __launch_bounds__(1024) bcr_resolve(
    const double* __restrict__ Bw, const double* __restrict__ lo, const double* __restrict__ up,
    const double* __restrict__ b, const double* __restrict__ S, const unsigned char* __restrict__ dir,
    const int NX, const int nb, double* z, double* X, double* R, double* x, unsigned* bar)
{
    const int lane = threadIdx.x & 31;
    const int nw = blockDim.x >> 5;
    const int gw = (int)blockIdx.x * nw + (int)(threadIdx.x >> 5), TW = nb * nw;    // warp tasks
    const int gt = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x, TT = nb * (int)blockDim.x;
    unsigned target = 0;
    size_t soff = 0;  // level h's couplings in S
    int htop = 0;
    for (int h = 1; h < NX; h *= 2) {
        const int ne = (NX - 1 - h) / (2 * h) + 1, nk = (NX - 1) / (2 * h) + 1;
        for (int t = gw; t < ne * N; t += TW) {  // A(h)
            const int e = h + 2 * h * (t / N), r = t % N;
            const double* M = Bw + (size_t)e * N * N + (size_t)r * N;
            const double* v = h == 1 ? b + (size_t)e * N : R + (size_t)e * N * LD + 2 * N;
            const int ld = h == 1 ? 1 : LD;
            double s = 0.0;
            for (int q = lane; q < N; q += 32) s += M[q] * v[(size_t)q * ld];
            s = warp_sum(s);
            if (lane == 0) {
                if (h == 1) z[e * N + r] = s;
                else X[(size_t)e * N * LD + (size_t)r * LD + 2 * N] = s;
            }
        }
        grid_barrier(bar, nb, target);
        if (h == 1) {  // B(1): a thread per row
            for (int t = gt; t < nk * N; t += TT) {
                const int k = 2 * (t / N), r = t % N;
                const bool left = k >= 1, right = k + 1 < NX;
                double rv = b[k * N + r];
                if (left) rv -= lo[k * N + r] * z[(k - 1) * N + r];
                if (right) rv -= up[k * N + r] * z[(k + 1) * N + r];
                R[(size_t)k * N * LD + (size_t)r * LD + 2 * N] = rv;
            }
        } else {  // B(h >= 2): a warp per row
            for (int t = gw; t < nk * N; t += TW) {
                const int m = t / N, r = t % N, k = 2 * h * m;
                const bool left = m >= 1, right = k + h < NX;
                const double* sk = S + soff + (size_t)m * N * 2 * N + (size_t)r * 2 * N;
                const double* yl = X + (size_t)(left ? k - h : 0) * N * LD + 2 * N;
                const double* yr = X + (size_t)(right ? k + h : 0) * N * LD + 2 * N;
                double s = 0.0;
                for (int q = lane; q < N; q += 32) {
                    if (left) s += sk[q] * yl[(size_t)q * LD];
                    if (right) s += sk[N + q] * yr[(size_t)q * LD];
                }
                s = warp_sum(s);
                if (lane == 0) R[(size_t)k * N * LD + (size_t)r * LD + 2 * N] -= s;
            }
            soff += (size_t)nk * N * 2 * N;
        }
        grid_barrier(bar, nb, target);
        htop = h;
    }
    for (int t = gw; t < N; t += TW) {  // C: column 0
        const int r = t;
        const double* M = Bw + (size_t)r * N;
        double s = 0.0;
        for (int q = lane; q < N; q += 32) s += M[q] * R[(size_t)q * LD + 2 * N];
        s = warp_sum(s);
        if (lane == 0) {
            z[r] = s;
            const double v = s - 0.0;  // bcr_backsub at h = 0: z_0 minus its (empty) sum, +0
            x[r] = dir[r] ? b[r] : v;
        }
    }
    // the back substitution: bcr_backsub's row body (h >= 1) over the grid's warps, kept a copy (see there:
    // X and z are written in this launch, so they are read through plain loads; the contractions are this kernel's;
    // phases A and B copy bcr_rhs's sums the same way)
    for (int h = htop; h >= 1; h /= 2) {
        grid_barrier(bar, nb, target);
        const int ne = (NX - 1 - h) / (2 * h) + 1;
        for (int t = gw; t < ne * N; t += TW) {
            const int i = h + 2 * h * (t / N), r = t % N;
            const bool right = i + h < NX;
            double s = 0.0, v;
            if (h == 1) {
                const double* w = Bw + (size_t)i * N * N + (size_t)r * N;
                for (int q = lane; q < N; q += 32) {
                    double tq = lo[i * N + q] * x[(i - 1) * N + q];
                    if (right) tq += up[i * N + q] * x[(i + 1) * N + q];
                    s += w[q] * tq;
                }
            } else {
                const double* xa = X + (size_t)i * N * LD + (size_t)r * LD;
                for (int q = lane; q < N; q += 32) {
                    s += xa[q] * x[(i - h) * N + q];
                    if (right) s += xa[N + q] * x[(i + h) * N + q];
                }
            }
            s = warp_sum(s);
            if (h > 1) v = X[(size_t)i * N * LD + (size_t)r * LD + 2 * N] - s;
            else v = z[i * N + r] - s;
            const int gidx = i * N + r;
            if (lane == 0) x[gidx] = dir[gidx] ? b[gidx] : v;
        }
    }
    __syncthreads();  // leave: the last block resets the counter for the next launch
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(bar, 1u) == target + (unsigned)nb - 1u) atomicExch(bar, 0u);
    }
}
