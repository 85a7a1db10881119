// The paper's five OpenCL kernels (axpy, dot0, dot1 + red, spmv0, spmv1) as CUDA templates, plus
// the copy / FMA / spin helpers; compiled once per precision by solver/vecops/kernels.py (GpuKernels).
// The deviations from the printed listings are listed in kernels.py's docstring.
// ---------------------------------------------------------------- helpers
template<typename T, int BS>
__device__ __forceinline__ void block_tree_reduce(T* LB, const unsigned lid)
{
    // LB[0..BS) holds one value per work-item (caller wrote it and passed a barrier);
    // on return LB[0] holds their sum.  Completely unrolled: BS is a compile-time constant.
#pragma unroll
    for (int k = BS / 2; k >= 32; k >>= 1) {
        if (lid < k) LB[lid] = LB[lid] + LB[lid + k];
        __syncthreads();
    }
    if (lid < 32) {
        const unsigned mask = (BS >= 32) ? 0xffffffffu : ((1u << (BS & 31)) - 1u);
        volatile T* V = LB;
#pragma unroll
        for (int k = (BS >= 64 ? 32 : BS) / 2; k > 0; k >>= 1) {
            if (lid < k) V[lid] = V[lid] + V[lid + k];
            __syncwarp(mask);
        }
    }
}

// ---------------------------------------------------------------- AXPY: r = a*x + y
template<typename T>
__global__ void axpy(const T a, const T* __restrict__ x, const T* __restrict__ y,
                     T* __restrict__ r, const long long n)
{
    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // one work-item per element
    if (gid < n) r[gid] = a * x[gid] + y[gid];
}

// ---------------------------------------------------------------- DOT, kernel dot0 (local memory)
template<typename T, int BS>
__global__ void __launch_bounds__(BS) dot0(const T* __restrict__ v1, const T* __restrict__ v2,
                                           T* __restrict__ vrp, const long long n)
{
    __shared__ T LB[BS];
    const unsigned lid = threadIdx.x;
    const long long i = (long long)blockIdx.x * (2 * BS) + lid;   // two elements per work-item
    T s = T(0);
    if (i < n) s = v1[i] * v2[i];
    if (i + BS < n) s = s + v1[i + BS] * v2[i + BS];               // first reduction during the load
    LB[lid] = s;
    __syncthreads();
    block_tree_reduce<T, BS>(LB, lid);
    if (lid == 0) vrp[blockIdx.x] = LB[0];
}

// final reduction of dot0's partial sums: one block of BS threads
template<typename T, int BS>
__global__ void __launch_bounds__(BS) reduce_final(const T* __restrict__ vrp, T* __restrict__ vr,
                                                   const long long m)
{
    __shared__ T LB[BS];
    const unsigned lid = threadIdx.x;
    T s = T(0);
    for (long long i = lid; i < m; i += BS) s = s + vrp[i];
    LB[lid] = s;
    __syncthreads();
    block_tree_reduce<T, BS>(LB, lid);
    if (lid == 0) vr[0] = LB[0];
}

// ---------------------------------------------------------------- DOT, kernel dot1 (global memory only)
template<typename T>
__global__ void dot1(const T* __restrict__ v1, const T* __restrict__ v2, T* __restrict__ vrp,
                     const long long n, const int chk)
{
    // work-item gid sums the products of its chunk [gid*CHK, gid*CHK + CHK) in a private
    // accumulator (aux) and stores one partial sum; CHK = work-group size
    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long start = gid * chk;
    if (start >= n) return;
    long long end = start + chk;
    if (end > n) end = n;
    T aux = T(0);
    for (long long i = start; i < end; ++i) aux = aux + v1[i] * v2[i];
    vrp[gid] = aux;
}

// the paper's auxiliary kernel red: work-item 0 adds the m partial sums
template<typename T>
__global__ void red(const T* __restrict__ vrp, T* __restrict__ vr, const long long m)
{
    if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    long long i = 0;
    for (; i + 3 < m; i += 4) {
        a0 += (double)vrp[i]; a1 += (double)vrp[i + 1]; a2 += (double)vrp[i + 2]; a3 += (double)vrp[i + 3];
    }
    for (; i < m; ++i) a0 += (double)vrp[i];
    vr[0] = (T)((a0 + a1) + (a2 + a3));
}

// ---------------------------------------------------------------- SpMV, kernel spmv0 (vector: one work-group per row)
template<typename T, int BS>
__global__ void __launch_bounds__(BS) spmv0(const T* __restrict__ AA, const int* __restrict__ JA,
                                            const int* __restrict__ IA, const T* __restrict__ v,
                                            T* __restrict__ r, const int rows)
{
    __shared__ T LB[BS];
    const int row = blockIdx.x;
    const unsigned lid = threadIdx.x;
    T s = T(0);
    if (row < rows) {
        const int indI = IA[row], indF = IA[row + 1];
        for (int i = indI + (int)lid; i < indF; i += BS) s = s + AA[i] * v[JA[i]];   // strided over the row
    }
    LB[lid] = s;
    __syncthreads();
    block_tree_reduce<T, BS>(LB, lid);
    if (lid == 0 && row < rows) r[row] = LB[0];
}

// ---------------------------------------------------------------- SpMV, kernel spmv1 (scalar: one work-item per row)
template<typename T>
__global__ void spmv1(const T* __restrict__ AA, const int* __restrict__ JA, const int* __restrict__ IA,
                      const T* __restrict__ v, T* __restrict__ r, const int rows)
{
    const int gid = blockIdx.x * blockDim.x + threadIdx.x;
    if (gid >= rows) return;
    const int indI = IA[gid], indF = IA[gid + 1];
    T aux = T(0);
    for (int i = indI; i < indF; i++) aux = aux + AA[i] * v[JA[i]];
    r[gid] = aux;
}

// ---------------------------------------------------------------- ceilings and timing helpers
template<typename T>
__global__ void copy(const T* __restrict__ x, T* __restrict__ r, const long long n)
{
    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (gid < n) r[gid] = x[gid];
}

template<typename T>
__global__ void fma_peak(T* __restrict__ out, const int iters, const T a, const T b)
{
    // 8 independent FMA chains per thread: 16 flops per iteration, registers only
    T x0 = (T)threadIdx.x * (T)1e-7, x1 = x0 + (T)1e-3, x2 = x0 + (T)2e-3, x3 = x0 + (T)3e-3;
    T x4 = x0 + (T)4e-3, x5 = x0 + (T)5e-3, x6 = x0 + (T)6e-3, x7 = x0 + (T)7e-3;
#pragma unroll 4
    for (int i = 0; i < iters; ++i) {
        x0 = x0 * a + b; x1 = x1 * a + b; x2 = x2 * a + b; x3 = x3 * a + b;
        x4 = x4 * a + b; x5 = x5 * a + b; x6 = x6 * a + b; x7 = x7 * a + b;
    }
    const T s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    if (s == (T)-1.0) out[blockIdx.x * blockDim.x + threadIdx.x] = s;   // never true; keeps the chains live
}

extern "C" __global__ void spin(const long long cycles)
{
    // busy-waits `cycles` SM clocks: keeps the GPU busy while the host enqueues a batch
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
