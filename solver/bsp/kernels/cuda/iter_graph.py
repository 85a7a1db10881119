"""numerics.iter_graph: POTENTIAL's kept-Jacobian Newton iteration replayed from a CUDA graph
(phase ``newton_iteration``, reference poisson.newton_iteration; docs/performance-iter-graph.md).

With numerics.iter_jacobian = step nearly every Newton iteration of a stage reuses the kept Jacobian:
F is not evaluated, b is formed alone and the kept factorization only substituted.  Launched one by
one that iteration is ~19 CuPy launches and one host read, host-bound (the GPU work is small).
``newton_iteration`` runs the same kernels on the same values from one graph per kind:

  ``stage``      (the first iteration of a stage, whose start's eigenpairs are still to be formed):
                 eigenvalues_nr from the last stage's levels + ipim + the density of the start
                 (numerics.eigen = twisted: eigenvalues_tw + ipim_t), then
  ``iteration``  (a later one, from the last iterate): newton_rhs, construct_rhs (b straight into the
                 resolve's input buffer of newton.BatchedGraph), GaussJordanCR.resolve's kernels
                 (bcr_rhs, bcr_backsub: captured here, not launched as the BatchedGraph's own graph),
                 x copied out, eigenvalues_nr + ipim + the density of the new iterate, newton_norms
                 with the stage tail, and the copy of its 7 doubles into pinned host memory.

The host then copies the graph's output block (V, N, eps, d eps/dx, chi: one allocation, one copy;
the results are views of it) and waits for the stream once: the one host read of the iteration.
The density: CuPy's einsum is a cuBLAS call, which CuPy refuses during a capture; the graph forms it
by kernel iter_density (iter_graph.cu), the same sum to rounding but not the same bits (H200: 2.6e-16
relative at most, about half the entries differ in the last bit; the einsum's DGEMM called through
_cublas.Blas differs from it likewise: measured and withdrawn, docs/performance-iter-graph.md).  Every
other kernel and argument is the launched path's, so the iteration gives the launched path's values
to that rounding: a run with the graph equals one without it to ~1e-13 (Newton counts equal), and is
bitwise repeatable.

Fixed buffers, from a private memory pool (nothing else allocates from it; the capture allocates
nothing: checked): the iterate V, N, eps (the levels of the start for ``stage``), rho, F, bflat, N_D
and the temporaries.  V / eps / N / rho are copied in per call (cudaMemcpyAsync); F, bflat and N_D
when their source array is another one than last time (a new kept Jacobian: every
iter_jacobian_steps steps; a bias change).  The kept factorization lives in the BatchedGraph's
GaussJordanCR buffers, rewritten in place by each new factorization, so the graphs stay valid; they
are dropped when that BatchedGraph, the static blocks or the eigen tables are other objects.  The
BatchedGraph must hold the factorization of the kept A (newton.solve_linsys_batched's test; where it
does not, after a resume, the kept A is factored first, launched) and the variants the captured ones (eigen
newton or twisted, linsys batched_cr with linsys_graph,
batched_blocks gauss_jordan); otherwise ``newton_iteration`` returns None and poisson._newton_loop
launches the iteration as before.

numerics.iter_overlap (``iter_prologue``, ``Early``): the ``stage`` graph's eigen launches (the start's
eigenpairs) launched on a second stream while the stage's BTE runs, into eps_p / chi_p, joined by
events; the stage's first iteration then replays ``stage_o`` (``stage`` less those launches): the same
kernels on the same values (docs/performance-iter-overlap.md).
"""
from __future__ import annotations

import math

import numpy as np

import cupy as cp

from solver.bsp import constants as K
from solver.bsp.kernels import (batched_blocks, eigen_reciprocal, eigen_variant, f64, ipim_variant, linsys_graph,
                                 linsys_variant)
