"""Per-kernel profiles of the BSP solver (papers 000 and 001), behind ``python -m solver bsp ...``.

``kernel-profile``  Table 4 of 000, Tables 5-6 of 001: every BTE kernel (WENO_x, WENO_w, WENO_phi,
                    scat_gain, scat_loss) on a synthetic stage of a mesh, array code against the fast
                    path (CUDA, or numba at each thread count): time per step, counted GFLOP/s and
                    GB/s over the measured time, and their share of this machine's measured
                    ceilings (copy bandwidth; FP64 FMA on the GPU, FP64 GEMM on the CPU).
``iter-kernels``    Tables 1 and 4 of 001 (GPU only): the IPIM kernels A and B per time step for a
                    sequence of NZ, and every ITER CUDA kernel's time per step on one mesh.
``overlap``         Fig 10 of 000 (GPU only): the time step with and without numerics.overlap.
``ncu-profile``     Table 4 of 000, Tables 5-6 of 001 with hardware counters (where Nsight Compute's
                    ``ncu`` exists): every CUDA kernel of one time step of a real run (``ncu-step``
                    between cudaProfilerStart/Stop), GFLOP/s, DRAM GB/s and its share of the
                    measured copy bandwidth, L2 hit rate, global-load efficiency, memory and SM
                    throughput, per kernel and averaged per phase, beside the papers' numbers.

``kernel-profile`` uses no hardware counters: flops and bytes come from one model, :func:`counts`
(tested by hand on a small mesh in tests/test_bsp_profile.py); ``ncu-profile`` parses ncu's CSV
(:func:`parse_ncu_csv`, tested on a fixture in tests/test_bsp_profile_ncu.py).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from solver import io, provenance
from solver.config import int_option, list_option

BTE_KERNELS = ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss")
STAGES = 3  # RK stages per time step: each BTE kernel runs once per stage


# ---------------------------------------------------------------------------------------------
# Fast paths are looked up by their phase names (solver.bsp.kernels.REGISTRY); the ITER ones
# counted and re-timed by iter-kernels:
ITER_PHASES = ("eigen", "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms")


def phase_calls(m, be, d):
    """The five BTE kernel calls (reference entry points, which dispatch to the fast path unless
    numerics.kernels is array) on the stage data ``d`` (see :func:`stage`)."""
    from solver.bsp import scattering, weno

    Phi, deps, A = d["Phi"], d["deps"], d["A_eps"]
    return {
        "WENO_x": lambda: weno.weno_x(m, be, Phi, d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1]),
        "WENO_w": lambda: weno.weno_w(m, be, Phi, deps),
        "WENO_phi": lambda: weno.weno_phi(m, be, Phi, deps, A),
        "scat_gain": lambda: scattering.scat_gain(m, be, d["PhiHat"], d["eps"], d["W"]),
        "scat_loss": lambda: scattering.scat_loss(m, be, d["eps"], d["W"]),
    }


def fast_path(m, be, phase):
    """The fast path of a BTE or ITER phase on this model's backend, or None."""
    from solver.bsp import kernels

    return kernels.lookup(m, be, phase)


def fast_table(backend_name):
    """The backend's fast-path table (the registry's own dict: wrappers put into it are what runs)."""
    from solver.bsp import kernels

    return kernels.REGISTRY.table(backend_name)


def cuda_eigen_module():
    """The CUDA eigen module (eigenvalues, ipim A/B) and its block size."""
    from solver.bsp.kernels.cuda import eigen

    return eigen, eigen.BLOCK
# ---------------------------------------------------------------------------------------------


# flops of one WENO-5 face as the fast kernels compute it (weno5_faces, physics.md §8): central
# value 5, the four differences a face uses 4, correction F 44 (4 of them divisions), adding F 1
FACE_FLOPS = 54
NODE_FLOPS = {"WENO_x": FACE_FLOPS + 1 + 2,  # g = a1 Phi; difference of faces, times 1/dx
              "WENO_w": FACE_FLOPS + 2 + 2,  # a2 = -deps a1, g = a2 Phi; difference, 1/dw
              "WENO_phi": 2 * FACE_FLOPS + 7 + 1 + 2}  # a3, a3 +- alpha, * Phi, * 1/2 (x2); h+ + h-; difference, 1/dphi
GAIN_INNER_FLOPS = 8  # r = dl/dw + l (2), t = r - l_d (1), (f1 - f0) t + f0 (3), coef v (1), accumulate (1)
LOSS_INNER_FLOPS = 5  # Gamma = dl + w (1), 1 + 2 alpha Gamma (2), coef * . (1), accumulate (1)
PAIR_FLOPS = 3  # per (output, branch, p'): dl = eps - eps' + sigma (2), coef = weight W (1)


def counts(m, n_branches):
    """Flops and fewest bytes of one call of each BTE kernel on the whole mesh of model ``m``.

    {phase: (flops, bytes)}.  Flops: the additions, multiplications and divisions the kernels
    compute (no comparisons), per output node for WENO (``NODE_FLOPS``) and per (output
    (i, nu, p), branch, p', l) for scattering, plus the loop-invariant work at its own level.
    ``n_branches``: scattering branches summed over the three initial valleys.  Bytes (float64):
    every array the kernel reads once and its output written once -- Phi and the term (WENO);
    a1 (3, NW, NPHI) or a3_factor (3, NW, NPHI); deps (NX, 3, N_sbn) for w and phi; the four
    contact densities rho_eq, rho at x_0 and x_{NX-1} (3, N_sbn) for x; eps (NX, 3, N_sbn),
    W (NX, 3, N_sbn, 3, N_sbn), PhiHat and G or Lc (NX, 3, N_sbn, NW), s_w (3, NW) or w (NW) for
    scattering.  Inflow masks derived from a1 are not counted.
    """
    NX, NS, NW, NPHI = m.NX, m.N_sbn, m.NW, m.NPHI
    nodes = NX * 3 * NS * NW * NPHI
    coef = 3 * NW * NPHI  # a1 or a3_factor
    eps = NX * 3 * NS  # eps or deps
    W = NX * 3 * NS * 3 * NS
    hat = NX * 3 * NS * NW  # PhiHat, G, Lc
    inner = n_branches * NX * NS * NS * NW
    pairs = n_branches * NX * NS * NS
    return {
        "WENO_x": (NODE_FLOPS["WENO_x"] * nodes, 8 * (2 * nodes + coef + 4 * 3 * NS)),
        "WENO_w": (NODE_FLOPS["WENO_w"] * nodes, 8 * (2 * nodes + coef + eps)),
        "WENO_phi": (NODE_FLOPS["WENO_phi"] * nodes, 8 * (2 * nodes + coef + eps)),
        "scat_gain": (GAIN_INNER_FLOPS * inner + PAIR_FLOPS * pairs + hat,  # + the s_w scaling
                      8 * (2 * hat + eps + W + 3 * NW)),
        "scat_loss": (LOSS_INNER_FLOPS * inner + PAIR_FLOPS * pairs, 8 * (hat + eps + W + NW)),
    }


