"""numerics.bte_graph: one RK stage of the BTE replayed from a CUDA graph (cupy, numerics.bte_kernels fast).

Without it a stage costs the host ~1 ms of Python and launches (the wrappers of scat_gain,
scat_loss, WENO_x and the fused stage RK_wphi with their conversions, allocations and dummies) while
the GPU, idle after ITER's host read, waits for them.  ``stage`` runs the same kernels on the same
inputs (so the results equal bte.advance's fused path bit for bit): scat_gain and scat_loss
(scattering.cu), WENO_x (weno.cu; not with numerics.overlap, whose x term is copied in),
bsp_wphi_rk + bsp_rho (the stage update with the w and phi terms and DENS), captured once per
stage coefficient set and buffer arrangement as one graph and replayed by one cudaGraphLaunch.

Fixed buffers (``StageGraph``, one per model and Phi shape, cached on the model):

* Phi: a ring of 3 arrays.  The stage reads Phi (and Phi^0 for s > 0) and writes Phi^{s+1} into the
  slot that holds neither, and returns that slot: within a time step the stages only ever see the
  ring's own arrays, so the big arrays are never copied (only a Phi from elsewhere, the first step's
  or a resumed one, is copied into a free slot once).  A Phi returned by a stage stays valid until
  two stages later (it is overwritten when its slot is the free one again).
* rho, PhiHat: a ring of 2 pairs (input slot, output slot) likewise.
* eps, deps_dx, W and rho_eq: copied into the graph's arrays each stage (cudaMemcpyAsync; small).
* alpha = A_eps A_3 and dt, the only scalars that change between stages, are written into pinned
  host memory and copied to the device by the graph's first node; bsp_wphi_rk reads them there
  (``from_scal``).  The host writes them only after the previous replay has finished (an event).
  With A_eps still on the device (numerics.bte_speculate: the stage launched before ITER's host read)
  kernel bsp_scal writes them there instead, before a graph captured without that node (a key of its own).
* the x term, G and Lc: the graph's own arrays.

A graph is captured on a side stream the first time its key (stage, ring slots, scattering, closed
contacts, x term given, mechanism subset) is seen, after one uncaptured run of the same launches
(kernel compiles and cached device tables happen there, not during the capture); every allocation
during the capture would come from the object's private memory pool, and there must be none
(checked).  A time step uses 3 graphs; the rings' rotation makes at most 12 keys in a run (24 with
numerics.bte_speculate).
"""
from __future__ import annotations

import numpy as np

import cupy as cp

from solver.bsp.kernels.cuda import _build, rk, scattering, weno

_H2D = 1  # cudaMemcpyHostToDevice


def usable(Phi) -> bool:
    """Whether the graph can run this Phi (float64; a phi line that fits the fused kernel)."""
    NW, NPHI = Phi.shape[-2:]
    return Phi.dtype == np.float64 and rk.rows_per_block(NW, NPHI) > 0


def stage(model, backend, s, Phi0, Phi, sd, dt, scat, dx=None):
    """bte.advance's fused stage s from the graph: (Phi^{s+1}, rho, PhiHat), arrays of the graph's rings.
    ``sd``: bte.StageData; ``scat``: include G - L; ``dx``: the x term already formed (numerics.overlap)."""
    key = ("cuda.bte_graph", Phi.shape)
    cache = model.device_cache
    if key not in cache:
        cache[key] = StageGraph(Phi.shape)
    return cache[key].run(model, backend, s, Phi0, Phi, sd, dt, scat, dx)


def _owned(ring, a):
    """The slot of ``ring`` whose array ``a`` is (same memory, shape, dtype, C order), else None."""
    for k, b in enumerate(ring):
        if a.data.ptr == b.data.ptr and a.shape == b.shape and a.dtype == b.dtype and a.flags.c_contiguous:
            return k
    return None


