// Case 5 of paper 002's Table 3: complex product C = A B in structure-of-arrays form (real and
// imaginary parts in separate arrays), 32 x 32 shared-memory tiles.  Launched by
// solver/rgf/kernels/cuda.py (gpu_tiled_mul).
extern "C" __global__ void zgemm_soa_tiled(const double* __restrict__ Ar, const double* __restrict__ Ai,
                                           const double* __restrict__ Br, const double* __restrict__ Bi,
                                           double* Cr, double* Ci, int n, int K, int m) {
    // one 32 x 32 tile of C per thread block, one element per thread; 4 x 8 kB = 32 kB shared
    __shared__ double sAr[32][32], sAi[32][32], sBr[32][32], sBi[32][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
    double cr = 0.0, ci = 0.0;
    for (int k0 = 0; k0 < K; k0 += 32) {
        int ka = k0 + tx, kb = k0 + ty;
        sAr[ty][tx] = (row < n && ka < K) ? Ar[(size_t)row * K + ka] : 0.0;
        sAi[ty][tx] = (row < n && ka < K) ? Ai[(size_t)row * K + ka] : 0.0;
        sBr[ty][tx] = (kb < K && col < m) ? Br[(size_t)kb * m + col] : 0.0;
        sBi[ty][tx] = (kb < K && col < m) ? Bi[(size_t)kb * m + col] : 0.0;
        __syncthreads();
        #pragma unroll 8
        for (int k = 0; k < 32; ++k) {
            double ar = sAr[ty][k], ai = sAi[ty][k], br = sBr[k][tx], bi = sBi[k][tx];
            cr += ar * br - ai * bi;
            ci += ar * bi + ai * br;
        }
        __syncthreads();
    }
    if (row < n && col < m) { Cr[(size_t)row * m + col] = cr; Ci[(size_t)row * m + col] = ci; }
}