def n_branches(m) -> int:
    from solver.bsp import scattering

    return sum(len(v) for v in scattering.branches(m).values())


def stage(m, be):
    """Stage data of the kernels on the backend: the synthetic stage (solver.bsp.synthetic), its
    overlap integrals W, densities rho and PhiHat, A_eps."""
    from solver.bsp import dens, scattering
    from solver.bsp.synthetic import synthetic_stage

    h = synthetic_stage(m)
    d = {k: be.xp.asarray(v) for k, v in h.items()}
    d["W"] = scattering.overlap(m, be, d["chi"])
    d["rho"], d["PhiHat"] = dens.dens(m, be, d["Phi"])
    d["A_eps"] = float(np.abs(h["deps"]).max())
    return d


# ------------------------------------------------------------------------------ timing
def timed(fn, reps, sync=lambda: None, warm=1):
    """(median, min) seconds of ``reps`` calls of fn (host clock, synchronised), after ``warm`` calls."""
    for _ in range(warm):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), float(np.min(ts))


def timed_cuda(cp, fn, reps, warm=2):
    """(median, min) seconds of ``reps`` calls of fn between CUDA events, after ``warm`` calls."""
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) * 1e-3)
    return float(np.median(ts)), float(np.min(ts))


def rel(xp, a, b) -> float:
    return float(xp.abs(a - b).max() / max(float(xp.abs(b).max()), 1e-300))


# ------------------------------------------------------------------------------ ceilings
def gemm_ceiling(xp, n, reps=5, sync=lambda: None):
    """FP64 GEMM rate of xp.matmul on n x n (best of reps), 2 n^3 flop."""
    a = xp.ones((n, n)) * 0.5
    b = xp.ones((n, n)) * 0.25
    _, best = timed(lambda: a @ b, reps, sync)
    return {"ceiling": f"FP64 GEMM ({n} x {n} matmul)", "value": 2 * n**3 / best / 1e9, "unit": "GFLOP/s"}


def cpu_ceilings(copy_mib, threads, gemm_n, reps=3):
    """Host ceilings: a NumPy copy (one thread), a numba prange copy at ``threads``, FP64 GEMM."""
    import numba
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def pcopy(src, dst):
        for k in prange(src.shape[0]):
            dst[k] = src[k]

    n = copy_mib * 2**20 // 8
    src = np.random.default_rng(1).random(n)
    dst = np.empty_like(src)
    _, t = timed(lambda: np.copyto(dst, src), reps)
    rows = [{"ceiling": "numpy copy (1 thread)", "value": 16 * n / t / 1e9, "unit": "GB/s"}]
    numba.set_num_threads(threads)
    _, t = timed(lambda: pcopy(src, dst), reps)
    rows.append({"ceiling": f"numba prange copy ({threads} threads)", "value": 16 * n / t / 1e9, "unit": "GB/s"})
    rows.append(gemm_ceiling(np, gemm_n))
    return rows


def gpu_ceilings(cp, copy_mib, gemm_n):
    """Device ceilings: cupy.copyto bandwidth, FP64 FMA chains (RawKernel), FP64 GEMM."""
    from solver.vecops.kernels import GpuKernels

    n = copy_mib * 2**20 // 8
    src = cp.ones(n)
    dst = cp.empty_like(src)
    med, _ = timed_cuda(cp, lambda: cp.copyto(dst, src), 10)
    rows = [{"ceiling": "device copy (cupy.copyto)", "value": 16 * n / med / 1e9, "unit": "GB/s"}]
    k = GpuKernels(np.float64)
    sms = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"]
    grid, block, iters = sms * 32, 256, 4096
    out = cp.zeros(grid * block)
    med, _ = timed_cuda(cp, lambda: k.fma(out, iters, grid, block), 5)
    rows.append({"ceiling": "FP64 FMA chains (RawKernel)", "value": 16 * iters * grid * block / med / 1e9,
                 "unit": "GFLOP/s"})
    rows.append(gemm_ceiling(cp, gemm_n, sync=cp.cuda.Device().synchronize))
    return rows


# ------------------------------------------------------------------------------ kernel profile
def _models(cfg_path, overrides, backend):
    from solver.bsp.model import Model, load

    base = list(overrides) + [f"numerics.backend={backend}"]
    return Model(load(cfg_path, base + ["numerics.kernels=auto"])), Model(load(cfg_path, base + ["numerics.kernels=array"]))


