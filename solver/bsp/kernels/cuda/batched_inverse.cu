/* Batched in-place Gauss-Jordan inversion with partial pivoting, one thread block per matrix
   (newton.py: the block solves of the batched block cyclic reduction, numerics.batched_blocks =
   gauss_jordan; B^-1 X = inverse @ X by one strided-batched GEMM).  Compiled with -std=c++14 and
   the defines N (matrix size, <= 511: the pivot key holds the row in 9 bits) and NWARPS.

   The exchange steps of cyclic_reduction.cu's cr_eliminate on the n x n block alone: step k takes
   the unused row p with the largest |a[p][k]| (float key with the low 9 mantissa bits replaced by
   511 - p: the first on near-ties within a factor 1 + 2^-14), scales it by 1 / a[p][k] (entry k
   becomes the reciprocal) and eliminates column k from every other row (entry k becomes
   -a[r][k] / a[p][k]).  After N steps entry (p_k, k') holds inv[k][p_k'] (p_k: the pivot row of
   step k), written out in natural order.  The matrix stays in registers (a thread holds rows
   w, w + NWARPS, ... and columns lane, lane + 32, ...). */
#define RS ((N + NWARPS - 1) / NWARPS)   // row slots per thread
#define CS ((N + 31) / 32)               // column slots per thread (and rows per lane in the search)

// A, Out: (M, N, N) contiguous; thread block m inverts matrix m.
extern "C" __global__ void __launch_bounds__(NWARPS * 32) gj_inverse(
    const double* __restrict__ A, double* __restrict__ Out)
{
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    __shared__ double colk[2][N];
    __shared__ double rowp[CS * 32];
    __shared__ int kOf[N];
    __shared__ int pOf[N];
    __shared__ double sipiv;
    double a[RS][CS];
    const double* src = A + (size_t)blockIdx.x * N * N;
    #pragma unroll
    for (int s = 0; s < RS; ++s) {
        const int r = w + NWARPS * s;
        #pragma unroll
        for (int t = 0; t < CS; ++t) {
            const int c = lane + 32 * t;
            const double v = (r < N && c < N) ? src[r * N + c] : 0.0;
            a[s][t] = v;
            if (c == 0 && r < N) colk[0][r] = v;
        }
    }
    unsigned used = 0u;  // bit s: row lane + 32 s is a pivot row already (the same in every warp)
    __syncthreads();
    for (int k = 0; k < N; ++k) {
        const int cur = k & 1, nxt = cur ^ 1;
        unsigned key = 0u;
        #pragma unroll
        for (int s = 0; s < CS; ++s) {
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
        if (w == p % NWARPS) {
            if (lane == 0) sipiv = 1.0 / colk[cur][p];
            #pragma unroll
            for (int s = 0; s < RS; ++s)
                if (s == p / NWARPS) {
                    #pragma unroll
                    for (int t = 0; t < CS; ++t) rowp[lane + 32 * t] = a[s][t];
                }
        }
        if (threadIdx.x == 0) {
            kOf[p] = k;
            pOf[k] = p;
        }
        __syncthreads();
        const double ipiv = sipiv;
        #pragma unroll
        for (int s = 0; s < RS; ++s) {
            const int r = w + NWARPS * s;
            if (r < N) {
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
    double* dst = Out + (size_t)blockIdx.x * N * N;
    #pragma unroll
    for (int s = 0; s < RS; ++s) {
        const int r = w + NWARPS * s;
        if (r < N) {
            const int k = kOf[r];
            #pragma unroll
            for (int t = 0; t < CS; ++t) {
                const int c = lane + 32 * t;
                if (c < N) dst[(size_t)k * N + pOf[c]] = a[s][t];
            }
        }
    }
}