class StageGraph:
    """The fixed buffers and the captured graphs of one Phi shape (see the module's text)."""

    def __init__(self, shape):
        NX, NV, NS, NW, NPHI = shape
        self._pool = cp.cuda.MemoryPool()
        self._stream = cp.cuda.Stream(non_blocking=True)
        with cp.cuda.using_allocator(self._pool.malloc):
            f = lambda *sh: cp.empty(sh, dtype=cp.float64)  # noqa: E731
            self.phi = [f(*shape) for _ in range(3)]
            self.dens = [(f(NX, NV, NS), f(NX, NV, NS, NW)) for _ in range(2)]  # (rho, PhiHat)
            self.tx, self.G, self.Lc = f(*shape), f(NX, NV, NS, NW), f(NX, NV, NS, NW)
            self.eps, self.deps, self.W = f(NX, NV, NS), f(NX, NV, NS), f(NX, NV, NS, NV, NS)
            self.rho_eq = f(NX, NV, NS)
            self.scal = f(2)  # (alpha, dt) on the device
        self._pinned = cp.cuda.alloc_pinned_memory(16)
        self.host = np.frombuffer(self._pinned, dtype=np.float64, count=2)
        self._done = cp.cuda.Event(disable_timing=True)
        self.graphs: dict = {}

    def run(self, model, backend, s, Phi0, Phi, sd, dt, scat, dx):
        ip = _owned(self.phi, Phi)
        i0 = ip if s == 0 else _owned(self.phi, Phi0)
        if s > 0 and i0 is None:  # Phi^0 from elsewhere: into a slot Phi does not use
            i0 = next(k for k in range(3) if k != ip)
            _build.put(self.phi[i0], Phi0)
        if ip is None:
            ip = i0 if s == 0 and i0 is not None else next(k for k in range(3) if k != i0)
            _build.put(self.phi[ip], Phi)
            if s == 0:
                i0 = ip
        io = next(k for k in range(3) if k not in (ip, i0))
        idn = next((k for k, (r, ph) in enumerate(self.dens)
                    if _owned([r], sd.rho) == 0 and _owned([ph], sd.PhiHat) == 0), None)
        if idn is None:
            idn = 0
            _build.put(self.dens[0][0], sd.rho)
            _build.put(self.dens[0][1], sd.PhiHat)
        if scat:
            _build.put(self.eps, sd.eps)
            _build.put(self.W, sd.W)
        _build.put(self.deps, sd.deps_dx)
        if dx is not None:
            _build.put(self.tx, dx)
        elif not sd.closed:
            _build.put(self.rho_eq, sd.rho_eq)
        dev = rk.on_device(sd.A_eps)  # numerics.bte_speculate: alpha formed on the device, no pinned copy
        if dev:
            rk.scal_into(model, sd.A_eps, dt, self.scal)
        else:
            self._done.synchronize()  # the previous replay has copied its scalars
            self.host[0] = float(sd.A_eps * model.A3)  # as weno.weno_phi forms alpha
            self.host[1] = dt
        mkey = None if sd.mechanisms is None else tuple(sorted(set(int(m) for m in sd.mechanisms)))
        key = (s, ip, i0, io, idn, bool(scat), bool(sd.closed), dx is not None, mkey, dev)
        graph = self.graphs.get(key)
        launches = lambda: self._launches(model, backend, key, sd.mechanisms)  # noqa: E731
        if graph is None:
            graph = self.graphs[key] = self._capture(launches, scalars=not dev)
        graph.launch()
        if not dev:
            self._done.record()
        rho, PhiHat = self.dens[1 - idn]
        return self.phi[io], rho, PhiHat

    def _scalars(self, stream):
        cp.cuda.runtime.memcpyAsync(self.scal.data.ptr, self._pinned.ptr, 16, _H2D, stream.ptr)

    def _launches(self, model, backend, key, mechanisms):
        """The stage's launches on the current stream, all on the fixed buffers."""
        s, ip, i0, io, idn, scat, closed, dx_given = key[:8]
        rho, PhiHat = self.dens[idn]
        if not dx_given:
            r = None if closed else (self.rho_eq[0], self.rho_eq[-1], rho[0], rho[-1])
            weno.x_into(model, backend, self.phi[ip], r, self.tx)
        G = Lc = None
        if scat:
            G, Lc = self.G, self.Lc
            scattering.gain_into(model, backend, PhiHat, self.eps, self.W, mechanisms, G)
            scattering.loss_into(model, backend, self.eps, self.W, mechanisms, Lc)
        r1, ph1 = self.dens[1 - idn]
        rk.stage_into(model, backend, s, None if s == 0 else self.phi[i0], self.phi[ip], G, Lc, self.tx, self.deps,
                      self.phi[io], r1, ph1, scal=self.scal)

    def _capture(self, launches, scalars=True):
        """Run ``launches`` once on the current stream (compiles, cached tables), then capture them,
        after the scalar copy (``scalars``; else the caller has written them into the device array), on the
        side stream: the graph."""
        _build.wait_jobs()  # no start-up warm-up thread launches during a capture
        cur = cp.cuda.get_current_stream()
        with cp.cuda.using_allocator(self._pool.malloc):
            if scalars:
                self._scalars(cur)
            launches()
            cur.synchronize()
            used = self._pool.used_bytes()
            with self._stream:
                self._stream.begin_capture()
                try:
                    if scalars:
                        self._scalars(self._stream)
                    launches()
                finally:
                    graph = self._stream.end_capture()
        if self._pool.used_bytes() != used:
            raise RuntimeError("bte_graph: the capture allocated device memory (its addresses would not stay the graph's)")
        return graph
