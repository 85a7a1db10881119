"""Block algebra of the paper's optimization cases (Table 3), as ``Ops`` for :func:`rgf_blocks`.

- case 1 ``aos``:    complex128 (array of structures), parallel row loop, i-k-j order (numba prange)
- case 2 ``soa``:    real and imaginary parts in separate arrays (structure of arrays), same loops
- case 3 ``tiled``:  SoA with 32 x 32 tiles, parallel over tile rows
- case 4 ``sched``:  tiled, and the j-loop of step 3 split into powers of two whose products run
                     side by side (threads on (product, tile row) pairs, the paper's NthrA x NthrB)
- case 5 ``gpu``:    step 3 on the GPU (CuPy): the paper's 32 x 32 shared-memory tiled SoA kernel
                     (``gpu_kernel='tiled'``) or cuBLAS ZGEMM (``gpu_kernel='cublas'``); steps 1, 2, 4
                     stay on the host with case 4's algebra, as in the paper.
Inverses use LAPACK in every case (the paper's cases differ in the products).  SoA matrices are
float64 arrays of shape (2, n, n).  numba is imported lazily.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from solver.rgf.sched import parts

TILE = 32


@lru_cache(maxsize=None)
def _numba_kernels():
    import numba as nb

    @nb.njit(parallel=True, cache=True)
    def aos_mul(A, B):
        n, K = A.shape
        m = B.shape[1]
        C = np.zeros((n, m), np.complex128)
        for i in nb.prange(n):
            for k in range(K):
                a = A[i, k]
                for j in range(m):
                    C[i, j] += a * B[k, j]
        return C

    @nb.njit(parallel=True, cache=True)
    def soa_mul(A, B):
        n, K = A.shape[1], A.shape[2]
        m = B.shape[2]
        C = np.zeros((2, n, m))
        for i in nb.prange(n):
            for k in range(K):
                ar = A[0, i, k]
                ai = A[1, i, k]
                for j in range(m):
                    C[0, i, j] += ar * B[0, k, j] - ai * B[1, k, j]
                    C[1, i, j] += ar * B[1, k, j] + ai * B[0, k, j]
        return C

    @nb.njit(inline="always")
    def _tile_rows(A, B, C, ib, T):
        n, K = A.shape[1], A.shape[2]
        m = B.shape[2]
        i0, i1 = ib * T, min(ib * T + T, n)
        for kb in range(0, K, T):
            k1 = min(kb + T, K)
            for jb in range(0, m, T):
                j1 = min(jb + T, m)
                for i in range(i0, i1):
                    for k in range(kb, k1):
                        ar = A[0, i, k]
                        ai = A[1, i, k]
                        for j in range(jb, j1):
                            C[0, i, j] += ar * B[0, k, j] - ai * B[1, k, j]
                            C[1, i, j] += ar * B[1, k, j] + ai * B[0, k, j]

    @nb.njit(parallel=True, cache=True)
    def tiled_mul(A, B, T):
        n = A.shape[1]
        C = np.zeros((2, n, B.shape[2]))
        nt = (n + T - 1) // T
        for ib in nb.prange(nt):
            _tile_rows(A, B, C, ib, T)
        return C

    @nb.njit(parallel=True, cache=True)
    def tiled_mul_many(As, B, T):
        """As: (p, 2, n, K); all p products side by side: work items (product, tile row)."""
        p, n = As.shape[0], As.shape[2]
        C = np.zeros((p, 2, n, B.shape[2]))
        nt = (n + T - 1) // T
        for w in nb.prange(p * nt):
            q = w // nt
            _tile_rows(As[q], B, C[q], w % nt, T)
        return C

    return aos_mul, soa_mul, tiled_mul, tiled_mul_many


class NumbaOps:
    """Cases 1-4 on the CPU (numba threads)."""

    def __init__(self, case: int, threads: int | None = None):
        if case not in (1, 2, 3, 4):
            raise ValueError(f"numba optimization case must be 1..4, got {case}")
        self.case = case
        self.name = {1: "aos", 2: "soa", 3: "tiled", 4: "sched"}[case]
        self.threads = threads
        self.xp = np
        self._k = _numba_kernels()

    def to(self, a):
        a = np.asarray(a, complex)
        return np.ascontiguousarray(a) if self.case == 1 else np.ascontiguousarray(np.stack([a.real, a.imag]))

    def back(self, a):
        return a if self.case == 1 else a[0] + 1j * a[1]

    def mul(self, a, b):
        aos, soa, tiled, _ = self._k
        if self.case == 1:
            return aos(a, b)
        if self.case == 2:
            return soa(a, b)
        return tiled(a, b, TILE)

    def mul_many(self, As, b):
        if self.case < 4 or len(As) == 1:
            return [self.mul(a, b) for a in As]
        import numba

        threads = numba.get_num_threads()
        out, pos = [], 0
        for p in parts(len(As), threads):
            out += list(self._k[3](np.stack(As[pos:pos + p]), b, TILE))
            pos += p
        return out

    def inv(self, a):
        return self.to(np.linalg.inv(self.back(a)))

    def trace(self, a):
        return complex(np.trace(a)) if self.case == 1 else complex(np.trace(a[0]), np.trace(a[1]))

    def sync(self):
        pass


_TILED_SRC = r"""
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
"""


@lru_cache(maxsize=None)
def _cuda_tiled():
    import cupy as cp

    return cp.RawKernel(_TILED_SRC, "zgemm_soa_tiled")


def gpu_tiled_mul(A, B):
    """SoA complex product on the GPU with the 32 x 32 tiled kernel; A, B: (2, n, K), (2, K, m)."""
    import cupy as cp

    n, K = A.shape[1], A.shape[2]
    m = B.shape[2]
    A = cp.ascontiguousarray(A)
    B = cp.ascontiguousarray(B)
    C = cp.empty((2, n, m), dtype=cp.float64)
    grid = ((m + 31) // 32, (n + 31) // 32)
    _cuda_tiled()(grid, (32, 32), (A[0], A[1], B[0], B[1], C[0], C[1], np.int32(n), np.int32(K), np.int32(m)))
    return C


class GPUStep3Ops(NumbaOps):
    """Case 5: case 4's host algebra, with the step-3 j-loop products offloaded to the GPU.

    Per column the host sends X_i (and, on the first column, the seed block); the column's
    blocks stay resident on the device (``col`` holds device arrays), as in the paper's Fig. 6;
    only the blocks step 4 needs come back.  ``kernel``: 'tiled' (RawKernel) or 'cublas'.
    """

    def __init__(self, kernel: str = "cublas", threads: int | None = None):
        super().__init__(4, threads)
        import cupy as cp

        self.cp = cp
        self.case = 5
        self.kernel = kernel
        self.name = f"gpu-{kernel}"

    # host-side format: SoA (2, n, n); device-side: SoA (tiled) or complex (cublas)
    def _dev(self, a):
        cp = self.cp
        if isinstance(a, cp.ndarray):
            return a
        if self.kernel == "tiled":
            return cp.asarray(a)
        return cp.asarray(a[0] + 1j * a[1])

    def _host(self, a):
        if not isinstance(a, self.cp.ndarray):
            return a
        h = a.get()
        return h if self.kernel == "tiled" else np.stack([h.real, h.imag])

    def _hostify(self, a):
        return self._host(a)

    def mul(self, a, b):
        if isinstance(a, self.cp.ndarray) or isinstance(b, self.cp.ndarray):
            return self._host(self._dmul(self._dev(a), self._dev(b)))
        return super().mul(a, b)

    def _dmul(self, a, b):
        return gpu_tiled_mul(a, b) if self.kernel == "tiled" else a @ b

    def mul_many(self, As, b):
        bd = self._dev(b)
        return [self._dmul(self._dev(a), bd) for a in As]

    def __neg_dev(self, a):
        return -a

    def inv(self, a):
        return super().inv(self._host(a))

    def trace(self, a):
        return super().trace(self._host(a))

    def back(self, a):
        return super().back(self._host(a))

    def sync(self):
        self.cp.cuda.get_current_stream().synchronize()
