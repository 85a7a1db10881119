"""CUDA fast paths of the Newton step of ITER (newton.cu, cyclic_reduction.cu; solver/bsp/blocktri.py
is the array reference and documents the algorithm).  Each takes exactly the arguments of the
poisson function of the same name.

``construct_linsys``  the row-equilibrated block form (D (NX, NZ, NZ), lo, up, b (NX, NZ)) in ONE
                      launch: one thread per block entry adds c_p dz F to the static blocks (built
                      once from poisson.NewtonSystem by blocktri.BlockSystem) and divides by the row
                      diagonal.  No dense (NX NZ)^2 matrix.
``solve_linsys``      block cyclic reduction (``solve_linsys_cr``, blocktri.solve_cr): log2(NX)
                      levels, each one launch of cr_eliminate (a thread block per eliminated column:
                      NZ Gauss-Jordan exchange steps with implicit partial pivoting on
                      [B | A | C | r], 3 NZ + 1 columns) and one of cr_update (a thread per entry of
                      the kept blocks), then one single-block cr_backsub.  Dirichlet entries are set
                      to b exactly, as poisson.solve_linsys does.
``newton_rhs``        the interior rhs -c_p (N - N_D) + c_p dz F V in one launch, and
``newton_norms``      the four Newton norms + all(isfinite(x)) in one reduction and ONE host read.

Variant ``numerics.linsys`` (construct_linsys and solve_linsys): ``block_cr`` (the above; NZ <=
MAX_NZ), ``batched_cr`` (the same block form from construct_kernel, solved by
blocktri_batched.solve_cr_batched: block cyclic reduction over cuBLAS batched LU
(``cupy.cublas.batched_gesv``) and strided-batched GEMM, any NZ), ``dense`` (dense.py: cuSOLVER LU
of the dense matrix; kept as the baseline of the benchmarks), ``auto`` (default) = block_cr where
NZ <= MAX_NZ, batched_cr otherwise.  batched_cr's own keys: ``numerics.linsys_graph`` (default
true: the solve replayed from one CUDA graph per Newton system, ``BatchedGraph``, cuBLAS through
_cublas.py) and ``numerics.batched_blocks`` (lu = cuBLAS getrf/getrsBatched, gauss_jordan = the
block inverses of batched_inverse.cu's gj_inverse times the right-hand sides by one GEMM).
"""
from __future__ import annotations

import math

import numpy as np

import cupy as cp
from cupy import cublas

from solver.bsp import blocktri, blocktri_batched
from solver.bsp.kernels import batched_blocks, f64, linsys_graph, linsys_variant
from solver.bsp.kernels.cuda import _build, _cublas, dense

MAX_NZ = blocktri.MAX_NZ  # the solve kernels' pivot key holds the row in 7 bits
CR_NWARPS = 32  # warps per cr_eliminate block (capped at NZ)
GJ_NWARPS = 32  # warps per gj_inverse block (capped at n)
GJ_MAX_N = 511  # gj_inverse's pivot key holds the row in 9 bits
OPTIONS = ("-std=c++14",)
BLOCK = 256


def _static(model, sysm):
    """Device copies of the static block form (D0, lo0, up0, the Dirichlet mask as bool), cached on
    the model per boundary condition."""
    key = ("cuda.newton", sysm.x_bc)
    cache = model.device_cache
    if key not in cache or cache[key][0] is not sysm:
        bs = blocktri.block_system(model, sysm)
        cache[key] = (sysm, cp.asarray(bs.D0), cp.asarray(bs.lo0), cp.asarray(bs.up0),
                      cp.asarray(bs.dirichlet.astype(bool)))
    return cache[key][1:]


def _dense(model) -> bool:
    return linsys_variant(model) == "dense"