def profile_rows(cfg_path=None, overrides=(), backend="numba", threads=(1,), reps=5):
    """One row per (variant, threads, kernel): seconds per call (median of reps; the CPU array
    path once), flops and bytes per call (:func:`counts`), largest relative difference to the
    array path.  backend cupy: the CuPy array code and the CUDA fast paths (CUDA events);
    numba: the NumPy array code and the numba fast paths at each thread count."""
    from solver.backend import get_backend

    mf, ma = _models(cfg_path, overrides, backend)
    cnt = counts(ma, n_branches(ma))
    rows = []

    def row(variant, t, ph, sec, best, diff):
        fl, by = cnt[ph]
        rows.append({"variant": variant, "threads": t, "kernel": ph, "seconds_per_call": sec, "seconds_best": best,
                     "flops_per_call": fl, "bytes_per_call": by, "max_rel_diff_vs_array": diff})

    if backend == "cupy":
        be = get_backend("cupy")
        cp = be.xp
        d = stage(ma, be)
        for ph in BTE_KERNELS:
            assert fast_path(mf, be, ph) is not None, f"no CUDA fast path for {ph}"
            ref, fast = phase_calls(ma, be, d)[ph], phase_calls(mf, be, d)[ph]
            diff = rel(cp, fast(), ref())
            cp.get_default_memory_pool().free_all_blocks()
            row("array", 1, ph, *timed_cuda(cp, ref, max(3, reps // 2)), 0.0)
            row("cuda", 1, ph, *timed_cuda(cp, fast, reps), diff)
        return pd.DataFrame(rows), be
    np_be = get_backend("numpy")
    d = stage(ma, np_be)
    ref = {}
    for ph, fn in phase_calls(ma, np_be, d).items():  # the NumPy reference: one call each
        t = time.perf_counter()
        ref[ph] = fn()
        sec = time.perf_counter() - t
        row("array", 1, ph, sec, sec, 0.0)
        print(f"array {ph}: {sec:.4f} s", file=sys.stderr, flush=True)
    for T in threads:
        be = get_backend("numba", threads=T)
        for ph, fn in phase_calls(mf, be, d).items():
            assert fast_path(mf, be, ph) is not None, f"no numba fast path for {ph}"
            sec, best = timed(fn, reps)
            row("numba", be.threads, ph, sec, best, rel(np, fn(), ref[ph]))
            print(f"numba_t{be.threads} {ph}: {sec:.4f} s", file=sys.stderr, flush=True)
    return pd.DataFrame(rows), get_backend("numba")


def kernel_profile(cfg_path=None, overrides=(), backend="numba", threads=(1,), reps=5, copy_mib=1024,
                   gemm_n=None, mesh=None):
    """(profile table, ceilings table, run record) of :func:`profile_rows` with the ceilings."""
    from solver.bsp.model import Model, load

    m = Model(load(cfg_path, list(overrides)))
    mesh = mesh or "x".join(str(v) for v in (m.N_sbn, m.NX, m.NZ, m.NW, m.NPHI))
    df, be = profile_rows(cfg_path, overrides, backend, threads, reps)
    if backend == "cupy":
        ceil = pd.DataFrame(gpu_ceilings(be.xp, copy_mib, gemm_n or 8192))
        fp_name = "FP64 FMA chains (RawKernel)"
    else:
        ceil = pd.DataFrame(cpu_ceilings(copy_mib, max(threads), gemm_n or 4096))
        fp_name = ceil.ceiling.iloc[-1]
    copy_gbs = float(ceil[ceil.unit == "GB/s"].value.max())
    fp_gflops = float(ceil.loc[ceil.ceiling == fp_name, "value"].iloc[0])
    df.insert(0, "mesh", mesh)
    df.insert(0, "machine", provenance.machine_tag())
    df["ms_per_step"] = 1e3 * STAGES * df.seconds_per_call
    arr = df[df.variant == "array"].set_index("kernel").seconds_per_call
    df["speedup_vs_array"] = df.kernel.map(arr) / df.seconds_per_call
    df["GFLOP_per_s"] = df.flops_per_call / df.seconds_per_call / 1e9
    df["GB_per_s"] = df.bytes_per_call / df.seconds_per_call / 1e9
    df["pct_of_copy_ceiling"] = 100 * df.GB_per_s / copy_gbs
    df["pct_of_fp64_ceiling"] = 100 * df.GFLOP_per_s / fp_gflops
    df["fp64_ceiling"] = fp_name
    # the papers' numbers of the matching kernel (paper 000 Table 4: K40c, ms per step and GFLOP/s;
    # paper 001 Table 5: the time column of its profiled run, RTX 3090 and V100)
    match = {v[1]: v for k, v in NCU_KERNELS.items() if v[0] == "BTE" and not k.endswith("_tile")}
    p000 = df.kernel.map(lambda k: PAPER_000_T4.get(match.get(k, (0, 0, 0, None))[3]))
    df["paper000_k40c_ms_per_step"] = p000.map(lambda v: v[1] if v else np.nan)
    df["paper000_k40c_GFLOP_per_s"] = p000.map(lambda v: v[2] if v else np.nan)
    p001 = df.kernel.map(lambda k: PAPER_001_T5.get(match.get(k, (0, 0, ""))[2]))
    df["paper001_rtx3090_time_ms"] = p001.map(lambda v: v[0] if v else np.nan)
    df["paper001_v100_time_ms"] = p001.map(lambda v: v[1] if v else np.nan)
    rec = provenance.collect(
        {"backend": backend, "config": None if cfg_path is None else str(cfg_path), "overrides": list(overrides),
         "threads": list(threads), "reps": reps, "copy_mib": copy_mib, "gemm_n": gemm_n}, be,
        {"copy_GB_per_s": copy_gbs, "fp64_GFLOP_per_s": fp_gflops, "machine_tag": provenance.machine_tag()})
    return df, ceil, rec


# ------------------------------------------------------------------------------ iter kernels
# Paper 001, Table 1 (V100): per-step seconds of the IPIM kernels (NX 65, NW 300, NPHI 48)
PAPER_T1 = {33: (0.000266, 0.000272), 49: (0.000366, 0.000520), 65: (0.000503, 0.000557),
            97: (0.000960, 0.001060), 129: (0.001520, 0.001470)}
# Paper 001, Table 4: per-step microseconds (RTX 3090, V100) of the iter kernels, 6x65x65x300x48
PAPER_T4 = {"cuda_eigenvalues_NR": (245.1, 205.4), "cuda_tridiag_Thomas": (774.8, 576.0),
            "cuda_compute_frechet": (3994.6, 322.2), "cuda_constrlinsys": (1055.2, 692.1),
            "cuda_matvec_product": (6499.4, 5194.5), "cuda_update_x": (1376.8, 1496.7)}

def _copy(cp, a):
    if isinstance(a, cp.ndarray):
        return a.copy()
    if isinstance(a, (tuple, list)):
        return type(a)(_copy(cp, x) for x in a)
    return a


class SpinTimer:
    """Device time of one call of fn: CUDA events around it, queued behind a spin kernel that
    hides the host's launch time (the events bracket device time only)."""

    def __init__(self, cp, spin_cycles=2_000_000):
        self.cp = cp
        from solver.bsp.kernels.cuda import _build

        self.spin = _build.function("spin.cu", "spin")
        self.cycles = np.int64(spin_cycles)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        self.spin((1,), (1,), (self.cycles,))
        e0.record()
        self.spin((1,), (1,), (self.cycles,))
        e1.record()
        e1.synchronize()
        self.spin_s = cp.cuda.get_elapsed_time(e0, e1) / 1e3

    def __call__(self, fn, reps):
        """(median device seconds, median host seconds, launch overhead hidden)."""
        cp = self.cp
        fn()
        cp.cuda.Device().synchronize()
        ev, host = [], []
        for _ in range(reps):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            self.spin((1,), (1,), (self.cycles,))
            e0.record()
            t = time.perf_counter()
            fn()
            host.append(time.perf_counter() - t)
            e1.record()
            ev.append((e0, e1))
            e1.synchronize()
        dev = [cp.cuda.get_elapsed_time(a, b) / 1e3 for a, b in ev]
        return statistics.median(dev), statistics.median(host), max(host) < self.spin_s


def counting_run(cfg_path, overrides, steps, be):
    """Start-up, then ``steps`` steps with the ITER fast paths wrapped to count their calls and
    keep a copy of the arguments of their last call.  (calls per step, last args, model, Newton
    solve used).  The kept-Jacobian iterations run phase by phase (numerics.iter_graph=false): the
    same kernels, each call counted (in the graph they would not pass through the table)."""
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cp = be.xp
    table = fast_table("cupy")
    cfg = load(cfg_path, list(overrides) + [f"time.steps={steps}", "time.t_end_ps=null", "numerics.backend=cupy",
                                            "numerics.kernels=auto", "numerics.iter_graph=false",
                                            "output.progress=false", "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, backend=be, progress=False)
    names = [n for n in ITER_PHASES if n in table]
    saved = {n: table[n] for n in names}
    from solver.bsp.kernels import linsys_variant

    path = f"numerics.linsys={linsys_variant(sim.model)} (CUDA)"
    counts_, last = {n: 0 for n in names}, {}
    try:
        sim._timer_rows = []  # as Simulation.run
        sim.startup()

        def wrap(n, f):
            def g(*args):
                counts_[n] += 1
                last[n] = _copy(cp, args)
                return f(*args)
            return g

        for n in names:
            if n in table:
                table[n] = wrap(n, table[n])
        newton = 0
        for _ in range(steps):
            sim.step()
            newton += sim.state.newton_iterations
        cp.cuda.Device().synchronize()
    finally:
        table.update(saved)
    per_step = {phase: counts_.get(phase, 0) / steps for phase in ITER_PHASES}
    per_step["newton_iterations"] = newton / steps
    return per_step, {phase: last[phase] for phase in ITER_PHASES if phase in last}, sim.model, path


EIGEN_KERNELS = ("eigenvalues", "eigenvalues_nr", "eigenvalues_tw", "ipim_a", "ipim_b", "ipim_t")


def iter_kernels(cfg_path=None, overrides=(), nz=(33, 49, 65, 97, 129), nx=65, nsbn=6, nw=300, nphi=48,
                 standard_nz=65, steps=5, reps=100):
    """(Table 1, Table 4, run record) of paper 001 on this GPU.

    Per mesh a counting run (:func:`counting_run`: realistic arguments, calls per step), then each
    kernel timed on its last call's arguments (:class:`SpinTimer`, median of ``reps``); per step =
    per call x calls per step.  NW and NPHI do not enter the ITER kernels; they only set how many
    Newton iterations POTENTIAL takes, so the counting runs use the papers' values."""
    from solver.backend import get_backend
    from solver.bsp import blocktri

    be = get_backend("cupy")
    cp = be.xp
    eig, ipim_block = cuda_eigen_module()
    from solver.bsp.kernels import eigen_variant, ipim_variant
    tm = SpinTimer(cp)
    rows1, rows4 = [], []
    for NZ in nz:
        mesh = [f"mesh.N_sbn={nsbn}", f"mesh.NX={nx}", f"mesh.NZ={NZ}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}"]
        t0 = time.perf_counter()
        calls, last, m, path = counting_run(cfg_path, mesh + list(overrides), steps, be)
        # the kernels the run's configuration uses (numerics.eigen: auto = twisted; numerics.ipim)
        default = ({"eigenvalues_tw", "ipim_t"} if eigen_variant(m) == "twisted" else
                   {"eigenvalues_nr" if eigen_variant(m) == "newton" else "eigenvalues", f"ipim_{ipim_variant(m)}"})
        print(f"NZ={NZ}: counting run {time.perf_counter() - t0:.1f} s, calls/step {calls}", file=sys.stderr)
        V = cp.ascontiguousarray(last["eigen"][2])
        eps, Dg = eig.eigenvalues(m, V)
        chi = {v: eig.ipim(m, eps, Dg, variant=v) for v in "ab"}
        args = last["eigen"]
        levels = args[3] if len(args) > 3 else None  # the warm start the last call had (None: cold)
        t = {"eigenvalues": tm(lambda: eig.eigenvalues(m, V), reps),
             "eigenvalues_nr": tm(lambda: eig.eigenvalues_nr(m, V, levels), reps),
             "ipim_a": tm(lambda: eig.ipim(m, eps, Dg, variant="a"), reps),
             "ipim_b": tm(lambda: eig.ipim(m, eps, Dg, variant="b"), reps),
             "eigenvalues_tw": tm(lambda: eig.eigenvalues_tw(m, V, levels), reps),
             "ipim_t": tm(lambda: eig.ipim_t(m, eps, Dg), reps)}
        ne = calls["eigen"]
        pa, pb = PAPER_T1.get(NZ, (np.nan, np.nan))
        rows1.append({"NX": nx, "NZ": NZ, "N_sbn": nsbn, "NW": nw, "NPHI": nphi, "steps_counted": steps,
                      "eigen_calls_per_step": ne, "newton_iterations_per_step": calls["newton_iterations"],
                      "ipim_a_s_per_call": t["ipim_a"][0], "ipim_b_s_per_call": t["ipim_b"][0],
                      "ipim_a_s_per_step": t["ipim_a"][0] * ne, "ipim_b_s_per_step": t["ipim_b"][0] * ne,
                      "paper_v100_a_s_per_step": pa, "paper_v100_b_s_per_step": pb,
                      "eigenvalues_s_per_call": t["eigenvalues"][0],
                      "eigenvalues_nr_s_per_call": t["eigenvalues_nr"][0], "eigenvalues_nr_warm": levels is not None,
                      "bitwise_equal_a_b": bool(cp.array_equal(chi["a"], chi["b"])),
                      "launch_overhead_hidden": all(v[2] for v in t.values()), "newton_solve": path})
        if NZ != standard_nz:
            continue
        per_step = {"eigenvalues": ne, "eigenvalues_nr": ne, "ipim_a": ne, "ipim_b": ne, "eigenvalues_tw": ne, "ipim_t": ne}
        for phase in ("Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms"):
            if phase in last:
                fn = fast_table("cupy")[phase]
                t[phase] = tm(lambda fn=fn, args=last[phase]: fn(*args), reps)
                per_step[phase] = calls[phase]
        nlev = len(blocktri.cr_levels(nx))
        matvec = "cuda_matvec_product + cuda_update_x"
        spec = [
            ("eigenvalues_nr", "eigenvalues_nr (Newton-Raphson, bisection safeguard)", "cuda_eigenvalues_NR", 1,
             "warm start: the levels of the previous Newton iterate" if levels is not None else
             "no warm start recorded: timed cold (= bisection)"),
            ("eigenvalues", "eigenvalues (bisection)", "cuda_eigenvalues_NR", 1, "numerics.eigen=bisection"),
            ("eigenvalues_tw", "eigenvalues_tw (two lanes per eigenvalue, twisted factorization)", "cuda_eigenvalues_NR",
             1, "numerics.eigen=twisted (the default)"),
            ("ipim_t", "ipim_t (LU once, reciprocals kept)", "cuda_tridiag_Thomas", 1, "numerics.eigen=twisted"),
            ("ipim_a", "ipim kernel A (global memory)", "cuda_tridiag_Thomas", 1, ""),
            ("ipim_b", "ipim kernel B (shared memory)", "cuda_tridiag_Thomas", 1, ""),
            ("Frechet", "frechet", "cuda_compute_frechet", 1, ""),
            ("construct_linsys", "construct_linsys", "cuda_constrlinsys", 1, ""),
            ("solve_linsys", "solve_linsys (block cyclic reduction)", matvec, 2 * nlev + 2,
             "paper: an iterative solver's matvec + update kernels; ours: a direct solve"),
            ("newton_rhs", "newton_rhs", "", 1, "paper: no such kernel listed"),
            ("newton_norms", "newton_norms", "", 1, "paper: no such kernel listed; includes its one device-to-host read"),
        ]
        for key, name, pname, launches, note in spec:
            if key not in t:
                continue
            if pname == matvec:
                p3090, pv100 = (PAPER_T4["cuda_matvec_product"][k] + PAPER_T4["cuda_update_x"][k] for k in (0, 1))
            else:
                p3090, pv100 = PAPER_T4.get(pname, (np.nan, np.nan))
            per_call = t[key][0]
            rows4.append({"mesh": f"{nsbn}x{nx}x{NZ}x{nw}x{nphi}", "kernel": name,
                          "used_by_default": key in default if key in EIGEN_KERNELS else True,
                          "launches_per_call": launches, "calls_per_step": per_step[key],
                          "us_per_call": 1e6 * per_call, "us_per_step": 1e6 * per_call * per_step[key],
                          "paper_kernel": pname, "paper_rtx3090_us_per_step": p3090,
                          "paper_v100_us_per_step": pv100, "host_us_per_call": 1e6 * t[key][1],
                          "launch_overhead_hidden": t[key][2], "note": note})
    t1, t4 = pd.DataFrame(rows1), pd.DataFrame(rows4)
    machine = provenance.machine_tag(be)
    t1.insert(0, "machine", machine)
    t4.insert(0, "machine", machine)
    rec = provenance.collect(
        {"config": None if cfg_path is None else str(cfg_path), "overrides": list(overrides), "nz": list(nz), "nx": nx,
         "n_sbn": nsbn, "nw": nw, "nphi": nphi, "steps": steps, "reps": reps, "eigen_kernels_default": sorted(default),
         "ipim_block": ipim_block}, be,
        {"spin_s": tm.spin_s, "timing": "CUDA events around one call queued behind a spin kernel; median of reps"})
    return t1, t4, rec


# ------------------------------------------------------------------------------ overlap (Fig 10 of 000)
OVERLAP_PHASES = {"step": "step", "BTE": "step/BTE", "WENO_x (in BTE)": "step/BTE/WENO_x",
                  "WENO_x (side stream)": "step/WENO_x_overlapped", "ITER": "step/ITER"}


def _overlap_run(cfg_path, overrides, overlap, steps, be):
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(cfg_path, list(overrides) + [f"numerics.overlap={'true' if overlap else 'false'}", f"time.steps={steps}",
                                            "time.t_end_ps=null", "numerics.backend=cupy", "output.progress=false",
                                            "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, be, None, progress=False)
    sim.run(resume=False)
    kept = sim.timer.steps[1:] or sim.timer.steps
    row = {name: 1e3 * float(np.mean([s.get(key, 0.0) for s in kept])) for name, key in OVERLAP_PHASES.items()}
    return row, {k: be.to_numpy(getattr(sim.state, k)) for k in ("Phi", "V", "eps")}, len(kept)


def overlap(cfg_path=None, overrides=(), steps=11, mesh="default"):
    """(table, run record) of Fig 10 of 000: one run of ``steps`` steps on the cupy backend per
    setting of numerics.overlap, the first step (kernel loading) left out of the means (ms per
    step); ``identical_results``: both runs end with bit-identical Phi, V and eps."""
    from solver.backend import get_backend

    be = get_backend("cupy")
    rows, states = [], {}
    for ov in (False, True):
        row, states[ov], n = _overlap_run(cfg_path, overrides, ov, steps, be)
        rows.append({"machine": provenance.machine_tag(), "mesh": mesh, "overlap": ov, "steps_averaged": n, **row})
    same = all(np.array_equal(states[False][k], states[True][k]) for k in ("Phi", "V", "eps"))
    df = pd.DataFrame(rows)
    df["identical_results"] = same
    df["saving_ms_per_step"] = df["step"].iloc[0] - df["step"]
    rec = provenance.collect({"config": None if cfg_path is None else str(cfg_path), "overrides": list(overrides),
                              "steps": steps}, be, {"identical_results": same})
    return df, rec


def plot_overlap(df, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 1.2 + 0.9 * len(df)))
    labels = [f"{r.mesh}\n{'overlap' if r.overlap else 'sequential'}" for r in df.itertuples()]
    y = np.arange(len(df))
    ax.barh(y, df["ITER"], color="C1", label="ITER")
    ax.barh(y, df["BTE"], left=df["ITER"], color="C0", label="BTE")
    ax.barh(y, df["step"] - df["ITER"] - df["BTE"], left=df["ITER"] + df["BTE"], color="0.7", label="DENS + other")
    ax.barh(y + 0.3, df["WENO_x (side stream)"], height=0.2, color="C2", label="WENO_x on the side stream (concurrent)")
    for k, r in enumerate(df.itertuples()):
        ax.text(r.step, k, f" {r.step:.2f} ms", va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("ms per time step")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    ax.set_xlim(0, 1.15 * float(df["step"].max()))
    return fig


# ------------------------------------------------------------------------------ hardware counters (ncu)
# The papers' metrics as Nsight Compute metrics (column -> metric).  Paper 001, Table 5: (1) memory
# and (2) SM throughput; paper 000, Table 4 (nvprof on a K40c): GFLOP/s, L2 hit rate, global memory
# load efficiency (GMLE; here the bytes used per sector of the global loads).
NCU_METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "mem_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "global_load_efficiency_pct": "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    "dram_bytes": "dram__bytes.sum",
    "dadd": "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "dmul": "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "dfma": "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
}
# ncu's units -> the base unit (ns, byte, count); with --print-units base ncu prints base units already
NCU_UNITS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "byte": 1.0, "Kbyte": 1e3,
             "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "%": 1.0, "inst": 1.0, "": 1.0}
# our CUDA kernels (name before any template or argument list) -> (phase, solver phase, paper 001
# Table 5 kernel, paper 000 Table 4 kernel number); every __global__ kernel of kernels/cuda/*.cu
# (tests/test_bsp_profile_ncu.py checks)
NCU_KERNELS = {
    "bsp_weno_dx": ("BTE", "WENO_x", "cuda_WENO_X", 4),
    "bsp_weno_dx_tile": ("BTE", "WENO_x", "cuda_WENO_X", 4),  # numerics.wenox_kernel: tile (the same x term)
    "bsp_weno_dw": ("BTE", "WENO_w", "cuda_WENO_W", 3),
    "bsp_weno_dphi": ("BTE", "WENO_phi", "cuda_WENO_PHI", 2),
    "bsp_weno_dphi_tile": ("BTE", "WENO_phi", "cuda_WENO_PHI", 2),
    "bsp_scat_gain": ("BTE", "scat_gain", "cuda_phonons_gain", 7),
    "bsp_scat_loss": ("BTE", "scat_loss", "cuda_phonons_loss", 1),
    "bsp_rk_dens": ("BTE", "RK (+ DENS)", "cuda_perform_RK_1_3", 10),
    # the fused stage (numerics.bte_kernels = fast): WENO_w and WENO_phi inside the RK update; no one
    # paper kernel does the same work
    "bsp_wphi_rk": ("BTE", "WENO_w+WENO_phi+RK (+ DENS), fused", "", None),
    "bsp_rho": ("DENS", "DENS", "cuda_pdftilde", 6),
    "bsp_scal": ("BTE", "RK: alpha and dt on the device (numerics.bte_speculate)", "", None),  # one thread (rk.cu)
    "density_probe": ("DENS", "DENS", "", None),  # the stage's density check numbers (one block; dens.cu)
    "scalars_probe": ("other", "scalars row (output, after a step; dens.cu)", "", None),
    "bsp_overlap": ("BTE", "overlap", "", None),  # W (phase key overlap; CuPy's matmul with bte_kernels exact)
    "eigenvalues_nr": ("ITER", "eigen", "cuda_eigenvalues_NR", None),
    "eigenvalues": ("ITER", "eigen", "cuda_eigenvalues_NR", None),
    "ipim_a": ("ITER", "eigen", "cuda_tridiag_Thomas", None),
    "ipim_b": ("ITER", "eigen", "cuda_tridiag_Thomas", None),
    "eigenvalues_tw": ("ITER", "eigen", "cuda_eigenvalues_NR", None),  # numerics.eigen = twisted (the default)
    "ipim_t": ("ITER", "eigen", "cuda_tridiag_Thomas", None),
    "frechet_kernel": ("ITER", "Frechet", "cuda_compute_frechet", None),
    "construct_kernel": ("ITER", "construct_linsys", "cuda_constr_linsys", None),
    "construct_rhs": ("ITER", "construct_linsys", "", None),  # b alone with the kept Jacobian
    "cr_eliminate": ("ITER", "solve_linsys", "cuda_matrix_vector_product", None),
    "cr_update": ("ITER", "solve_linsys", "cuda_update_x", None),
    "cr_backsub": ("ITER", "solve_linsys", "cuda_update_x", None),
    "gj_inverse": ("ITER", "solve_linsys", "", None),
    "bcr_update0": ("ITER", "solve_linsys", "", None),
    "bcr_update": ("ITER", "solve_linsys", "", None),
    "bcr_backsub": ("ITER", "solve_linsys", "", None),
    "bcr_rhs": ("ITER", "solve_linsys", "", None),  # the resolve with the kept factorization
    "bcr_resolve": ("ITER", "solve_linsys", "", None),  # the same resolve in one launch (numerics.resolve fused)
    "newton_rhs": ("ITER", "newton_rhs", "", None),
    "newton_norms": ("ITER", "newton_norms", "", None),  # with the stage tail (deps_dx) on cupy
    "iter_start": ("ITER", "iter_start", "", None),
    "deps_dx_max": ("ITER", "deps_dx", "", None),
    "iter_density": ("ITER", "eigen", "", None),  # the density N in numerics.iter_graph's Newton iteration
    "spin": ("other", "profiler (SpinTimer), not part of a time step", "", None),
}
# Paper 001, Table 5 (Nsight Compute): kernel -> (time RTX 3090 ms, time V100 ms, (1) RTX 3090 %,
# (1) V100 %, (2) RTX 3090 %, (2) V100 %); (1) = memory throughput, (2) = SM throughput
PAPER_001_T5 = {
    "cuda_phonons_loss": (2503.5, 166.7, 0.53, 8.1, 85.4, 92.6), "cuda_WENO_W": (365.4, 57.9, 10.3, 66.5, 86.1, 76.7),
    "cuda_WENO_PHI": (631.2, 44.9, 2.8, 39.9, 86.1, 87.4), "cuda_WENO_X": (315.6, 43.9, 10.9, 73.6, 85, 36),
    "cuda_phonons_gain": (128.2, 20.5, 1.4, 10, 84.1, 31), "cuda_compute_Wm1": (6.6, 13.8, 8, 5.6, 8, 2.5),
    "cuda_pdftilde": (7.9, 8.7, 92, 96.4, 35, 5.8), "cuda_set_fluxes_a2": (5.4, 7.0, 80.4, 63.1, 82, 24.7),
    "cuda_set_fluxes_a3": (4.9, 7.0, 87.7, 63.1, 45, 24.1), "cuda_perform_RK_2_3": (6.1, 6.6, 95.5, 90.6, 47.8, 10),
    "cuda_perform_RK_3_3": (6.1, 6.5, 95.5, 90.7, 47.8, 9.5), "cuda_perform_RK_1_3": (4.7, 4.8, 92.6, 92, 15.5, 11.2),
    "cuda_matrix_vector_product": (65, 51.9, 37.2, 50.5, 54.1, 17.5), "cuda_update_x": (13.7, 14.9, 4.2, 4.3, 1.8, 0.5),
    "cuda_constr_linsys": (10.5, 6.9, 41.2, 29.1, 3.3, 2.9), "cuda_tridiag_Thomas": (7.7, 5.7, 4.4, 8.7, 10.8, 1.7),
    "cuda_compute_frechet": (39.9, 3.2, 3.3, 48.6, 84.7, 77.2), "cuda_eigenvalues_NR": (2.4, 2.0, 1.8, 2.6, 17.9, 1.6),
}
PAPER_001_T5_COLUMNS = ("paper001_rtx3090_time_ms", "paper001_v100_time_ms", "paper001_rtx3090_mem_pct",
                        "paper001_v100_mem_pct", "paper001_rtx3090_sm_pct", "paper001_v100_sm_pct")
# Paper 001, Table 6: phase -> ((1) RTX 3090, (1) V100, (2) RTX 3090, (2) V100), time-weighted means
PAPER_001_T6 = {"BTE": (3.4, 35.7, 85, 68.6), "ITER": (22.1, 36.6, 51, 14.1)}
# Paper 000, Table 4 (nvprof, Tesla K40c, one time step): number -> (kernel, ms per step, GFLOP/s,
# L2 hit %, global memory load efficiency %)
PAPER_000_T4 = {1: ("GPU_integrate_PHONONS_loss", 32.8, 539, 11.15, 27.86), 2: ("GPU_approx_partf_PHI", 10.7, 598, 1.01, 74.99),
                3: ("GPU_approx_partf_W", 10.6, 284, 1.56, 66.59), 4: ("GPU_approx_partf_X", 6.66, 389, 3.83, 94.52),
                6: ("GPU_compute_integrated_pdf_energy", 1.81, 9, 0.0, 100.0),
                7: ("GPU_integrate_PHONONS_gain", 2.47, 275, 94.72, 61.00), 10: ("GPU_perform_RK_1_3", 2.90, 11, 0.0, 100.0)}


def _ncu_number(text, unit=""):
    """A value of ncu's CSV ('1,234.5', 'n/a') in the base unit of ``unit``; NaN if not a number."""
    try:
        return float(str(text).replace(",", "")) * NCU_UNITS.get(str(unit).strip(), 1.0)
    except ValueError:
        return np.nan


def parse_ncu_csv(text) -> pd.DataFrame:
    """ncu's ``--csv`` output (details page: one row per kernel launch and metric) -> one row per
    launch: id, kernel (full name), base (the name before any template/argument list) and one column
    per metric of NCU_METRICS (renamed to its column; base units: ns, bytes, %, counts).  Lines
    before the header (ncu's ==PROF== messages, the program's own output) are skipped."""
    import csv
    import io as _io

    lines = str(text).splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\") in the output")
    rows = list(csv.DictReader(_io.StringIO("\n".join(lines[start:]))))
    by_metric = {v: k for k, v in NCU_METRICS.items()}
    launches: dict = {}
    for r in rows:
        metric = r.get("Metric Name", "")
        if metric not in by_metric or not str(r.get("ID", "")).strip().isdigit():
            continue
        lid = int(r["ID"])
        d = launches.setdefault(lid, {"id": lid, "kernel": r["Kernel Name"]})
        d[by_metric[metric]] = _ncu_number(r.get("Metric Value", ""), r.get("Metric Unit", ""))
    df = pd.DataFrame(sorted(launches.values(), key=lambda d: d["id"]))
    if not len(df):
        raise ValueError("ncu's CSV holds none of the metrics of NCU_METRICS")
    for c in NCU_METRICS:
        if c not in df:
            df[c] = np.nan
    df["base"] = df["kernel"].str.replace(r"^void\s+", "", regex=True).str.split(r"[<(]", n=1, regex=True).str[0].str.strip()
    return df


def _weighted(g, col):
    w, v = g["duration_ns"].to_numpy(float), g[col].to_numpy(float)
    ok = np.isfinite(v) & np.isfinite(w)
    return float(np.sum(w[ok] * v[ok]) / np.sum(w[ok])) if ok.any() and np.sum(w[ok]) > 0 else np.nan


def ncu_tables(launches: pd.DataFrame, steps: int, copy_gbs: float | None = None):
    """(per-kernel table, per-phase table) of one profiled stretch of ``steps`` time steps.

    Per kernel (our name; other kernels -- CuPy element-wise, cuBLAS/cuSOLVER -- under their own
    names, phase 'other'): launches and ms per step, GFLOP/s ((dadd + dmul + 2 dfma) over the
    kernel time), DRAM GB/s and its share of the measured copy bandwidth ``copy_gbs``, and the
    duration-weighted means of the L2 hit rate, global-load efficiency, memory and SM throughput;
    beside them the papers' numbers of the matching kernel (paper 001 Table 5, paper 000 Table 4).
    Per phase (Table 6 of 001): the duration-weighted means of the metrics over the phase's kernels."""
    df = launches.copy()
    df["flops"] = df["dadd"].fillna(0) + df["dmul"].fillna(0) + 2 * df["dfma"].fillna(0)
    rows = []
    for base, g in df.groupby("base", sort=False):
        phase, solver_phase, p001, p000 = NCU_KERNELS.get(base, ("other", "", "", None))
        t = g["duration_ns"].sum()
        row = {"kernel": base, "phase": phase, "solver_phase": solver_phase, "launches_per_step": len(g) / steps,
               "ms_per_step": t / steps / 1e6, "GFLOP_per_s": g["flops"].sum() / t if t else np.nan,
               "dram_GB_per_s": g["dram_bytes"].sum() / t if t else np.nan}
        row["pct_of_copy_bandwidth"] = 100 * row["dram_GB_per_s"] / copy_gbs if copy_gbs else np.nan
        for c in ("l2_hit_pct", "global_load_efficiency_pct", "mem_throughput_pct", "sm_throughput_pct"):
            row[c] = _weighted(g, c)
        row["paper001_kernel"] = p001
        row.update(dict(zip(PAPER_001_T5_COLUMNS, PAPER_001_T5.get(p001, (np.nan,) * 6))))
        k000 = PAPER_000_T4.get(p000)
        row["paper000_k40c_kernel"] = k000[0] if k000 else ""
        for name, v in zip(("paper000_k40c_ms_per_step", "paper000_k40c_GFLOP_per_s", "paper000_k40c_l2_hit_pct",
                            "paper000_k40c_gld_efficiency_pct"), k000[1:] if k000 else (np.nan,) * 4):
            row[name] = v
        rows.append(row)
    kernels = pd.DataFrame(rows).sort_values("ms_per_step", ascending=False, ignore_index=True)
    phases = []
    for phase, g in df.assign(phase=df["base"].map(lambda b: NCU_KERNELS.get(b, ("other",))[0])).groupby("phase"):
        t = g["duration_ns"].sum()
        row = {"phase": phase, "ms_per_step": t / steps / 1e6, "GFLOP_per_s": g["flops"].sum() / t if t else np.nan,
               "dram_GB_per_s": g["dram_bytes"].sum() / t if t else np.nan}
        row["pct_of_copy_bandwidth"] = 100 * row["dram_GB_per_s"] / copy_gbs if copy_gbs else np.nan
        for c in ("l2_hit_pct", "global_load_efficiency_pct", "mem_throughput_pct", "sm_throughput_pct"):
            row[c] = _weighted(g, c)
        for name, v in zip(("paper001_rtx3090_mem_pct", "paper001_v100_mem_pct", "paper001_rtx3090_sm_pct",
                            "paper001_v100_sm_pct"), PAPER_001_T6.get(phase, (np.nan,) * 4)):
            row[name] = v
        phases.append(row)
    return kernels, pd.DataFrame(phases)


def ncu_step(cfg_path=None, overrides=(), steps=2):
    """The target program of ``ncu-profile``: start-up and ``steps`` - 1 steps unprofiled, then one
    step between cudaProfilerStart and cudaProfilerStop (ncu runs with --profile-from-start off)."""
    from solver.backend import get_backend
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    be = get_backend("cupy")
    cp = be.xp
    cfg = load(cfg_path, list(overrides) + [f"time.steps={steps}", "time.t_end_ps=null", "numerics.backend=cupy",
                                            "output.progress=false", "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, backend=be, progress=False)
    sim._timer_rows = []  # as Simulation.run
    sim.startup()
    for _ in range(steps - 1):
        sim.step()
    cp.cuda.Device().synchronize()
    cp.cuda.runtime.profilerStart()
    sim.step()
    cp.cuda.Device().synchronize()
    cp.cuda.runtime.profilerStop()


def ncu_command(target_args, ncu="ncu"):
    """The ncu command line around ``python -m solver bsp ncu-step <target_args>``."""
    return [ncu, "--csv", "--print-units", "base", "--profile-from-start", "off", "--target-processes", "all",
            "--metrics", ",".join(NCU_METRICS.values()), sys.executable, "-m", "solver", "bsp", "ncu-step", *target_args]


# ------------------------------------------------------------------------------ command line
def _common(p):
    p.add_argument("config", nargs="?", default=None, help="YAML run configuration (default: all defaults)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def register(bs) -> None:
    p = bs.add_parser("kernel-profile", help="Table 4 of 000, Tables 5-6 of 001: per BTE kernel, array vs fast path")
    _common(p)
    p.add_argument("--backend", choices=("cupy", "numba"), required=True)
    p.add_argument("--mesh", help="mesh label of the rows (default: N_sbnxNXxNZxNWxNPHI)")
    p.add_argument("--threads", default="1,all", help="numba thread counts ('all' = every core numba sees)")
    p.add_argument("--reps", type=int_option(1), default=5)
    p.add_argument("--copy-mib", type=int_option(1), default=1024)
    p.add_argument("--gemm-n", type=int_option(1), help="order of the GEMM ceiling (default 8192 GPU, 4096 CPU)")
    p.add_argument("--out", required=True, help="profile CSV; <stem>_ceilings.csv and <stem>.run.json beside it")
    p.set_defaults(func=_kernel_profile)
    p = bs.add_parser("iter-kernels", help="Tables 1 and 4 of 001 (GPU): IPIM kernels A/B and every ITER kernel")
    _common(p)
    p.add_argument("--nz", type=list_option(int_option(5), "integers >= 5"), default="33,49,65,97,129")
    p.add_argument("--nx", type=int_option(3), default=65)
    p.add_argument("--nsbn", type=int_option(1), default=6)
    p.add_argument("--nw", type=int_option(2), default=300)
    p.add_argument("--nphi", type=int_option(2), default=48)
    p.add_argument("--standard-nz", type=int_option(5), default=65, help="NZ of the Table 4 mesh (one of --nz)")
    p.add_argument("--steps", type=int_option(1), default=5)
    p.add_argument("--reps", type=int_option(1), default=100)
    p.add_argument("--table1", required=True)
    p.add_argument("--table4", required=True)
    p.add_argument("--run-json", required=True)
    p.set_defaults(func=_iter_kernels)
    p = bs.add_parser("ncu-step", help="target of ncu-profile: one time step between cudaProfilerStart/Stop")
    _common(p)
    p.add_argument("--steps", type=int_option(1), default=2, help="steps run; the last one is profiled")
    p.set_defaults(func=_ncu_step)
    p = bs.add_parser("ncu-profile", help="Table 4 of 000, Tables 5-6 of 001 with hardware counters (Nsight Compute)")
    _common(p)
    p.add_argument("--steps", type=int_option(1), default=2, help="steps of the profiled run; the last one is profiled")
    p.add_argument("--ceilings", help="a kernel-profile ceilings CSV: its copy bandwidth is the 100 %% of pct_of_copy_bandwidth")
    p.add_argument("--from-csv", help="parse this saved ncu CSV instead of running ncu")
    p.add_argument("--out", required=True, help="per-kernel CSV; <stem>_phases.csv, <stem>_raw.csv and <stem>.run.json beside it")
    p.set_defaults(func=_ncu_profile)
    p = bs.add_parser("overlap", help="Fig 10 of 000 (GPU): the step with and without numerics.overlap")
    _common(p)
    p.add_argument("--mesh", default="default", help="mesh label of the rows and the figure")
    p.add_argument("--steps", type=int_option(2), default=11)
    p.add_argument("--csv", required=True, help="table; <stem>.run.json beside it")
    p.add_argument("--fig", required=True)
    p.set_defaults(func=_overlap)


def _threads(spec):
    from solver.backend import get_backend

    n_all = get_backend("numba").threads
    return sorted({n_all if t == "all" else int(t) for t in spec.split(",")})


def _kernel_profile(a) -> int:
    threads = _threads(a.threads) if a.backend == "numba" else (1,)
    df, ceil, rec = kernel_profile(a.config, a.overrides, a.backend, threads, a.reps, a.copy_mib, a.gemm_n, a.mesh)
    out = Path(a.out)
    io.write_csv(df, out, float_format="%.6g")
    io.write_csv(ceil, out.with_name(out.stem + "_ceilings.csv"), float_format="%.6g")
    io.write_json(out.with_name(out.stem + ".run.json"), rec)
    print(ceil.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    cols = ["variant", "threads", "kernel", "ms_per_step", "speedup_vs_array", "GFLOP_per_s", "GB_per_s",
            "pct_of_copy_ceiling", "pct_of_fp64_ceiling", "max_rel_diff_vs_array"]
    print(df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


def _iter_kernels(a) -> int:
    t1, t4, rec = iter_kernels(a.config, a.overrides, list(a.nz), a.nx, a.nsbn, a.nw, a.nphi,
                               a.standard_nz, a.steps, a.reps)
    io.write_csv(t1, a.table1, float_format="%.6g")
    io.write_csv(t4, a.table4, float_format="%.6g")
    rec["outputs"] = [a.table1, a.table4]
    io.write_json(a.run_json, rec)
    pd.set_option("display.width", 250)
    print("Table 1 of 001: IPIM kernels A and B, seconds per time step")
    print(t1.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\nTable 4 of 001: ITER kernels, microseconds per time step")
    print(t4.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


def _overlap(a) -> int:
    df, rec = overlap(a.config, a.overrides, a.steps, a.mesh)
    io.write_csv(df, a.csv, float_format="%.6g")
    io.write_json(Path(a.csv).with_suffix(".run.json"), rec)
    io.save_figure(plot_overlap(df, f"Fig 10 (paper 000): WENO_x overlapped with ITER, {a.mesh}"), a.fig)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if not df["identical_results"].all():
        print("overlap changed the results", file=sys.stderr)
        return 1
    return 0


def _ncu_step(a) -> int:
    ncu_step(a.config, a.overrides, a.steps)
    return 0


def copy_bandwidth(ceilings_csv) -> float | None:
    """The largest GB/s ceiling of a kernel-profile ceilings CSV (the measured copy bandwidth)."""
    if not ceilings_csv:
        return None
    c = pd.read_csv(ceilings_csv)
    gbs = c.loc[c["unit"] == "GB/s", "value"]
    return float(gbs.max()) if len(gbs) else None


def _ncu_profile(a) -> int:
    import shutil
    import subprocess

    out = Path(a.out)
    raw = out.with_name(out.stem + "_raw.csv")
    if a.from_csv:
        text = Path(a.from_csv).read_text()
        cmd = None
    else:
        ncu = shutil.which("ncu")
        if ncu is None:
            print("ncu-profile: no ncu (Nsight Compute) on PATH", file=sys.stderr)
            return 2
        target = ([a.config] if a.config else []) + [x for kv in a.overrides for x in ("--set", kv)] + ["--steps", str(a.steps)]
        cmd = ncu_command(target, ncu)
        print(" ".join(cmd), file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        text = proc.stdout
        if proc.returncode != 0:
            print(proc.stdout[-4000:] + proc.stderr[-4000:], file=sys.stderr)
            return proc.returncode
        with io.atomic_path(raw) as tmp:
            tmp.write_text(text)
    launches = parse_ncu_csv(text)
    copy_gbs = copy_bandwidth(a.ceilings)
    kernels, phases = ncu_tables(launches, 1, copy_gbs)
    machine = provenance.machine_tag()
    kernels.insert(0, "machine", machine)
    phases.insert(0, "machine", machine)
    io.write_csv(kernels, out, float_format="%.6g")
    io.write_csv(phases, out.with_name(out.stem + "_phases.csv"), float_format="%.6g")
    rec = provenance.collect({"config": a.config, "overrides": list(a.overrides), "steps": a.steps, "command": cmd,
                              "from_csv": a.from_csv, "ceilings": a.ceilings},
                             extra={"copy_GB_per_s": copy_gbs, "metrics": NCU_METRICS, "profiled_steps": 1,
                                    "machine_tag": machine})
    io.write_json(out.with_name(out.stem + ".run.json"), rec)
    pd.set_option("display.width", 250)
    print(kernels.iloc[:, :13].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(phases.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0