from solver.bsp.kernels.cuda import _build
from solver.bsp.kernels.cuda import eigen as _eigen
from solver.bsp.kernels.cuda import newton as _newton

SOURCE = "iter_graph.cu"
OPTIONS = ("-std=c++14",)
BLOCK = 256
_D2H = 2  # cudaMemcpyDeviceToHost


def usable(model) -> bool:
    """Whether the variants are the ones the graph captures."""
    return (eigen_variant(model) in ("newton", "twisted") and linsys_variant(model) == "batched_cr"
            and linsys_graph(model) and batched_blocks(model) == "gauss_jordan")


def _holder(model, sysm, A):
    """newton.solve_linsys_batched's BatchedGraph of this system when it holds A's factorization (a
    GaussJordanCR with levels), else None."""
    entry = model.device_cache.get(("cuda.newton", "batched_graph", sysm.x_bc, batched_blocks(model)))
    if entry is None or entry[0] is not sysm or entry[2] is not A or not isinstance(entry[1], _newton.BatchedGraph):
        return None
    solver = entry[1]._solver
    return entry[1] if isinstance(solver, _newton.GaussJordanCR) and solver.levels else None


def density(rho, chi, out=None):
    """poisson.density by kernel iter_density: N (NX, NZ) = 2 sum rho chi^2 (to rounding)."""
    NX, NV, NS, NZ = chi.shape
    rho, chi = f64(cp, rho), f64(cp, chi)
    out = cp.empty((NX, NZ)) if out is None else out
    _build.launch(_build.function(SOURCE, "iter_density", OPTIONS), NX * NZ, BLOCK,
                  (rho, chi, np.int32(NX), np.int32(NV * NS), np.int32(NZ), out))
    return out


def newton_iteration(model, backend, sysm, jac, V, N, eps, rho, bflat, levels=None, before_read=None):
    """poisson.newton_iteration from a CUDA graph (``IterGraph``), or None where it cannot run."""
    if not usable(model) or (N is None and levels is None):
        return None
    bg = _holder(model, sysm, jac[1])
    if bg is None:
        # the solver holds no factorization of the kept A (a resumed run: the Jacobian came with the
        # checkpoint): factor it once, launched, as the launched path's first solve would; the factors
        # depend on A alone, so the graph then runs as in the uninterrupted run (byte-identical resume)
        _newton.solve_linsys_batched(model, backend, sysm, jac[1], cp.zeros((sysm.NX, sysm.NZ)), reuse=False)
        bg = _holder(model, sysm, jac[1])
        if bg is None:
            return None
    key = ("cuda.iter_graph", sysm.x_bc)
    cache = model.device_cache
    g = cache.get(key)
    if g is None or not g.valid(model, sysm, bg):
        g = cache[key] = IterGraph(model, sysm, bg)
    return g.run(model, backend, jac, V, N, eps, rho, bflat, levels, before_read)


def _run_launches(fn, *args):
    return fn(*args)


