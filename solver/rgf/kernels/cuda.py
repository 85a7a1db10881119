"""Case 5 of Table 3 (paper 002): step 3's products on the GPU (CuPy), the tiled SoA kernel of
``zgemm_soa_tiled.cu`` or cuBLAS ZGEMM; the other steps keep case 4's host algebra."""
from __future__ import annotations

from functools import lru_cache, partial
from importlib.resources import files

import cupy as cp
import numpy as np

from solver.rgf.kernels.numba_cpu import NumbaOps


@lru_cache(maxsize=None)
def _cuda_tiled():
    return cp.RawKernel(files(__package__).joinpath("zgemm_soa_tiled.cu").read_text(), "zgemm_soa_tiled")


def gpu_tiled_mul(A, B):
    """SoA complex product on the GPU with the 32 x 32 tiled kernel; A, B: (2, n, K), (2, K, m)."""
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

    def mul(self, a, b):
        if isinstance(a, self.cp.ndarray) or isinstance(b, self.cp.ndarray):
            return self._host(self._dmul(self._dev(a), self._dev(b)))
        return super().mul(a, b)

    def _dmul(self, a, b):
        return gpu_tiled_mul(a, b) if self.kernel == "tiled" else a @ b

    def mul_many(self, As, b):
        bd = self._dev(b)
        return [self._dmul(self._dev(a), bd) for a in As]

    def inv(self, a):
        return super().inv(self._host(a))

    def trace(self, a):
        return super().trace(self._host(a))

    def back(self, a):
        return super().back(self._host(a))

    def sync(self):
        self.cp.cuda.get_current_stream().synchronize()


TABLE = {f"gpu-{kernel}": partial(GPUStep3Ops, kernel) for kernel in ("tiled", "cublas")}
