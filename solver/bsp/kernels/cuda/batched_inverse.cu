/* Batched Gauss-Jordan inversion with partial pivoting, one thread block per matrix (newton.py: the
   block inverses of the batched block cyclic reduction, numerics.batched_blocks = gauss_jordan, and
   newton.gj_inverse).  Compiled with -std=c++14 and the defines
     N     matrix size (<= 511: the pivot key below holds the row in 9 bits),
     RG    row groups: thread t owns column t % N of the rows t / N + RG s (s < RS),
     NT    threads per block: RG * N rounded up to a whole warp (the others idle, in the
           warp-wide pivot search and the barriers),
     RREG  row slots kept in registers; slots RREG .. RS - 1 live in dynamic shared memory
           ((RS - RREG) NT doubles, the launch's shared_mem; up to ~227 KB: N <= 204),
     FACTORS 1: the step's row factors f[r] = a[r][k] / a[p][k] precomputed in shared memory and the
           pivot row / column k handled outside the update loop (one load + one FMA per entry);
           0: the factors and the special cases inside the loop (faster for many rows per thread:
           newton.GJ_FACTORS_MAX_RS).
   A thread keeps its column's entry of the pivot row in one register per step and reads the row
   factors from shared memory (broadcast within a warp): one shared load per matrix entry per step
   where the matrix sits in registers, three (load, factor, store) where it sits in shared memory.

   Exchange step k (blocktri.exchange_inverse is the array reference): the unused row p with the
   largest |a[p][k]| (a float key with the low 9 mantissa bits replaced by 511 - p: the first row on
   near-ties within a factor 1 + 2^-14; every warp finds it alike, no barrier) is scaled by
   1 / a[p][k] (entry k becomes the reciprocal) and column k is eliminated from every other row
   (entry k becomes -a[r][k] / a[p][k]).  Two barriers per step.  After N steps entry (p_k, k')
   holds inv[k][p_k'] (p_k: the pivot row of step k), written out in natural order.  Optionally the
   right-hand side v rides along as one more column (y, in shared memory): z = inv v. */
#define RS ((N + RG - 1) / RG)           // row slots per thread
#define SS (RS > RREG ? RS - RREG : 0)   // row slots in shared memory
#define AS ((N + 31) / 32)               // rows per lane in the pivot search

