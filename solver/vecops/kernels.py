"""The paper's five OpenCL kernels as CUDA templates compiled through CuPy (RawModule).

OpenCL -> CUDA: work-item = thread, work-group = block, local memory = shared memory,
``get_global_id(0)`` = ``blockIdx.x*blockDim.x + threadIdx.x``.  ``T`` is ``float`` (the paper)
or ``double`` (option).  The block size of the kernels with an unrolled shared-memory reduction
(dot0, spmv0) is a template parameter, so the reduction is completely unrolled for each
work-group size as in the paper.  The source is ``kernels.cu``; the module is compiled once per
precision.  The "cupy" table of ``solver.vecops.REGISTRY``.

Deviations from the printed listings, each forced by a bug or by the modern hardware:
- the unrolled reductions keep a ``__syncthreads()`` after every level that spans more than one
  warp and ``__syncwarp()`` inside the last warp (the paper omits "some barriers"; warp-synchronous
  code without them is a race since Volta);
- ``dot1`` as printed cannot work: ``if (lid=0)`` assigns and is never true, and the lid==0
  work-item re-reads products other work-items wrote to global memory.  The text describes a
  kernel in which every work-item sums its own chunk of CHK = work-group-size consecutive products
  from global memory into a private accumulator and stores one partial sum; that is what ``dot1``
  does (global size = ceil(n / CHK) work-items, partial sums stored contiguously);
- ``red`` is the paper's one-work-item final kernel, reading the partial sums contiguously; its
  accumulator is double (4 independent ones), because one thread adding 200K float partials at 50M
  elements would lose the float32 round-off target; the result is stored in T;
- ``dot0``'s final reduction is one block of 1024 threads (strided sums, then the same unrolled
  tree), so the 2-kernel DOT is not limited by one thread at large sizes;
- ``spmv1`` writes ``r[gid]`` (the listing writes ``vr``, which is not an argument) and returns
  for gid >= rows (the global size is rounded up to a multiple of the block).
"""
from __future__ import annotations

from importlib.resources import files

import cupy as cp
import numpy as np


SHARED_BLOCKS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
FINAL_BLOCK = 1024


def ctype(dtype) -> str:
    dt = np.dtype(dtype)
    if dt == np.float32:
        return "float"
    if dt == np.float64:
        return "double"
    raise ValueError(f"precision must be float32 or float64, got {dt}")


def name_expressions(dtype) -> list[str]:
    T = ctype(dtype)
    names = [f"axpy<{T}>", f"dot1<{T}>", f"red<{T}>", f"spmv1<{T}>", f"copy<{T}>", f"fma_peak<{T}>",
             f"reduce_final<{T}, {FINAL_BLOCK}>"]
    for bs in SHARED_BLOCKS:
        names += [f"dot0<{T}, {bs}>", f"spmv0<{T}, {bs}>"]
    return names


