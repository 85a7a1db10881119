"""CUDA gain term of the collision integral: the RawKernel of ``gain.cu`` per dtype."""
from __future__ import annotations

from importlib.resources import files

import cupy as cp
import numpy as np

TILE = 512  # the TILE of gain.cu
_KERNELS = {}


def _kernel(dtype):
    key = np.dtype(dtype).name
    if key not in _KERNELS:
        real = "double" if key == "float64" else "float"
        src = files(__package__).joinpath("gain.cu").read_text()
        src = src.replace("REAL", real).replace("gain_kernel_T", f"gain_kernel_{key}")
        _KERNELS[key] = cp.RawKernel(src, f"gain_kernel_{key}", options=("-std=c++11",))
    return _KERNELS[key]


def gain(op, f):
    """The uncorrected gain on the whole mesh, (N, N, N) on the device."""
    d = op.device_cache.get("cupy")
    if d is None:
        t = op.table
        d = op.device_cache["cupy"] = dict(
            sidx=cp.asarray(op.sidx_m), ps=cp.asarray(op.ps.reshape(-1)), M=cp.asarray(op.Mflat),
            coef=cp.asarray(op.coef.astype(op.dtype)), ptr=cp.asarray(t.ptr),
            n=cp.asarray(t.n.astype(np.int32).reshape(-1)), w=cp.asarray(t.w.astype(op.dtype)))
    N = op.N
    out = cp.zeros(N ** 3, dtype=op.dtype)
    tiles = -(-op.max_half_nnz // TILE)
    _kernel(op.dtype)(((2 * N - 1) ** 3, tiles), (256,),
                      (op.pad(f), d["sidx"], d["ps"], d["M"], d["coef"], d["ptr"], d["n"], d["w"], out,
                       np.int32(N), np.int32(op.P)))
    return out.reshape(N, N, N)


TABLE = {"gain": gain}