// Block m inverts matrix i = first + step m of src (M, N, N) into dst (may be src: in place);
// with_rhs: z[i] = inv @ v, v[r] = rhs[rhs_off + i rhs_bs + r rhs_ld].
extern "C" __global__ void __launch_bounds__(NT) gj_inverse(
    const double* src, double* dst, const int first, const int step,
    const double* __restrict__ rhs, const int with_rhs, const int rhs_off, const int rhs_bs, const int rhs_ld,
    double* __restrict__ z)
{
    const int t = threadIdx.x;
    const bool act = t < RG * N;       // the others only join the pivot search and the barriers
    const int c = t % N;
    const int g = act ? t / N : 0;     // idle threads work on private copies of group 0's rows
    const int i = first + step * (int)blockIdx.x;
    __shared__ double colk[2][N];
    __shared__ double rowp[N];
    __shared__ double f[N];            // FACTORS: the row factors a[r][k] / a[p][k] of the step, f[p] = 0
    __shared__ double y[N];
    __shared__ int kOf[N];
    __shared__ int pOf[N];
#ifdef __CUDACC_RTC__
    extern __shared__ double ov[];
#else
    static double ov[SS * NT + 1];  // the host emulation (tests/conftest.py): one block at a time
#endif
    double a[RREG > 0 ? RREG : 1];
    const double* A = src + (size_t)i * N * N;
    #pragma unroll
    for (int s = 0; s < RS; ++s) {
        const int r = g + RG * s;
        const double v = r < N ? A[r * N + c] : 0.0;
        if (s < RREG) a[s < RREG ? s : 0] = v;
        else ov[(s - RREG) * NT + t] = v;
        if (act && c == 0 && r < N) colk[0][r] = v;
    }
    if (with_rhs && t < N) y[t] = rhs[rhs_off + (size_t)i * rhs_bs + (size_t)t * rhs_ld];
    const int lane = t & 31;
    unsigned used = 0u;  // bit s: row lane + 32 s is a pivot row already (the same in every warp)
    __syncthreads();
    for (int k = 0; k < N; ++k) {
        const int cur = k & 1, nxt = cur ^ 1;
        unsigned key = 0u;
        #pragma unroll
        for (int s = 0; s < AS; ++s) {
            const int r = lane + 32 * s;
            if (r < N && !((used >> s) & 1u)) {
                const float v = (float)fmin(fabs(colk[cur][r]), 3.0e38);
                const unsigned kk = (__float_as_uint(v) & ~0x1FFu) | (unsigned)(511 - r);
                key = kk > key ? kk : key;
            }
        }
        key = __reduce_max_sync(0xffffffffu, key);
        const int p = 511 - (int)(key & 0x1FFu);
        if ((p & 31) == lane) used |= 1u << (p >> 5);
        const double ipiv = 1.0 / colk[cur][p];
        const int sp = p / RG;
        const bool own = act && g == p % RG;  // this thread holds row p (slot sp)
        const double yp = with_rhs ? y[p] : 0.0;
#if FACTORS
        if (t < N) f[t] = t == p ? 0.0 : colk[cur][t] * ipiv;
        if (own) {  // publish the pivot row, then scale it (f[p] = 0 leaves it alone below)
            #pragma unroll
            for (int s = 0; s < RS; ++s)
                if (s == sp) {
                    double v = s < RREG ? a[s < RREG ? s : 0] : ov[(s - RREG) * NT + t];
                    rowp[c] = v;
                    v *= ipiv;
                    if (s < RREG) a[s < RREG ? s : 0] = v;
                    else ov[(s - RREG) * NT + t] = v;
                }
        }
#else
        if (own) {
            #pragma unroll
            for (int s = 0; s < RS; ++s)
                if (s == sp) rowp[c] = s < RREG ? a[s < RREG ? s : 0] : ov[(s - RREG) * NT + t];
        }
#endif
        if (t == 0) {
            kOf[p] = k;
            pOf[k] = p;
        }
        __syncthreads();
        const double rp = rowp[c];
#if FACTORS
        #pragma unroll
        for (int s = 0; s < RS; ++s) {  // row r -= f[r] row p (rows of group 0 for idle threads)
            const int r = g + RG * s;
            if (s < N / RG || r < N) {
                if (s < RREG) a[s < RREG ? s : 0] -= f[r] * rp;
                else ov[(s - RREG) * NT + t] -= f[r] * rp;
            }
        }
        if (act && c == k) {  // column k: -f[r], the reciprocal in the pivot row
            #pragma unroll
            for (int s = 0; s < RS; ++s) {
                const int r = g + RG * s;
                if (r < N) {
                    const double v = r == p ? ipiv : -f[r];
                    if (s < RREG) a[s < RREG ? s : 0] = v;
                    else ov[(s - RREG) * NT + t] = v;
                }
            }
        }
        if (act && c == k + 1) {  // the next step's pivot column
            #pragma unroll
            for (int s = 0; s < RS; ++s) {
                const int r = g + RG * s;
                if (r < N) colk[nxt][r] = s < RREG ? a[s < RREG ? s : 0] : ov[(s - RREG) * NT + t];
            }
        }
#else
        #pragma unroll
        for (int s = 0; s < RS; ++s) {
            const int r = g + RG * s;
            if (r < N) {
                const double fr = colk[cur][r] * ipiv;
                double v = s < RREG ? a[s < RREG ? s : 0] : ov[(s - RREG) * NT + t];
                if (r == p) v = (c == k) ? ipiv : v * ipiv;
                else if (c == k) v = -fr;
                else v -= fr * rp;
                if (s < RREG) a[s < RREG ? s : 0] = v;
                else ov[(s - RREG) * NT + t] = v;
                if (act && c == k + 1) colk[nxt][r] = v;
            }
        }
#endif
        if (with_rhs && t < N) y[t] = t == p ? y[t] * ipiv : y[t] - colk[cur][t] * ipiv * yp;
        __syncthreads();
    }
    double* D = dst + (size_t)i * N * N;
    const int pc = pOf[c];
    if (act) {
        #pragma unroll
        for (int s = 0; s < RS; ++s) {
            const int r = g + RG * s;
            if (r < N) D[(size_t)kOf[r] * N + pc] = s < RREG ? a[s < RREG ? s : 0] : ov[(s - RREG) * NT + t];
        }
    }
    if (with_rhs && t < N) z[(size_t)i * N + kOf[t]] = y[t];
}
