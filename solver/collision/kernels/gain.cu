// Gain term of the collision integral (paper 004, eq. 10) on the GPU: one block per (offset m,
// tile of n), the tile of (S_n, weight) in shared memory, threads over the cells i with j = i - m
// inside the mesh, one atomicAdd per (i, m, tile).  The launcher (solver/collision/kernels/cuda.py)
// sets the real type and the kernel name's dtype suffix.
#define TILE 512
extern "C" __global__ void gain_kernel_T(const REAL* __restrict__ fpad, const int* __restrict__ sidx_m,
        const int* __restrict__ ps, const long long* __restrict__ Mflat, const REAL* __restrict__ coef,
        const long long* __restrict__ ptr, const int* __restrict__ n3, const REAL* __restrict__ w,
        REAL* __restrict__ out, const int N, const int P)
{
    const int K = 2 * N - 1;
    const int mi = blockIdx.x;
    const int s = sidx_m[mi];
    const long long e0 = ptr[s] + (long long)blockIdx.y * TILE;
    const long long e1 = ptr[s + 1];
    if (s == 0 || e0 >= e1) return;
    const int cnt = (e1 - e0 < TILE) ? (int)(e1 - e0) : TILE;
    const int mx = mi / (K * K) - (N - 1), my = (mi / K) % K - (N - 1), mz = mi % K - (N - 1);
    const int p0 = ps[3 * mi], p1 = ps[3 * mi + 1], p2 = ps[3 * mi + 2];
    const long long M = Mflat[mi];
    const REAL c = coef[mi];
    __shared__ int sK[TILE];
    __shared__ int sL[TILE];
    __shared__ REAL sW[TILE];
    for (int q = threadIdx.x; q < cnt; q += blockDim.x) {
        const long long e = e0 + q;
        const long long Sn = (long long)n3[3 * e] * p0 + (long long)n3[3 * e + 1] * p1 + (long long)n3[3 * e + 2] * p2;
        sK[q] = (int)((Sn - M) / 2);
        sL[q] = (int)(-(Sn + M) / 2);
        sW[q] = w[e];
    }
    __syncthreads();
    const int x0 = max(0, mx), x1 = min(N, N + mx);
    const int y0 = max(0, my), y1 = min(N, N + my);
    const int z0 = max(0, mz), z1 = min(N, N + mz);
    const int nby = y1 - y0, nbz = z1 - z0;
    const int total = (x1 - x0) * nby * nbz;
    const int Np = N + 2 * P;
    for (int t = threadIdx.x; t < total; t += blockDim.x) {
        const int ix = x0 + t / (nby * nbz);
        const int iy = y0 + (t / nbz) % nby;
        const int iz = z0 + t % nbz;
        const int ip = ((ix + P) * Np + (iy + P)) * Np + (iz + P);
        REAL acc = 0;
        for (int q = 0; q < cnt; ++q)
            acc += sW[q] * __ldg(fpad + ip + sK[q]) * __ldg(fpad + ip + sL[q]);
        atomicAdd(out + (ix * N + iy) * N + iz, c * acc);
    }
}
