"""The Newton system as a dense row-equilibrated matrix on the device, solved by cuSOLVER's
getrf/getrs (``cupy.linalg.solve``): variant ``numerics.linsys: dense`` of newton.py, kept as the
baseline of the benchmarks (44 ms per solve at 65x129 on the H200 against 5-10 ms for batched_cr,
docs/performance-iter-next.md).  The static
part (Laplacian, boundary rows) is built once from poisson.NewtonSystem and the Frechet blocks are
added on the block diagonal.  The matrix has NX NZ unknowns: dense LU costs 2/3 (NX NZ)^3 flop."""
from __future__ import annotations

import cupy as cp


def _static(model, sysm):
    key = ("cuda.dense", sysm.x_bc)
    cache = model.device_cache
    if key not in cache or cache[key][0] is not sysm:
        cache[key] = (sysm, cp.asarray(sysm.dense_static()), cp.asarray(sysm.interior),
                      cp.asarray(sysm.dirichlet_flat))
    return cache[key][1:]


def construct_linsys(model, backend, sysm, F, rhs_int, bflat):
    """Dense row-equilibrated (A, b) on the device."""
    NX, NZ = sysm.NX, sysm.NZ
    A0, interior, _ = _static(model, sysm)
    A = A0.copy()
    A4 = A.reshape(NX, NZ, NX, NZ)
    ii = cp.arange(1, NX - 1)
    A4[ii, 1:-1, ii, 1:-1] += sysm.cp_dz * F  # Frechet blocks on the block diagonal
    b = cp.asarray(bflat).copy()
    b[interior] = rhs_int.ravel()
    s = 1.0 / cp.diagonal(A)
    A *= s[:, None]
    b *= s
    return A, b


def solve_linsys(model, backend, sysm, A, b, reuse=False):
    """x of A x = b by cuSOLVER LU (getrf/getrs), Dirichlet entries set exactly (``reuse``: ignored)."""
    x = cp.linalg.solve(A, b)
    d = _static(model, sysm)[2]
    x[d] = b[d]
    return x
