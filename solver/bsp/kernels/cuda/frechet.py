"""CUDA fast path of the Frechet phase (frechet.cu): ``frechet`` takes exactly the arguments of
poisson.frechet and returns F (NX-2, NZ-2, NZ-2) from ONE launch, one thread per entry (the array
code needs ~15 launches: gathers, concatenations and a batched matmul)."""
from __future__ import annotations

import numpy as np

import cupy as cp

from solver.bsp.kernels import f64
from solver.bsp.kernels.cuda import _build

SOURCE = "frechet.cu"
OPTIONS = ("-std=c++14",)
BLOCK = 256


def frechet(model, backend, eps, chi, rho, drho=None):
    """poisson.frechet on the device, one launch."""
    eps, chi, rho = f64(cp, eps), f64(cp, chi), f64(cp, rho)
    NX, _, NS, NZ = chi.shape
    F = cp.empty((NX - 2, NZ - 2, NZ - 2))
    dr = f64(cp, drho) if drho is not None else rho
    _build.launch(_build.function(SOURCE, "frechet_kernel", OPTIONS), F.size, BLOCK,
                  (eps, chi, rho, dr, np.int32(drho is not None), np.int32(NX), np.int32(NZ), np.int32(NS), F))
    return F