class IterGraph:
    """The fixed buffers and the two graphs (``stage``, ``iteration``) of one Newton system (see the
    module's text).  ``replays``: replays per kind; ``captures``: graphs captured."""

    def __init__(self, model, sysm, bg):
        NX, NZ, NS = sysm.NX, sysm.NZ, model.N_sbn
        n = NZ - 2
        self.sysm, self.bg = sysm, bg
        self.shape = (NX, NZ, NS)
        self.D0 = _newton._static(model, sysm)[0]
        self.eig = _eigen._static(model, n)  # kd, ko, V_c, pivmin
        self.ipim = ipim_variant(model)
        self.eigen = eigen_variant(model)
        self.reciprocal = eigen_reciprocal(model)
        self._pool, self._stream = self._device()
        P, E = NX * NZ, NX * K.N_VALLEYS * NS
        C = E * NZ
        with cp.cuda.using_allocator(self._pool.malloc):
            f = lambda *sh: cp.empty(sh, dtype=cp.float64)  # noqa: E731
            self.V, self.N, self.ND = f(NX, NZ), f(NX, NZ), f(NX, NZ)
            self.eps, self.rho = f(NX, K.N_VALLEYS, NS), f(NX, K.N_VALLEYS, NS)
            self.F, self.bflat, self.rhs = f(NX - 2, n, n), f(P), f(NX - 2, n)
            self.eps_p, self.chi_p = f(NX, K.N_VALLEYS, NS), f(NX, K.N_VALLEYS, NS, NZ)
            self.Dg, self.its = f(NX, K.N_VALLEYS, n), cp.empty((NX, K.N_VALLEYS, NS), dtype=cp.int32)
            # numerics.iter_overlap: the temporaries of the early prologue (side stream; Early)
            self.Dg_p, self.its_p = f(NX, K.N_VALLEYS, n), cp.empty((NX, K.N_VALLEYS, NS), dtype=cp.int32)
            self.out = f(2 * P + 2 * E + C + 7)
        self.sizes = (P, P, E, E, C)  # V, N, eps, d, chi in the output block, then the 7 norms
        o = self._views(self.out)
        self.o_V, self.o_N, self.o_eps, self.o_d, self.o_chi = o
        off = sum(self.sizes)
        self.o_nrm = self.out[off:off + 7]
        self.host = self._pinned(7)
        self.src: dict = {}  # the arrays F, bflat, N_D were copied from
        self.graphs: dict = {}
        # replays per kind: "stage" counts every first iteration of a stage, those of an early
        # prologue (graph "stage_o") also in "early"
        self.replays = {"stage": 0, "iteration": 0, "early": 0}
        self.captures = 0
        self._pending = None  # (V_start, levels) whose eigenpairs an Early launch put into eps_p, chi_p
        self._early = None

    # the device API (stood in by the CPU tests)
    def _device(self):
        return cp.cuda.MemoryPool(), cp.cuda.Stream(non_blocking=True)

    def _pinned(self, n):
        self._pinned_mem = cp.cuda.alloc_pinned_memory(8 * n)
        return np.frombuffer(self._pinned_mem, dtype=np.float64, count=n)

    def _to_host(self):
        cp.cuda.runtime.memcpyAsync(self.host.ctypes.data, self.o_nrm.data.ptr, 56, _D2H,
                                    cp.cuda.get_current_stream().ptr)

    def _wait(self):
        cp.cuda.get_current_stream().synchronize()

    def _read_mark(self):
        """An event recorded now on the current stream (after the iteration's copies to the host)."""
        ev = getattr(self, "_read_event", None)
        if ev is None:
            ev = self._read_event = cp.cuda.Event(block=False, disable_timing=True)
        ev.record()
        return ev

    def _wait_mark(self, mark):
        mark.synchronize()

    def _side(self):
        """numerics.iter_overlap: the stream of the early prologue (the highest priority: its few
        blocks go ahead of the BTE's waiting ones) and its two events (no timing)."""
        ev = lambda: cp.cuda.Event(block=False, disable_timing=True)  # noqa: E731
        try:  # CUDA clamps a priority beyond the device's range to its greatest
            stream = cp.cuda.Stream(non_blocking=True, priority=-1000)
        except TypeError:  # a CuPy without the argument: the default priority
            stream = cp.cuda.Stream(non_blocking=True)
        return stream, ev(), ev()

    def _capture(self, kind):
        """Run the launches once on the side stream (compiles; the results of this call), then
        capture them there."""
        _build.wait_jobs()  # no start-up warm-up thread launches during a capture
        cp.cuda.get_current_stream().synchronize()  # the inputs were copied in on the caller's stream
        with cp.cuda.using_allocator(self._pool.malloc), self._stream:
            _run_launches(self._launches, kind)  # on the side stream (as the capture)
            self._stream.synchronize()
            used = self._pool.used_bytes()
            self._stream.begin_capture()
            try:
                _run_launches(self._launches, kind)
            finally:
                graph = self._stream.end_capture()
        if self._pool.used_bytes() != used:
            raise RuntimeError("iter_graph: the capture allocated device memory")
        self.captures += 1
        return graph

    # ------------------------------------------------------------------
    def _views(self, block):
        NX, NZ, NS = self.shape
        shapes = ((NX, NZ), (NX, NZ), (NX, K.N_VALLEYS, NS), (NX, K.N_VALLEYS, NS), (NX, K.N_VALLEYS, NS, NZ))
        out, o = [], 0
        for size, sh in zip(self.sizes, shapes):
            out.append(block[o:o + size].reshape(sh))
            o += size
        return out

    def valid(self, model, sysm, bg) -> bool:
        n = sysm.NZ - 2
        return (self.sysm is sysm and self.bg is bg and self.D0 is _newton._static(model, sysm)[0]
                and self.eig is _eigen._static(model, n) and self.ipim == ipim_variant(model)
                and self.eigen == eigen_variant(model) and self.reciprocal == eigen_reciprocal(model)
                and self.shape[2] == model.N_sbn)

    def _eigen(self, V, levels, eps, chi, Dg=None, its=None):
        """The launches of kernels/cuda/eigen.eigen (numerics.eigen newton or twisted, warm) into eps, chi
        (Dg, its: the temporaries, the graph's own by default)."""
        NX, NZ, NS = self.shape
        Dg = self.Dg if Dg is None else Dg
        its = self.its if its is None else its
        n = NZ - 2
        kd, ko, Vc, pivmin = self.eig
        i32, f8 = np.int32, np.float64
        nt = NX * K.N_VALLEYS * NS
        if self.eigen == "twisted":
            r = self.reciprocal
            _build.launch(_eigen._tw_function("eigenvalues_tw", n, NS, _eigen.TW_BLOCK, rcp=r, carry=r), 2 * nt,
                          _eigen.TW_BLOCK,
                          (V, kd, ko, Vc, levels, f8(pivmin), i32(NX), i32(NZ), i32(NS), i32(1), eps, Dg, its))
            _build.launch(_eigen._tw_function("ipim_t", n, NS, _eigen.TW_IPIM_BLOCK, rcp=r, carry=r), nt,
                          _eigen.TW_IPIM_BLOCK,
                          (eps, Dg, ko, f8(pivmin), f8(1.0 / math.sqrt(self._dz)), i32(NX), i32(NZ), i32(NS),
                           chi))
            return
        _build.launch(_build.function("eigen_nr.cu", "eigenvalues_nr", _eigen.OPTIONS), nt, _eigen.BLOCK,
                      (V, kd, ko, Vc, levels, f8(pivmin), i32(n), i32(NX), i32(NZ), i32(NS), i32(1), eps, Dg, its))
        _build.launch(_eigen._function("ipim_" + self.ipim, n, self.ipim, NS, _eigen.BLOCK), nt, _eigen.BLOCK,
                      (eps, Dg, ko, f8(pivmin), f8(1.0 / math.sqrt(self._dz)), i32(NX), i32(NZ), i32(NS), chi))

    def _density(self, chi, out):
        density(self.rho, chi, out)

    def _launches(self, kind):
        NX, NZ, NS = self.shape
        i32, f8 = np.int32, np.float64
        if kind == "stage":  # the start's eigenpairs (from the last stage's levels in self.eps) and density
            self._eigen(self.V, self.eps, self.eps_p, self.chi_p)
        if kind in ("stage", "stage_o"):  # stage_o: the eigenpairs put into eps_p, chi_p by Early.launch
            self._density(self.chi_p, self.N)
            levels = self.eps_p
        else:
            levels = self.eps
        _build.launch(_build.function("newton.cu", "newton_rhs", _newton.OPTIONS), self.rhs.size, 128,
                      (self.F, self.V, self.N, self.ND, f8(self._cp), f8(self.sysm.cp_dz), i32(NX), i32(NZ), self.rhs))
        lo, up, b = self.bg.inputs[1:]
        _build.launch(_build.function("newton.cu", "construct_rhs", _newton.OPTIONS), NX * NZ, _newton.BLOCK,
                      (self.D0, self.F, self.rhs, self.bflat, f8(self.sysm.cp_dz), i32(NX), i32(NZ), b))
        x = self.bg._solver.resolve(lo, up, b, self.bg.dirm)
        _build.put(self.o_V, x.reshape(NX, NZ))
        self._eigen(self.o_V, levels, self.o_eps, self.o_chi)
        self._density(self.o_chi, self.o_N)
        e = self.o_eps
        _build.function("newton.cu", "newton_norms", _newton.OPTIONS)(
            (1,), (1024,), (self.o_V, self.V, self.o_N, self.N, self.o_V, i32(self.o_V.size), self.o_nrm,
                            i32(1), e, i32(NX), i32(e.size // NX), f8(self._dx), f8(2.0 * self._dx), self.o_d))
        self._to_host()

    def _inputs(self, model, backend, jac, bflat):
        """F, bflat and N_D copied in where their source is another array than last time."""
        for name, dst, src in (("F", self.F, jac[0]), ("bflat", self.bflat, _newton._device_bflat(model, bflat)),
                               ("ND", self.ND, model.on(backend, "N_D"))):
            if self.src.get(name) is not src:
                _build.put(dst, f64(cp, src).reshape(dst.shape))
                self.src[name] = src

    def run(self, model, backend, jac, V, N, eps, rho, bflat, levels, before_read=None):
        self._cp, self._dx, self._dz = model.cp, model.dx, model.dz
        self._inputs(model, backend, jac, bflat)
        prologue = N is None
        pending, self._pending = self._pending, None  # an early prologue serves one call at most
        # the eigenpairs in eps_p, chi_p are this start's only when launched early from these very
        # arrays (the caller has joined that launch: Early.join)
        early = prologue and pending is not None and pending[0] is V and pending[1] is levels
        _build.put(self.V, f64(cp, V))
        _build.put(self.rho, f64(cp, rho))
        if prologue:
            if not early:
                _build.put(self.eps, f64(cp, levels))
        else:
            _build.put(self.N, f64(cp, N))
            _build.put(self.eps, f64(cp, eps))
        kind = "stage_o" if early else "stage" if prologue else "iteration"
        graph = self.graphs.get(kind)
        if graph is None:
            graph = self.graphs[kind] = self._capture(kind)
        graph.launch()
        self.replays["stage" if early else kind] += 1
        self.replays["early"] += early
        block = cp.empty(self.out.size - 7)
        _build.put(block, self.out[:block.size])
        V_new, N_new, eps_new, d, chi_new = self._views(block)
        if before_read is None:
            self._wait()
        else:  # numerics.bte_speculate: enqueued behind the iteration, before the read; A_eps as the norms kernel
            # left it (read before the next replay rewrites it: the same stream); the host then waits for the
            # iteration's copies only, not for what the call launched
            mark = self._read_mark()
            before_read(eps_new, chi_new, d, self.o_nrm[5])
            self._wait_mark(mark)
        v = self.host.copy()
        return (V_new, eps_new, chi_new, N_new, _newton._norms_dict(model, v), bool(v[4] != 0.0),
                (d, float(v[5]), bool(v[6] != 0.0)))


def iter_prologue(model, backend, jacobian, levels):
    """poisson.iter_prologue on cupy (numerics.iter_overlap): the ``Early`` of this Newton system's
    IterGraph with its ready mark recorded on the caller's stream (the stage's inputs are complete
    there: call it before the BTE's launches), or None where the stage's first iteration will not be
    this IterGraph's ``stage`` replay from ``levels`` with the kept ``jacobian`` (no kept Jacobian,
    no levels, other variants, no IterGraph yet or one of another system or factorization: the first
    stages of a run, after a resume, after a fresh Jacobian's factorization into another solver)."""
    if jacobian is None or levels is None or not usable(model):
        return None
    from solver.bsp import poisson
    sysm = poisson._system(model, "dirichlet")
    bg = _holder(model, sysm, jacobian[1])
    g = model.device_cache.get(("cuda.iter_graph", sysm.x_bc))
    if bg is None or g is None or not g.valid(model, sysm, bg):
        return None
    g._cp, g._dx, g._dz = model.cp, model.dx, model.dz
    if g._early is None:
        g._early = Early(g)
    g._early.mark()
    return g._early


class Early:
    """numerics.iter_overlap: one stage's ITER prologue launched while the stage's BTE runs.

    The prologue of the ``stage`` graph (the start's eigenpairs, warm-started from the last stage's
    levels) depends only on the start V_start (Simulation._iter_start) and those levels, both known
    before the stage's BTE; only the start's density needs the BTE's rho.  So, per stage:

      ``mark``    (before the BTE's launches) records ``ready`` on the caller's (main) stream: every
                  launch that writes the inputs, and every use of the buffers below by the last
                  stage's replays, is before it;
      ``launch``  (after the BTE's launches: their host time hides this one's) makes the side stream
                  wait for ``ready``, then forms there V_start = start() (poisson.iter_start's fast
                  path: its output from the side stream's pool arena) and its eigenpairs by the
                  stage graph's own eigen launches into the IterGraph's eps_p, chi_p (temporaries
                  Dg_p, its_p, the graph's Dg, its untouched), records ``done`` there and leaves
                  (V_start, levels) pending on the IterGraph;
      ``join``    (before ITER, whatever ITER then does) makes the main stream wait for ``done``: no
                  launch of ITER (the ``stage`` graph writes eps_p, chi_p too) runs before the side
                  stream's writes are complete;
      ``close``   (after ITER, and after any failure of the stage) joins if not yet joined and
                  drops the pending pair.

    IterGraph.run takes the pending pair only for the first iteration of a stage from those very
    arrays (identity) and replays graph ``stage_o`` (the ``stage`` graph less the eigen launches);
    anything else clears it and runs as without it.  The same kernels on the same values: the same
    bits as the ``stage`` graph, only the kernels' order on the GPU differs.  The side stream has
    the greatest priority where CuPy's Stream takes one (its ~40 small blocks go ahead of the BTE's
    waiting ones)."""

    def __init__(self, g):
        self.g = g
        self.stream, self.ready, self.done = g._side()
        self.launched = False

    # the device API (stood in by the CPU tests)
    def _record(self, event, stream=None):
        event.record(stream)

    def _wait_event(self, stream, event):
        (cp.cuda.get_current_stream() if stream is None else stream).wait_event(event)

    def mark(self):
        self.close()
        self._record(self.ready)

    def launch(self, start, levels, timer=None):
        """V_start = start() and its eigenpairs from ``levels`` on the side stream (see the class's
        text); V_start, or None (no prediction: nothing launched, nothing pending)."""
        from solver.bsp.poisson import _phase
        g = self.g
        self._wait_event(self.stream, self.ready)
        with self.stream, _phase(timer, "ITER_prologue"):
            V = start()
            if V is None:
                return None
            g._eigen(f64(cp, V), f64(cp, levels), g.eps_p, g.chi_p, g.Dg_p, g.its_p)
            self._record(self.done, self.stream)
        self.launched = True
        g._pending = (V, levels)
        return V

    def join(self):
        if self.launched:
            self._wait_event(None, self.done)
            self.launched = False

    def close(self):
        """The main stream joined (if not yet), nothing pending; again: nothing."""
        self.join()
        self.g._pending = None