def _grid(n: int, block: int) -> int:
    return max(1, -(-int(n) // int(block)))


class GpuKernels:
    """Compiled kernels of one precision with launch wrappers (all launches asynchronous)."""

    _cache: dict = {}

    def __init__(self, dtype="float32"):
        self.cp = cp
        self.dtype = np.dtype(dtype)
        self.T = ctype(self.dtype)
        key = self.T
        if key not in GpuKernels._cache:
            source = files(__package__).joinpath("kernels.cu").read_text()
            mod = cp.RawModule(code=source, options=("--std=c++17",), name_expressions=name_expressions(self.dtype))
            GpuKernels._cache[key] = mod
        self.mod = GpuKernels._cache[key]
        self._f = {}

    def fn(self, name: str):
        f = self._f.get(name)
        if f is None:
            f = self._f[name] = self.mod.get_function(name)
        return f

    def scalar(self, a):
        return self.dtype.type(a)

    # -- AXPY --------------------------------------------------------------------------------
    def axpy(self, a, x, y, r, block: int = 256):
        n = x.size
        self.fn(f"axpy<{self.T}>")((_grid(n, block),), (block,), (self.scalar(a), x, y, r, np.int64(n)))
        return r

    # -- DOT ---------------------------------------------------------------------------------
    @staticmethod
    def dot0_partials(n: int, block: int) -> int:
        return _grid(n, 2 * block)

    @staticmethod
    def dot1_partials(n: int, block: int) -> int:
        return _grid(n, block)

    def dot0(self, x, y, block: int, vrp, out):
        """dot0 with work-group size ``block``, then the one-block final reduction; ``out`` is a 0-d/1-element array."""
        n = x.size
        m = self.dot0_partials(n, block)
        self.fn(f"dot0<{self.T}, {block}>")((m,), (block,), (x, y, vrp, np.int64(n)))
        self.fn(f"reduce_final<{self.T}, {FINAL_BLOCK}>")((1,), (FINAL_BLOCK,), (vrp, out, np.int64(m)))
        return out

    def dot1(self, x, y, block: int, vrp, out):
        """dot1 (global memory only, chunk = work-group size ``block``), then red with one work-item."""
        n = x.size
        m = self.dot1_partials(n, block)
        self.fn(f"dot1<{self.T}>")((_grid(m, block),), (block,), (x, y, vrp, np.int64(n), np.int32(block)))
        self.fn(f"red<{self.T}>")((1,), (1,), (vrp, out, np.int64(m)))
        return out

    # -- SpMV --------------------------------------------------------------------------------
    def spmv0(self, AA, JA, IA, v, r, rows: int, block: int = 32):
        self.fn(f"spmv0<{self.T}, {block}>")((int(rows),), (block,), (AA, JA, IA, v, r, np.int32(rows)))
        return r

    def spmv1(self, AA, JA, IA, v, r, rows: int, block: int = 256):
        self.fn(f"spmv1<{self.T}>")((_grid(rows, block),), (block,), (AA, JA, IA, v, r, np.int32(rows)))
        return r

    # -- helpers -----------------------------------------------------------------------------
    def copy(self, x, r, block: int = 256):
        n = x.size
        self.fn(f"copy<{self.T}>")((_grid(n, block),), (block,), (x, r, np.int64(n)))
        return r

    def fma(self, out, iters: int, grid: int, block: int = 256):
        self.fn(f"fma_peak<{self.T}>")((grid,), (block,), (out, np.int32(iters), self.scalar(0.9999999),
                                                           self.scalar(1e-7)))
        return out

    def spin(self, cycles: int):
        self.fn("spin")((1,), (1,), (np.int64(max(0, int(cycles))),))

    # -- library baselines ---------------------------------------------------------------------
    def cublas_axpy(self, a, x, y):
        """cuBLAS ?axpy through CuPy: y <- a*x + y (in place)."""
        import cupy.cublas

        return cupy.cublas.axpy(self.scalar(a), x, y)

    def cublas_dot(self, x, y, out):
        """cuBLAS ?dot through CuPy, result left on the device (pointer mode device)."""
        import cupy.cublas

        return cupy.cublas.dot(x, y, out=out)


def device_csr(A, cp, dtype=None):
    """(AA, JA, IA) on the device, int32 indices."""
    dt = np.dtype(dtype or A.data.dtype)
    return (cp.asarray(A.data.astype(dt, copy=False)), cp.asarray(A.indices.astype(np.int32, copy=False)),
            cp.asarray(A.indptr.astype(np.int32, copy=False)))


def cusparse_matrix(A, arrays):
    """cupyx.scipy.sparse CSR sharing the device arrays (cuSPARSE SpMV through ``M @ v``)."""
    import cupyx.scipy.sparse as csp

    AA, JA, IA = arrays
    M = csp.csr_matrix((AA, JA, IA), shape=(A.rows, A.cols))
    try:
        M.has_canonical_format = True  # columns sorted and distinct by construction
    except (AttributeError, TypeError):
        pass
    return M


TABLE = {"kernels": GpuKernels, "device_csr": device_csr, "cusparse_matrix": cusparse_matrix}
