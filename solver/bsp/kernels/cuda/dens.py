"""density_probe (dens.density_probe's fast path) and scalars_probe (dens.scalars_probe's).

density_probe: the stage's density check numbers by one launch of
kernel density_probe (dens.cu) into a device buffer kept per model, then on their way to the host
(Backend.to_host_async: an asynchronous copy into pooled pinned memory).  The array reference costs
the host four CuPy calls and a pinned allocation per stage (~0.3 ms on the H200 host, where the step
is host-bound: docs/performance.md §16); this is one launch and one copy.  The sum may differ from the
reference's in the last bits (another summation order); the check only asks whether it is finite and
whether the minimum is negative."""
from __future__ import annotations

import numpy as np

import cupy as cp

from solver.bsp.kernels import f64
from solver.bsp.kernels.cuda import _build

SOURCE = "dens.cu"
OPTIONS = ("-std=c++14",)
NT = 256


def density_probe(model, backend, rho):
    """dens.density_probe on the device (one launch, one asynchronous copy)."""
    rho = f64(cp, rho)
    NX = rho.shape[0]
    key = ("cuda.dens", "probe")
    buf = model.device_cache.get(key)
    if buf is None:  # one buffer: the copy of a stage's numbers precedes the next launch on the stream
        buf = model.device_cache[key] = cp.empty(2)
    _build.function(SOURCE, "density_probe", OPTIONS, {"NT": NT})(
        (1,), (NT,), (rho, np.int32(NX), np.int32(rho.size // NX), buf))
    return backend.to_host_async(buf)


def scalars_probe(model, backend, rho, Phi):
    """dens.scalars_probe on the device: one launch of kernel scalars_probe (dens.cu) into a buffer kept per
    model, one read; the contact nodes' two (min, max) pairs combined on the host (np.minimum/maximum: a NaN stays)."""
    rho, Phi = f64(cp, rho), f64(cp, Phi)
    NX, NV, NS, NW, NPHI = Phi.shape
    key = ("cuda.dens", "scalars")
    buf = model.device_cache.get(key)
    if buf is None or buf.size != 2 * NX + 4:
        buf = model.device_cache[key] = cp.empty(2 * NX + 4)
    a1 = f64(cp, model.on(backend, "a1"))
    _build.function(SOURCE, "scalars_probe", OPTIONS, {"NT": NT})(
        (NX,), (NT,), (rho, Phi, a1, np.int32(NX), np.int32(rho.size // NX), np.int32(NS), np.int32(NW * NPHI),
                      np.float64(model.dw * model.dphi), buf))
    h = backend.to_numpy(buf)
    return np.concatenate([h[:2 * NX], [np.minimum(h[2 * NX], h[2 * NX + 2]), np.maximum(h[2 * NX + 1], h[2 * NX + 3])]])
