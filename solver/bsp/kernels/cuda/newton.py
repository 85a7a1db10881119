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
MAX_NZ), ``batched_cr`` (the same block form from construct_kernel, solved by block cyclic
reduction with every level batched over its blocks, any NZ), ``dense`` (dense.py: cuSOLVER LU of
the dense matrix; kept as the baseline of the benchmarks), ``auto`` (default; kernels.linsys_variant).
batched_cr's own keys: ``numerics.batched_blocks`` (gauss_jordan = ``GaussJordanCR``: the block
inverses of batched_inverse.cu's gj_inverse, registers + shared memory, NZ <= blocktri.GJ_MAX_NZ,
the level updates fused in batched_cr.cu and the products by strided-batched DGEMM, ~40 launches
per solve; lu = blocktri_batched.solve_cr_batched over cuBLAS getrf/getrsBatched and GEMM, ~180
launches, any NZ; auto = gauss_jordan where it fits) and ``numerics.linsys_graph`` (default true: the
solve replayed from one CUDA graph per Newton system, ``BatchedGraph``, cuBLAS through _cublas.py).
``numerics.resolve`` (gauss_jordan, the re-solve with the kept factorization): ``levels`` = bcr_rhs /
bcr_backsub per level, ``fused`` (auto) = the persistent kernel bcr_resolve, one launch, equal to rounding (the device contracts it otherwise: H200 7e-16).
"""
from __future__ import annotations

import math

import numpy as np

import cupy as cp
from cupy import cublas

from solver.bsp import blocktri, blocktri_batched
from solver.bsp.kernels import batched_blocks, f64, linsys_graph, linsys_variant, resolve_variant
from solver.bsp.kernels.cuda import _build, _cublas, dense

MAX_NZ = blocktri.MAX_NZ  # the solve kernels' pivot key holds the row in 7 bits
CR_NWARPS = 32  # warps per cr_eliminate block (capped at NZ)
GJ_MAX_THREADS = 1024  # threads per gj_inverse block (at most)
GJ_RREG = 16  # row slots per thread of gj_inverse kept in registers (the rest in shared memory)
GJ_MAX_N = 511  # gj_inverse's pivot key holds the row in 9 bits
GJ_SMEM_MAX = 227 * 1024  # shared memory per thread block, opt-in (Hopper)
# gj_inverse's exchange step with the row factors precomputed (FACTORS = 1) where a thread holds at
# most this many rows; the in-loop form beyond (measured, H200: 0.11 vs 0.13 ms per launch of 32
# blocks at n = 65, 0.21 vs 0.24 at 97, but 0.84-0.89 vs 0.45 ms at 129 (RS = 19))
GJ_FACTORS_MAX_RS = 10
_SMEM_SET: set = set()  # gj_inverse builds whose max_dynamic_shared_size_bytes is raised
OPTIONS = ("-std=c++14",)
EXACT = OPTIONS + ("--fmad=false",)  # kernels that give the array code's bits (no a*b + c contraction)
BLOCK = 256
# threads per block of bcr_rhs / bcr_backsub (a warp per row of an N x N block, rows strided by the
# warp count): 32 warps put 2-4 rows on each warp at N = 65-127 instead of 8-16 at 8 warps; each row's
# loads are a global-memory latency, so the level kernels are latency-bound (ncu: bcr_rhs 17-29 us per
# level at 256 threads, standard mesh).  A row's sum is the same whatever the warp count: same bits.
LEVEL_THREADS = 1024
RESOLVE_THREADS = 1024  # threads per block of the fused resolve (bcr_resolve), at most


def resolve_grid(fn, tasks: int, threads: int = RESOLVE_THREADS):
    """(blocks, threads per block) of the persistent kernel bcr_resolve: threads = min(threads, the
    kernel's max_threads_per_block) in whole warps; blocks = enough warps for ``tasks`` warp tasks, at
    most the SM count, so that every block fits an SM of its own and all are resident at once (the
    kernel's grid barrier needs it)."""
    nt = max(32, min(threads, fn.max_threads_per_block) // 32 * 32)
    sms = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"]
    return max(1, min(sms, -(-tasks // (nt // 32)))), nt


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


def _device_bflat(model, bflat):
    """bflat (NX NZ,) on the device.  A read-only host array (poisson._potential_boundary's, kept per
    bias) is uploaded once and its device copy kept on the model by identity; anything else is
    uploaded (or taken as it is) each call."""
    if not isinstance(bflat, np.ndarray) or bflat.flags.writeable:
        return f64(cp, bflat)
    key = ("cuda.newton", "bflat")
    cache = model.device_cache
    hit = cache.get(key)
    if hit is None or hit[0] is not bflat:
        hit = cache[key] = (bflat, f64(cp, bflat))
    return hit[1]


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
                  (D0, lo0, up0, f64(cp, F), f64(cp, rhs_int), _device_bflat(model, bflat), np.float64(sysm.cp_dz),
                   np.int32(NX), np.int32(NZ), D, lo, up, b))
    return (D, lo, up), b


def linsys_rhs(model, backend, sysm, F, rhs_int, bflat):
    """poisson.linsys_rhs: b of construct_linsys alone by kernel construct_rhs (one thread per row,
    construct_kernel's statements: the same bits), no block form written; the dense variant builds
    its system."""
    if _dense(model):
        return construct_linsys(model, backend, sysm, F, rhs_int, bflat)[1]
    NX, NZ = sysm.NX, sysm.NZ
    D0 = _static(model, sysm)[0]
    b = cp.empty((NX, NZ))
    _build.launch(_build.function("newton.cu", "construct_rhs", OPTIONS), NX * NZ, BLOCK,
                  (D0, f64(cp, F), f64(cp, rhs_int), _device_bflat(model, bflat), np.float64(sysm.cp_dz),
                   np.int32(NX), np.int32(NZ), b))
    return b


def solve_linsys(model, backend, sysm, A, b, reuse=False):
    """x (NX NZ,) of the system construct_linsys built: block cyclic reduction by the CR kernels
    (variant block_cr) or over batched LU / GEMM (batched_cr), or cuSOLVER LU (dense); Dirichlet
    entries equal b exactly.  ``reuse`` (poisson.solve_linsys): batched_cr with gauss_jordan blocks
    substitutes with the factorization of its last solve when A is that solve's A; the others factor
    A again."""
    v = linsys_variant(model)
    if v == "dense":
        return dense.solve_linsys(model, backend, sysm, A, b)
    if v == "batched_cr":
        return solve_linsys_batched(model, backend, sysm, A, b, reuse)
    return solve_linsys_cr(model, backend, sysm, A, b)


def gj_config(n: int, max_threads: int = GJ_MAX_THREADS, rreg: int = GJ_RREG):
    """(RG, NT, RREG, shared bytes) of gj_inverse for blocks of size n: RG = min(n, max_threads // n)
    row groups (thread t < RG n owns column t % n of rows t // n + RG s; NT = RG n rounded up to a
    warp), RREG = min(rows per thread, rreg) row slots in registers, the rest in dynamic shared
    memory."""
    rg = max(1, min(n, max_threads // n))
    nt = -(-rg * n // 32) * 32
    rs = -(-n // rg)
    rr = min(rs, rreg)
    return rg, nt, rr, 8 * (rs - rr) * nt


def gj_fits(n: int) -> bool:
    """Whether gj_inverse runs blocks of size n (pivot key: n <= 511; shared memory: n <= ~204)."""
    return n <= GJ_MAX_N and gj_config(n)[3] + 40 * n + 8 <= GJ_SMEM_MAX


def gj_defines(n: int, max_threads: int = GJ_MAX_THREADS, rreg: int = GJ_RREG) -> dict:
    """The -D defines of gj_inverse's module for blocks of size n."""
    rg, nt, rr, _ = gj_config(n, max_threads, rreg)
    return {"N": n, "RG": rg, "NT": nt, "RREG": rr, "FACTORS": int(-(-n // rg) <= GJ_FACTORS_MAX_RS)}


def _gj_kernel(n: int, max_threads: int = GJ_MAX_THREADS, rreg: int = GJ_RREG):
    """(kernel, threads, dynamic shared bytes) of gj_inverse for blocks of size n."""
    rg, nt, rr, smem = gj_config(n, max_threads, rreg)
    if n > GJ_MAX_N or smem + 40 * n + 8 > GJ_SMEM_MAX:
        raise ValueError(f"gj_inverse: block size {n} needs {smem + 40 * n + 8} bytes of shared memory "
                         f"(at most {GJ_SMEM_MAX}) or exceeds {GJ_MAX_N}")
    defines = gj_defines(n, max_threads, rreg)
    fn = _build.function("batched_inverse.cu", "gj_inverse", OPTIONS, defines)
    key = tuple(sorted(defines.items()))
    if smem > 48 * 1024 and key not in _SMEM_SET:
        fn.max_dynamic_shared_size_bytes = smem
        _SMEM_SET.add(key)
    return fn, nt, smem


def gj_inverse(a, rhs=None, max_threads=GJ_MAX_THREADS, rreg=GJ_RREG):
    """inv (m, n, n), C-contiguous, of a stack a (m, n, n) by kernel gj_inverse (batched_inverse.cu,
    one thread block per matrix); with ``rhs`` (m, n) also z = inv @ rhs: (inv, z)."""
    m, n, _ = a.shape
    fn, nt, smem = _gj_kernel(n, max_threads, rreg)
    a = cp.ascontiguousarray(a, dtype=cp.float64)
    out = cp.empty((m, n, n))
    z = cp.empty((m, n))
    v = z if rhs is None else cp.ascontiguousarray(rhs, dtype=cp.float64)
    i32 = np.int32
    if m:
        fn((m,), (nt,), (a, out, i32(0), i32(1), v, i32(rhs is not None), i32(0), i32(n), i32(1), z),
           shared_mem=smem)
    return out if rhs is None else (out, z)


class GaussJordanCR:
    """Block cyclic reduction with Gauss-Jordan block inverses and fused level kernels
    (numerics.batched_blocks = gauss_jordan; batched_cr.cu documents the layout): per level h one
    gj_inverse launch over the eliminated blocks (in place; level 0 also z = B^-1 b), then
      level 0:  bcr_update0 (the kept updates are scalings of W = B^-1: no GEMM),
      h >= 2:   X = B^-1 [A | C | r], P = A_k X_{k-h}, Q = C_k X_{k+h} (three strided-batched DGEMMs
                through ``blas``, on the blocks in place, no copies) and bcr_update;
    column 0 by gj_inverse with its right-hand side, then log2(NX) + 1 bcr_backsub launches: 2 + 5
    (log2(NX) - 1) + 2 + log2(NX) launches, no host synchronisation (~41 at NX = 129, against ~180
    of the array code).  Work arrays are allocated once; ``__call__(D, lo, up, b, dirm)`` reads its
    inputs and returns x (NX, NZ), its own buffer (overwritten by the next call).
    ``resolve(lo, up, b, dirm)``: x for a new b with the factorization of the last call kept (the
    inverses in Bw, B^-1 A and B^-1 C in X, the couplings bcr_update replaced in S): ``resolve_kind``
    (numerics.resolve) ``levels`` = per level one bcr_rhs launch (block matrix-vector products only),
    column 0, then the same back substitution: 2 log2(NX) + 2 launches; ``fused`` = the same phases in
    ONE launch of the persistent kernel bcr_resolve (``grid`` = (blocks, threads), default
    resolve_grid: at most the SM count; a grid barrier between the phases, its counter ``bar`` reset by
    the kernel), the same bits; ~NX NZ^2 multiply-adds instead of ~NX NZ^3 (numerics.iter_jacobian = step)."""

    def __init__(self, NX: int, NZ: int, blas, resolve: str = "levels", grid=None):
        n = NZ
        self.NX, self.NZ, self.blas = NX, NZ, blas
        if resolve not in ("levels", "fused"):
            raise ValueError(f"GaussJordanCR: resolve is levels or fused, not {resolve!r}")
        self.resolve_kind = resolve
        self.Bw = cp.empty((NX, n, n))
        self.R = cp.zeros((NX, n, 2 * n + 1))
        self.X = cp.zeros((NX, n, 2 * n + 1))
        self.z = cp.zeros((NX, n))
        half = max(1, (NX + 3) // 4 + 1)
        self.P = cp.empty((half, n, 2 * n + 1))
        self.Q = cp.empty((half, n, 2 * n + 1))
        self.x = cp.empty((NX, n))
        self.levels = blocktri.cr_levels(NX)
        # the couplings of the levels h >= 2, one after the other in one buffer (bcr_resolve reads it whole)
        sizes = [nk * n * 2 * n if h > 1 else 0 for h, _, _, _, nk in self.levels]
        self.Sall = cp.zeros(max(1, sum(sizes)))
        offs = np.cumsum([0] + sizes)
        self.S = [self.Sall[offs[j]:offs[j] + sz].reshape(lv[4], n, 2 * n) if sz else None
                  for j, (lv, sz) in enumerate(zip(self.levels, sizes))]
        self.inv = _gj_kernel(n)
        self.k = {k: _build.function("batched_cr.cu", k, OPTIONS, {"N": n})
                  for k in ("bcr_update0", "bcr_update", "bcr_backsub", "bcr_rhs", "bcr_resolve")}
        self.bar = cp.zeros(1, dtype=cp.uint32)  # bcr_resolve's grid barrier (zero between launches)
        self.grid = None
        if resolve == "fused" and self.levels:
            self.grid = resolve_grid(self.k["bcr_resolve"], (NX // 2) * n) if grid is None else tuple(grid)

    def _invert(self, src, first, step, count, rhs=None, rhs_off=0, rhs_bs=0, rhs_ld=0):
        fn, nt, smem = self.inv
        i32 = np.int32
        v = self.z if rhs is None else rhs
        fn((count,), (nt,), (src, self.Bw, i32(first), i32(step), v, i32(rhs is not None), i32(rhs_off),
                             i32(rhs_bs), i32(rhs_ld), self.z), shared_mem=smem)

    def __call__(self, D, lo, up, b, dirm):
        NX, n = self.NX, self.NZ
        dirm = dirm.view(cp.uint8)  # the kernel reads the bool mask as unsigned char
        ld = 2 * n + 1
        Bw, R, X, P, Q, mm = self.Bw, self.R, self.X, self.P, self.Q, self.blas.matmul
        i32 = np.int32
        levels = self.levels
        for (h, first, step, ne, nk), S in zip(levels, self.S):
            if h == 1:
                self._invert(D, 1, 2, ne, b, 0, n, 1)
                _build.launch(self.k["bcr_update0"], nk * n * n, BLOCK, (D, lo, up, b, self.z, i32(NX), i32(nk), Bw, R))
                continue
            self._invert(Bw, h, step, ne)
            mm(Bw[h::step][:ne], R[h::step][:ne], out=X[h::step][:ne])
            if nk > 1:
                mm(R[step::step][:nk - 1, :, :n], X[h::step][:nk - 1], out=P[:nk - 1])
            mm(R[0::step][:ne, :, n:2 * n], X[h::step][:ne], out=Q[:ne])
            _build.launch(self.k["bcr_update"], nk * n * n, BLOCK, (P, Q, i32(h), i32(nk), i32(ne), Bw, R, S))
        if levels:
            self._invert(Bw, 0, 1, 1, R, 2 * n, n * ld, ld)
        else:
            self._invert(D, 0, 1, 1, b, 0, n, 1)
        return self._backsub(lo, up, b, dirm)

    def _backsub(self, lo, up, b, dirm):
        NX, i32 = self.NX, np.int32
        back = self.k["bcr_backsub"]
        for h in [0] + [lv[0] for lv in reversed(self.levels)]:
            ne = 1 if h == 0 else (NX - 1 - h) // (2 * h) + 1
            back((ne,), (LEVEL_THREADS,), (self.Bw, self.X, self.z, lo, up, b, dirm, i32(NX), i32(h), self.x))
        return self.x

    def resolve(self, lo, up, b, dirm):
        if not self.levels:  # one column: nothing kept to reuse
            raise ValueError("GaussJordanCR.resolve needs NX >= 2")
        dirm = dirm.view(cp.uint8)
        i32 = np.int32
        if self.resolve_kind == "fused":
            nb, nt = self.grid
            self.k["bcr_resolve"]((nb,), (nt,), (self.Bw, lo, up, b, self.Sall, dirm, i32(self.NX), i32(nb), self.z,
                                                  self.X, self.R, self.x, self.bar))
            return self.x
        rhs = self.k["bcr_rhs"]
        for (h, _, _, _, nk), S in zip(self.levels, self.S):
            rhs((nk,), (LEVEL_THREADS,), (self.Bw, lo, up, b, self.z if S is None else S, i32(self.NX), i32(h), self.z,
                                self.X, self.R))
        rhs((1,), (LEVEL_THREADS,), (self.Bw, lo, up, b, self.z, i32(self.NX), i32(0), self.z, self.X, self.R))
        return self._backsub(lo, up, b, dirm)


def _block_solver(model, NX: int, NZ: int, blas=None):
    """The batched solve (D, lo, up, b, dirm) -> x (NX, NZ) of numerics.batched_blocks: lu =
    blocktri_batched.solve_cr_batched over cuBLAS getrf/getrsBatched (CuPy's batched_gesv, or
    _cublas.Blas inside a graph) and CuPy's matmul (Blas.matmul inside a graph); gauss_jordan =
    GaussJordanCR (cuBLAS through ``blas``, default one bound to the current stream; its resolve
    numerics.resolve)."""
    if batched_blocks(model) == "gauss_jordan":
        return GaussJordanCR(NX, NZ, _cublas.Blas(cp.cuda.get_current_stream()) if blas is None else blas,
                             resolve_variant(model))
    gesv, matmul = (cublas.batched_gesv, cp.matmul) if blas is None else (blas.gesv, blas.matmul)
    return lambda D, lo, up, b, dirm: blocktri_batched.solve_cr_batched(cp, D, lo, up, b, dirm, gesv=gesv,
                                                                       matmul=matmul)


def modules(model) -> list:
    """(source, options, defines) of the modules the Newton system of this model launches in
    INITCOND and THERMEQUIL (_build.precompile): newton.cu, and for numerics.linsys = batched_cr
    with gauss_jordan blocks gj_inverse's and the CR level kernels' (blocks of size NZ)."""
    out = [("newton.cu", OPTIONS, None)]
    if linsys_variant(model) == "batched_cr" and batched_blocks(model) == "gauss_jordan" and gj_fits(model.NZ):
        out += [("batched_inverse.cu", OPTIONS, gj_defines(model.NZ)), ("batched_cr.cu", OPTIONS, {"N": model.NZ})]
    return out


def solve_linsys_batched(model, backend, sysm, A, b, reuse=False):
    """x (NX NZ,) by block cyclic reduction over batched block operations (``_block_solver``), no
    host synchronisation.  ``numerics.linsys_graph`` (default true): the solve replayed from one CUDA
    graph per (system, NX, NZ, batched_blocks) (``BatchedGraph``), else launched each time (the
    gauss_jordan solver and its work arrays cached per system).  ``reuse`` and A the very A of the
    last solve of this system, gauss_jordan blocks: GaussJordanCR.resolve (its own graph)."""
    D, lo, up = A
    key = ("cuda.newton", "batched_graph" if linsys_graph(model) else "batched", sysm.x_bc,
           batched_blocks(model))
    cache = model.device_cache
    if key not in cache or cache[key][0] is not sysm:
        dirm = _static(model, sysm)[3]
        if linsys_graph(model):
            cache[key] = [sysm, BatchedGraph(model, sysm.NX, sysm.NZ, dirm), None]
        else:
            cache[key] = [sysm, (_block_solver(model, sysm.NX, sysm.NZ), dirm), None]
    entry = cache[key]
    obj = entry[1]
    graph = isinstance(obj, BatchedGraph)
    solver, dirm = (obj._solver, obj.dirm) if graph else obj
    if reuse and entry[2] is A and isinstance(solver, GaussJordanCR) and solver.levels:
        return obj.resolve(b) if graph else solver.resolve(lo, up, b, dirm).ravel().copy()
    entry[2] = A  # the system whose factorization the solver now holds
    if graph:
        return obj.solve(D, lo, up, b)
    return solver(D, lo, up, b, dirm).ravel().copy()


def _solve_batched(solve, *args):
    return solve(*args)


class BatchedGraph:
    """The batched solve of one (NX, NZ), Dirichlet mask and numerics.batched_blocks, captured once
    as a CUDA graph.

    ``solve(D, lo, up, b)`` copies the system into the graph's fixed input buffers, replays the
    captured launches (lu: getrf/getrsBatched, GEMMs, the slice updates, ~180 at 65 x 129;
    gauss_jordan: GaussJordanCR's ~40) with one cudaGraphLaunch on the current stream, and returns
    a copy of the graph's output x (NX NZ,).  cuBLAS is called through _cublas.Blas (CuPy refuses
    cuBLAS calls during a capture): the LU solves are the steps of cupy.cublas.batched_gesv, the
    products one strided-batched DGEMM each (agrees with the uncaptured array code to rounding).
    The graph's temporaries come from a private CuPy memory pool that nothing else allocates from,
    so the addresses baked into the graph stay its own for its lifetime.  The first solve runs the
    solve once uncaptured on the capture stream (kernel compiles, the pool's blocks: no allocation
    during the capture), then captures it."""

    def __init__(self, model, NX: int, NZ: int, dirm):
        self.shape = (NX, NZ)
        self.dirm = dirm  # held: the graph reads it by address
        self._pool = cp.cuda.MemoryPool()
        self._stream = cp.cuda.Stream(non_blocking=True)
        with cp.cuda.using_allocator(self._pool.malloc):
            self.inputs = (cp.empty((NX, NZ, NZ)), cp.empty((NX, NZ)), cp.empty((NX, NZ)), cp.empty((NX, NZ)))
            self._solver = _block_solver(model, NX, NZ, _cublas.Blas(self._stream))
        self._graphs = {}  # "solve" / "resolve" -> (graph, its output x)

    def _capture(self, name, fn, *args):
        _build.wait_jobs()  # no start-up warm-up thread launches during a capture
        cp.cuda.get_current_stream().synchronize()  # the inputs were written on the caller's stream
        with cp.cuda.using_allocator(self._pool.malloc), self._stream:
            _solve_batched(fn, *args)  # warm-up: compiles, pool blocks
            self._stream.synchronize()
            self._stream.begin_capture()
            try:
                x = _solve_batched(fn, *args)
            finally:
                graph = self._stream.end_capture()
        self._graphs[name] = (graph, x)

    def _replay(self, name, fn, *args):
        if name not in self._graphs:
            self._capture(name, fn, *args)
        graph, x = self._graphs[name]
        graph.launch()
        return x.ravel().copy()

    def solve(self, D, lo, up, b):
        for dst, src in zip(self.inputs, (D, lo, up, b)):
            dst[...] = src
        return self._replay("solve", self._solver, *self.inputs, self.dirm)

    def resolve(self, b):
        """x for a new b with the factorization of the last ``solve`` (GaussJordanCR.resolve; lo and
        up are still in the input buffers), replayed from a second graph."""
        self.inputs[3][...] = b
        return self._replay("resolve", self._solver.resolve, *self.inputs[1:], self.dirm)


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


def deps_dx_max(model, backend, eps, V):
    """schrodinger.deps_dx_max: d eps/dx (bit for bit the array code), max |d eps/dx| and
    isfinite(sum V) from ONE kernel and ONE host read."""
    e = f64(cp, eps)
    d = cp.empty_like(e)
    out = cp.empty(2)
    NX = e.shape[0]
    _build.function("newton.cu", "deps_dx_max", OPTIONS)(
        (1,), (1024,), (e, f64(cp, V), np.int32(NX), np.int32(e.size // NX), np.int32(V.size),
                        np.float64(model.dx), np.float64(2.0 * model.dx), d, out))
    v = cp.asnumpy(out)
    return d, float(v[0]), bool(v[1] != 0.0)


def newton_norms(model, backend, V_new, V_old, N_new, N_old, x):
    """(norms dict as poisson.norms, all(isfinite(x))) from ONE kernel and
    ONE host read."""
    out = cp.empty(5)
    Vn = f64(cp, V_new)
    i32, f8 = np.int32, np.float64
    _build.function("newton.cu", "newton_norms", OPTIONS)(
        (1,), (1024,), (Vn, f64(cp, V_old), f64(cp, N_new), f64(cp, N_old), f64(cp, x), i32(Vn.size), out,
                        i32(0), out, i32(0), i32(0), f8(0.0), f8(0.0), out))
    v = cp.asnumpy(out)
    return _norms_dict(model, v), bool(v[4] != 0.0)


def _norms_dict(model, v):
    w = math.sqrt(model.dx * model.dz)
    vals = [float(v[0]), w * math.sqrt(v[1]), float(v[2]), w * math.sqrt(v[3])]
    return dict(zip(("dV_inf", "dV_l2", "dN_inf", "dN_l2"), vals))


def newton_norms_tail(model, backend, V_new, V_old, N_new, N_old, x, eps):
    """poisson.norms_tail: (norms, all(isfinite(x)), (d eps/dx, max |d eps/dx|, all(isfinite(V_new)))),
    the Newton norms of newton_norms and the stage tail of deps_dx_max for the new iterate (eps its
    levels), bit for bit those two, from ONE kernel and ONE host read."""
    out = cp.empty(7)
    Vn, e = f64(cp, V_new), f64(cp, eps)
    d = cp.empty_like(e)
    NX = e.shape[0]
    i32, f8 = np.int32, np.float64
    _build.function("newton.cu", "newton_norms", OPTIONS)(
        (1,), (1024,), (Vn, f64(cp, V_old), f64(cp, N_new), f64(cp, N_old), f64(cp, x), i32(Vn.size), out,
                        i32(1), e, i32(NX), i32(e.size // NX), f8(model.dx), f8(2.0 * model.dx), d))
    v = cp.asnumpy(out)
    return _norms_dict(model, v), bool(v[4] != 0.0), (d, float(v[5]), bool(v[6] != 0.0))


def iter_start(model, backend, s, V_n, stage_V, last, dt):
    """poisson.iter_start in ONE launch (kernel iter_start, --fmad=false: bit for bit the array
    code); the last step's d_o formed inline (no array)."""
    if s == 0 and last is None:
        return None
    Vn = f64(cp, V_n)
    V1 = f64(cp, stage_V[0]) if s >= 1 else Vn
    V2 = f64(cp, stage_V[1]) if s == 2 else Vn
    L0, L1, dt_o = (f64(cp, last.V0), f64(cp, last.V1), float(last.dt_o)) if last is not None else (Vn, Vn, 1.0)
    out = cp.empty_like(Vn)
    c = dt * dt / (4.0 if s == 1 else 3.0)
    f8 = np.float64
    _build.launch(_build.function("newton.cu", "iter_start", EXACT), Vn.size, BLOCK,
                  (Vn, V1, V2, L0, L1, np.int32(s), np.int32(last is not None), f8(dt), f8(dt_o), f8(c),
                   f8(2.0 / 3.0), f8(1.0 / 3.0), np.int32(Vn.size), out))
    return out