def construct_linsys(model, backend, sysm, F, rhs_int, bflat):
    """((D, lo, up), b): the row-equilibrated block form on the device (variants block_cr and
    batched_cr), or the dense form of dense.py (variant dense)."""
    if _dense(model):
        return dense.construct_linsys(model, backend, sysm, F, rhs_int, bflat)
    NX, NZ = sysm.NX, sysm.NZ
    D0, lo0, up0, _ = _static(model, sysm)
    D = cp.empty((NX, NZ, NZ))
    lo = cp.empty((NX, NZ))
    up = cp.empty((NX, NZ))
    b = cp.empty((NX, NZ))
    _build.launch(_build.function("newton.cu", "construct_kernel", OPTIONS), D.size, BLOCK,
                  (D0, lo0, up0, f64(cp, F), f64(cp, rhs_int), f64(cp, bflat), np.float64(sysm.cp_dz),
                   np.int32(NX), np.int32(NZ), D, lo, up, b))
    return (D, lo, up), b


def solve_linsys(model, backend, sysm, A, b):
    """x (NX NZ,) of the system construct_linsys built: block cyclic reduction by the CR kernels
    (variant block_cr) or over batched LU / GEMM (batched_cr), or cuSOLVER LU (dense); Dirichlet
    entries equal b exactly."""
    v = linsys_variant(model)
    if v == "dense":
        return dense.solve_linsys(model, backend, sysm, A, b)
    if v == "batched_cr":
        return solve_linsys_batched(model, backend, sysm, A, b)
    return solve_linsys_cr(model, backend, sysm, A, b)


def gj_inverse(a):
    """inv (m, n, n), C-contiguous, of a stack a (m, n, n): kernel gj_inverse (batched_inverse.cu),
    one thread block of min(GJ_NWARPS, n) warps per matrix (n <= GJ_MAX_N)."""
    m, n, _ = a.shape
    if n > GJ_MAX_N:
        raise ValueError(f"gj_inverse: n <= {GJ_MAX_N} (the pivot key holds the row in 9 bits), not {n}")
    a = cp.ascontiguousarray(a, dtype=cp.float64)
    nw = max(1, min(GJ_NWARPS, n))
    out = cp.empty((m, n, n))
    if m:
        _build.function("batched_inverse.cu", "gj_inverse", OPTIONS, {"N": n, "NWARPS": nw})((m,), (nw * 32,), (a, out))
    return out


def _block_solver(model, blas=None):
    """(gesv, matmul) of the batched solve: numerics.batched_blocks lu = cuBLAS getrf/getrsBatched
    (CuPy's batched_gesv, or _cublas.Blas inside a graph), gauss_jordan = gj_inverse then one
    GEMM; the products by CuPy's matmul, or Blas.matmul inside a graph."""
    matmul = cp.matmul if blas is None else blas.matmul
    if batched_blocks(model) == "gauss_jordan":
        return (lambda a, rhs: matmul(gj_inverse(a), rhs)), matmul
    return (cublas.batched_gesv if blas is None else blas.gesv), matmul


def solve_linsys_batched(model, backend, sysm, A, b):
    """x (NX NZ,) by blocktri_batched.solve_cr_batched on the device, the batched LU solves by
    cuBLAS getrfBatched / getrsBatched (``cupy.cublas.batched_gesv``, also beyond cupy.linalg.solve's
    batched limit of 256), no host synchronisation.  ``numerics.linsys_graph`` (default true): the
    solve replayed from one CUDA graph per (system, NX, NZ) (``BatchedGraph``), else the ~180 CuPy
    launches of the array code each time."""
    D, lo, up = A
    if not linsys_graph(model):
        gesv, matmul = _block_solver(model)
        dirm = _static(model, sysm)[3]
        return blocktri_batched.solve_cr_batched(cp, D, lo, up, b, dirm, gesv=gesv, matmul=matmul).ravel()
    return _batched_graph(model, sysm).solve(D, lo, up, b)


