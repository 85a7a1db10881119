"""cuBLAS called through ctypes on one stream: the batched LU solve and GEMM of newton.BatchedGraph.

CuPy 14 refuses every cuBLAS call while the current stream captures a CUDA graph (its
``cublas.setStream`` raises NotImplementedError: a blanket guard; cuBLAS itself supports stream
capture, https://docs.nvidia.com/cuda/cublas/#cuda-graphs-support).  ``Blas(stream)`` therefore
calls the cuBLAS library that CuPy loaded with a handle of its own, bound to ``stream`` once, with
its own workspace (``cublasSetWorkspace``: no allocation by cuBLAS during a capture):

``gesv(a, b)``    the solve of ``cupy.cublas.batched_gesv`` (same steps: column-major copies,
                  getrfBatched with partial pivoting, getrsBatched), a (m, n, n), b (m, n, k);
``matmul(a, b, out=None)``  a (m, p, q) @ b (m, q, r) by one cublasDgemmStridedBatched (each
                  matrix row- or column-major, any batch stride, so the strided slices and the
                  transposed gesv results of blocktri_batched need no copies), into ``out`` (a
                  row-major view, any row and batch stride: the blocks of newton.GaussJordanCR in
                  place) or a new C-contiguous (m, p, r).
float64 only.  The arrays are CuPy arrays; every launch goes to ``stream`` (the caller makes it
the current stream, so that CuPy's own kernels in between go there too).
"""
from __future__ import annotations

import ctypes

import numpy as np

import cupy as cp
from cupy import cublas as _cupy_cublas  # noqa: F401  (loads libcublas into the process)

WORKSPACE_BYTES = 32 << 20  # cuBLAS's recommended workspace for Hopper is 32 MiB
_OP_N, _OP_T = 0, 1
_F64 = 8


def _library():
    """The libcublas that CuPy loaded (found in /proc/self/maps), else the CUDA 12 soname."""
    cp.cuda.device.get_cublas_handle()  # make sure CuPy has loaded and initialised it
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "/libcublas.so" in path:
                    return ctypes.CDLL(path)
    except OSError:
        pass
    return ctypes.CDLL("libcublas.so.12")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed: cuBLAS status {status}")


def _layout(x):
    """(op, ld, batch stride) of a stack x (m, rows, cols) for the column-major GEMM of matmul: row-major
    matrices (unit column stride) are their transposes in column-major order (op N, ld = the row
    stride), column-major ones (unit row stride) need op T (ld = the column stride); None for any
    other layout (then a copy)."""
    m, rows, cols = x.shape
    s0, s1, s2 = (s // _F64 for s in x.strides)
    if x.dtype != np.float64 or s0 < 0 or any(s % _F64 for s in x.strides):
        return None
    if (cols == 1 or s2 == 1) and s1 >= max(1, cols):
        return _OP_N, s1, s0
    if (rows == 1 or s1 == 1) and s2 >= max(1, rows):
        return _OP_T, s2, s0
    return None


class Blas:
    """cuBLAS handle bound to ``stream`` with a private workspace (one per BatchedGraph, kept for
    the life of the process)."""

    def __init__(self, stream):
        lib = _library()
        self._lib = lib
        self.handle = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        _check(lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream.ptr)), "cublasSetStream")
        self.workspace = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
        _check(lib.cublasSetWorkspace_v2(self.handle, ctypes.c_void_p(self.workspace.data.ptr),
                                         ctypes.c_size_t(WORKSPACE_BYTES)), "cublasSetWorkspace")
        self._one, self._zero = ctypes.c_double(1.0), ctypes.c_double(0.0)

    def gesv(self, a, b):
        """x of a x = b for stacks a (m, n, n), b (m, n, k): LU with partial pivoting per block."""
        lib = self._lib
        m, n = a.shape[0], a.shape[-1]
        k = b.shape[-1]
        at = cp.ascontiguousarray(a.transpose(0, 2, 1))  # column-major blocks, always a copy (n > 1)
        bt = cp.ascontiguousarray(b.transpose(0, 2, 1))
        if at.data.ptr == a.data.ptr:
            at = at.copy()
        if bt.data.ptr == b.data.ptr:
            bt = bt.copy()
        a_step, b_step = n * n * _F64, n * k * _F64
        a_ptrs = cp.arange(at.data.ptr, at.data.ptr + a_step * m, a_step, dtype=cp.uintp)
        b_ptrs = cp.arange(bt.data.ptr, bt.data.ptr + b_step * m, b_step, dtype=cp.uintp)
        pivot = cp.empty((m, n), dtype=cp.int32)
        dinfo = cp.empty((m,), dtype=cp.int32)
        vp = ctypes.c_void_p
        _check(lib.cublasDgetrfBatched(self.handle, ctypes.c_int(n), vp(a_ptrs.data.ptr), ctypes.c_int(n),
                                       vp(pivot.data.ptr), vp(dinfo.data.ptr), ctypes.c_int(m)), "cublasDgetrfBatched")
        info = ctypes.c_int(0)
        _check(lib.cublasDgetrsBatched(self.handle, ctypes.c_int(_OP_N), ctypes.c_int(n), ctypes.c_int(k),
                                       vp(a_ptrs.data.ptr), ctypes.c_int(n), vp(pivot.data.ptr), vp(b_ptrs.data.ptr),
                                       ctypes.c_int(n), ctypes.byref(info), ctypes.c_int(m)), "cublasDgetrsBatched")
        if info.value != 0:
            raise RuntimeError(f"cublasDgetrsBatched: parameter {-info.value} had an illegal value")
        return bt.transpose(0, 2, 1)

    def matmul(self, a, b, out=None):
        """a (m, p, q) @ b (m, q, r) -> ``out`` (m, p, r) with unit column stride, or a new
        C-contiguous array; float64."""
        m, p, q = a.shape
        r = b.shape[2]
        if b.shape[:2] != (m, q):
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
        if out is None:
            out = cp.empty((m, p, r))
        if out.size == 0:
            return out
        lc = _layout(out)
        if out.shape != (m, p, r) or lc is None or lc[0] != _OP_N:
            raise ValueError(f"matmul: out {out.shape} {out.strides} is not a row-major (m, p, r) stack")
        la = _layout(a)
        if la is None:
            a = cp.ascontiguousarray(a, dtype=cp.float64)
            la = _layout(a)
        lb = _layout(b)
        if lb is None:
            b = cp.ascontiguousarray(b, dtype=cp.float64)
            lb = _layout(b)
        # row-major C = A B is column-major C^T = B^T A^T: (r x p) = (r x q) (q x p)
        ll, i = ctypes.c_longlong, ctypes.c_int
        _check(self._lib.cublasDgemmStridedBatched(
            self.handle, i(lb[0]), i(la[0]), i(r), i(p), i(q),
            ctypes.byref(self._one), ctypes.c_void_p(b.data.ptr), i(lb[1]), ll(lb[2]),
            ctypes.c_void_p(a.data.ptr), i(la[1]), ll(la[2]),
            ctypes.byref(self._zero), ctypes.c_void_p(out.data.ptr), i(lc[1]), ll(lc[2]), i(m)),
            "cublasDgemmStridedBatched")
        return out