def _batched_graph(model, sysm):
    """The BatchedGraph of this Newton system and numerics.batched_blocks, cached on the model
    (rebuilt for a new system)."""
    key = ("cuda.newton", "batched_graph", sysm.x_bc, batched_blocks(model))
    cache = model.device_cache
    if key not in cache or cache[key][0] is not sysm:
        cache[key] = (sysm, BatchedGraph(model, sysm.NX, sysm.NZ, _static(model, sysm)[3]))
    return cache[key][1]


def _solve_batched(solver, D, lo, up, b, dirm):
    gesv, matmul = solver
    return blocktri_batched.solve_cr_batched(cp, D, lo, up, b, dirm, gesv=gesv, matmul=matmul)


class BatchedGraph:
    """solve_cr_batched of one (NX, NZ) and Dirichlet mask, captured once as a CUDA graph.

    ``solve(D, lo, up, b)`` copies the system into the graph's fixed input buffers, replays the
    captured launches (getrf/getrsBatched, GEMMs, the slice updates: ~180 at 65 x 129) with one
    cudaGraphLaunch on the current stream, and returns a copy of the graph's output x (NX NZ,):
    ~6 host launches instead of ~180.  cuBLAS is called through _cublas.Blas (CuPy refuses cuBLAS
    calls during a capture): the LU solves are the steps of cupy.cublas.batched_gesv, the products
    one strided-batched DGEMM each (agrees with the uncaptured array code to rounding).  The graph's
    temporaries come from a private CuPy memory pool that nothing else allocates from, so the
    addresses baked into the graph stay its own for its lifetime.  The first solve runs the array
    code once uncaptured on the capture stream (kernel compiles, the pool's blocks: no allocation
    during the capture), then captures it."""

    def __init__(self, model, NX: int, NZ: int, dirm):
        self.shape = (NX, NZ)
        self.dirm = dirm  # held: the graph reads it by address
        self.inputs = (cp.empty((NX, NZ, NZ)), cp.empty((NX, NZ)), cp.empty((NX, NZ)), cp.empty((NX, NZ)))
        self._pool = cp.cuda.MemoryPool()
        self._stream = cp.cuda.Stream(non_blocking=True)
        self._solver = _block_solver(model, _cublas.Blas(self._stream))
        self._graph = None
        self._x = None

    def _capture(self):
        cp.cuda.get_current_stream().synchronize()  # the inputs were written on the caller's stream
        with cp.cuda.using_allocator(self._pool.malloc), self._stream:
            _solve_batched(self._solver, *self.inputs, self.dirm)  # warm-up: compiles, pool blocks
            self._stream.synchronize()
            self._stream.begin_capture()
            try:
                x = _solve_batched(self._solver, *self.inputs, self.dirm)
            finally:
                graph = self._stream.end_capture()
        self._graph, self._x = graph, x

    def solve(self, D, lo, up, b):
        for dst, src in zip(self.inputs, (D, lo, up, b)):
            dst[...] = src
        if self._graph is None:
            self._capture()
        self._graph.launch()
        return self._x.ravel().copy()


def _cr_work(model, NX: int, NZ: int):
    """Work arrays of solve_linsys_cr, reused between calls (one stream: calls are ordered)."""
    key = ("cuda.newton", "cr_work", NX, NZ)
    cache = model.device_cache
    if key not in cache:
        blk = lambda: cp.empty((NX, NZ, NZ))  # noqa: E731
        cache[key] = dict(Bw=blk(), A=(blk(), blk()), C=(blk(), blk()), rw=cp.empty((NX, NZ)),
                          XA=blk(), XC=blk(), Xr=cp.empty((NX, NZ)))
    return cache[key]


def solve_linsys_cr(model, backend, sysm, A, b, nwarps=None):
    """x (NX NZ,) by block cyclic reduction (blocktri.solve_cr): per level one cr_eliminate launch
    (a thread block of ``nwarps`` warps, default min(CR_NWARPS, NZ), per eliminated column) and one
    cr_update launch (a thread per entry of the kept blocks); then one single-block cr_backsub.
    2 log2(NX) + 2 launches, no host synchronisation."""
    D, lo, up = A
    NX, NZ = sysm.NX, sysm.NZ
    if NZ > MAX_NZ:
        raise ValueError(f"solve_linsys_cr: NZ <= {MAX_NZ} (the pivot key holds the row in 7 bits), not {NZ}")
    nw = max(1, min(CR_NWARPS, NZ)) if nwarps is None else nwarps
    elim, upd, back = (_build.function("cyclic_reduction.cu", k, OPTIONS, {"NZ": NZ, "NWARPS": nw})
                       for k in ("cr_eliminate", "cr_update", "cr_backsub"))
    dirm = _static(model, sysm)[3].view(cp.uint8)  # the kernel reads the bool mask as unsigned char
    W = _cr_work(model, NX, NZ)
    Bw, rw, XA, XC, Xr = W["Bw"], W["rw"], W["XA"], W["XC"], W["Xr"]
    i32 = np.int32
    src = 0
    htop = 0
    for lvl, (h, first, step, n_elim, n_kept) in enumerate(blocktri.cr_levels(NX)):
        l0 = i32(lvl == 0)
        Asrc, Csrc = W["A"][src], W["C"][src]
        elim((n_elim,), (nw * 32,), (D, lo, up, b, Bw, Asrc, Csrc, rw, l0, i32(NX), i32(h), i32(first),
                                      i32(step), XA, XC, Xr))
        dst = 1 - src
        _build.launch(upd, n_kept * NZ * NZ, BLOCK, (D, lo, up, b, Bw, Asrc, Csrc, rw, XA, XC, Xr, l0, i32(NX),
                                                     i32(h), i32(n_kept), W["A"][dst], W["C"][dst]))
        src = dst
        htop = h
    elim((1,), (nw * 32,), (D, lo, up, b, Bw, W["A"][src], W["C"][src], rw, i32(NX == 1), i32(NX), i32(NX),
                            i32(0), i32(0), XA, XC, Xr))
    x = cp.empty(NX * NZ)
    back((1,), (1024,), (XA, XC, Xr, b, dirm, i32(NX), i32(htop), x))
    return x


# ---------------------------------------------------------------------- the Newton glue
def newton_rhs(model, backend, sysm, F, V, N, ND):
    """poisson.newton_rhs: rhs (NX-2, NZ-2) of the interior rows, -c_p (N - N_D) + c_p dz F V, in
    one launch."""
    NX, NZ = sysm.NX, sysm.NZ
    rhs = cp.empty((NX - 2, NZ - 2))
    _build.launch(_build.function("newton.cu", "newton_rhs", OPTIONS), rhs.size, 128,
                  (f64(cp, F), f64(cp, V), f64(cp, N), f64(cp, ND), np.float64(model.cp), np.float64(sysm.cp_dz),
                   np.int32(NX), np.int32(NZ), rhs))
    return rhs


def newton_norms(model, backend, V_new, V_old, N_new, N_old, x):
    """(norms dict as poisson.norms, all(isfinite(x))) from ONE kernel and
    ONE host read."""
    out = cp.empty(5)
    Vn = f64(cp, V_new)
    _build.function("newton.cu", "newton_norms", OPTIONS)(
        (1,), (1024,), (Vn, f64(cp, V_old), f64(cp, N_new), f64(cp, N_old), f64(cp, x), np.int32(Vn.size), out))
    v = cp.asnumpy(out)
    w = math.sqrt(model.dx * model.dz)
    vals = [float(v[0]), w * math.sqrt(v[1]), float(v[2]), w * math.sqrt(v[3])]
    return dict(zip(("dV_inf", "dV_l2", "dN_inf", "dN_l2"), vals)), bool(v[4] != 0.0)
