"""BSP BTE phases: the NumPy array code vs the numba fast paths (solver/bsp/kernels/numba_cpu.py)
at 1 thread and at all cores, with flop/byte counts and the host's measured copy bandwidth.

    python workflow/scripts/bsp_numba_bench.py [--config config/standard.yaml] [--set KEY=VALUE ...]
        [--threads 1,all] [--columns K] [--reps 3] [--copy-mib 1024] [--step] --out DIR

Each BTE phase is one function call per RK stage (three per step): WENO_x = weno.dx_term,
WENO_w = dw_term, WENO_phi = dphi_term, scat_gain = scattering.gain, scat_loss =
scattering.loss_coefficient (the broadcast Lc * Phi and G - L of bte.rhs are NumPy on both paths
and not timed here).  Data: a synthetic stage of the mesh (eps(x), deps/dx, sine chi -> W,
Boltzmann rho_eq, equilibrium Phi with 20 % noise).  ``--columns K`` times the array path and the
1-thread fast path on the first K x columns only and scales the time by NX/K (labelled in the
CSV: ``columns``); all-core runs always use the whole mesh.  The largest relative difference of
each fast path to the array path (on the same columns) is recorded.  Ceilings: a NumPy copy
(one thread) and a numba prange copy (all threads) of ``--copy-mib`` MiB, bytes = read + write.

Writes DIR/numba_phases.csv, DIR/ceilings.csv, DIR/run.json (and DIR/step_numba.csv with
--step: one whole time step of the numba backend, all cores, via solver.bsp.bench.phase_times).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from solver import io, provenance  # noqa: E402
from solver.backend import get_backend  # noqa: E402
from solver.bsp import dens, scattering, weno  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402
from solver.bsp.synthetic import synthetic_stage  # noqa: E402

PHASES = ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss")
STAGES = 3  # RK stages per step: each phase runs once per stage

# flops of one WENO-5 face as written in weno5_faces / numba_cpu._face: central 5, differences 4,
# correction 44 (of which 4 divisions), sign 1
FACE_FLOPS = 54
NODE_FLOPS = {"WENO_x": FACE_FLOPS + 1 + 2,  # g = a1 Phi; difference and 1/dx
              "WENO_w": FACE_FLOPS + 2 + 2,  # a2 = -a1 deps, g = a2 Phi; difference, 1/dw
              "WENO_phi": 2 * FACE_FLOPS + 7 + 1 + 2}  # g+-, h+ + h-, difference, 1/dphi
INTERP_FLOPS = 9  # r, compares, t, (f1 - f0) t + f0, coef * v + acc
LOSS_FLOPS = 6  # Gamma, compare, 1 + 2 al Gamma, coef * ., + acc


def counts(m, n_branches):
    """(flops, fewest bytes) of one call of each phase on the whole mesh."""
    nodes = int(np.prod(m.shape))
    NX, NS, NW = m.NX, m.N_sbn, m.NW
    per_sub = NX * NS * NW  # (i, p, l) per valley
    out = {ph: (NODE_FLOPS[ph] * nodes, 16 * nodes) for ph in NODE_FLOPS}  # read Phi, write the term
    small = 8 * (NX * 3 * NS * (1 + 9 * NS))  # eps and W
    out["scat_gain"] = (INTERP_FLOPS * n_branches * per_sub * NS + NX * 3 * NS * NW, small + 16 * 3 * per_sub)
    out["scat_loss"] = (LOSS_FLOPS * n_branches * per_sub * NS, small + 8 * 3 * per_sub)
    return out


def calls(m, be, d, k=None):
    """The five phase calls on the first k x columns (None = all)."""
    s = slice(None) if k is None else slice(0, k)
    Phi = np.ascontiguousarray(d["Phi"][s])
    deps, eps, W, PH, rho = (np.ascontiguousarray(d[n][s]) for n in ("deps", "eps", "W", "PhiHat", "rho"))
    re0, reL, r0, rL = d["rho_eq"][0], d["rho_eq"][Phi.shape[0] - 1], rho[0], rho[-1]
    A = float(np.abs(d["deps"]).max())
    return {
        "WENO_x": lambda: weno.dx_term(m, be, Phi, re0, reL, r0, rL),
        "WENO_w": lambda: weno.dw_term(m, be, Phi, deps),
        "WENO_phi": lambda: weno.dphi_term(m, be, Phi, deps, A),
        "scat_gain": lambda: scattering.gain(m, be, PH, eps, W),
        "scat_loss": lambda: scattering.loss_coefficient(m, be, eps, W),
    }


def timed(fn, reps):
    best, out = math.inf, None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def ceilings(mib, threads, reps=3):
    import numba
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def pcopy(src, dst):
        for k in prange(src.shape[0]):
            dst[k] = src[k]

    n = mib * 2**20 // 8
    src = np.random.default_rng(1).random(n)
    dst = np.empty_like(src)
    rows = []
    t, _ = timed(lambda: np.copyto(dst, src), reps)
    rows.append({"ceiling": "numpy copy (1 thread)", "threads": 1, "bytes": 16 * n, "seconds": t, "GB_per_s": 16 * n / t / 1e9})
    for T in threads:
        numba.set_num_threads(T)
        pcopy(src[:8], dst[:8])  # compile
        t, _ = timed(lambda: pcopy(src, dst), reps)
        rows.append({"ceiling": f"numba prange copy ({T} threads)", "threads": T, "bytes": 16 * n, "seconds": t,
                     "GB_per_s": 16 * n / t / 1e9})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(REPO / "config/standard.yaml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--threads", default="1,all", help="numba thread counts ('all' = the backend's default)")
    ap.add_argument("--columns", type=int, default=None, help="time the array and 1-thread paths on K x columns")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of the multi-thread calls (best of)")
    ap.add_argument("--copy-mib", type=int, default=1024)
    ap.add_argument("--step", action="store_true", help="also one whole time step on the numba backend, all cores")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    import numba

    all_t = get_backend("numba").threads
    threads = sorted({all_t if t == "all" else int(t) for t in a.threads.split(",")})
    log = lambda *s: print(f"[{time.perf_counter() - t_start:6.1f} s]", *s, flush=True)  # noqa: E731

    cfg = load(a.config, list(a.overrides) + ["numerics.backend=numba"])
    m = Model(cfg)
    ma = Model(load(a.config, list(a.overrides) + ["numerics.backend=numba", "numerics.kernels=array"]))
    NX = m.NX
    K = a.columns if a.columns and a.columns < NX else None
    cols = K or NX
    log(f"mesh {m.shape}, threads {threads} (affinity {len(os.sched_getaffinity(0))}, "
        f"numba max {numba.config.NUMBA_NUM_THREADS}), columns for array/1-thread: {cols}")

    cdf = ceilings(a.copy_mib, [max(threads)])
    log("ceilings\n" + cdf.to_string(index=False))

    d = synthetic_stage(m)
    np_be = get_backend("numpy")
    d["W"] = scattering.overlap(m, np_be, d["chi"])
    d["rho"], d["PhiHat"] = dens.dens(m, np_be, d["Phi"])
    n_br = len(scattering.branches(m)[0]) + len(scattering.branches(m)[1]) + len(scattering.branches(m)[2])
    cnt = counts(m, n_br)

    # JIT (or cache load) on a tiny mesh first: compile time is not part of the timings
    t0 = time.perf_counter()
    tiny = Model(load(None, ["mesh.NX=9", "mesh.N_sbn=2", "mesh.NW=12", "mesh.NPHI=8", "mesh.NZ=17"]))
    dt_ = synthetic_stage(tiny)
    dt_["W"] = scattering.overlap(tiny, np_be, dt_["chi"])
    dt_["rho"], dt_["PhiHat"] = dens.dens(tiny, np_be, dt_["Phi"])
    for fn in calls(tiny, get_backend("numba", threads=1), dt_).values():
        fn()
    compile_s = time.perf_counter() - t0
    log(f"JIT compile / cache load {compile_s:.1f} s")

    rows, ref = [], {}
    scale = NX / cols
    # array path (NumPy, one call each, on `cols` columns)
    for ph, fn in calls(ma, np_be, d, K).items():
        t, o = timed(fn, 1)
        ref[ph] = o
        rows.append(dict(variant="array", threads=1, phase=ph, columns=cols, reps=1, seconds_per_call=t * scale))
        log(f"array {ph}: {t:.3f} s on {cols} columns")
    for T in threads:
        be = get_backend("numba", threads=T)
        sub = K if T == 1 else None
        for ph, fn in calls(m, be, d, sub).items():
            reps = 1 if (T == 1 and K is not None) else a.reps
            t, o = timed(fn, reps)
            c = cols if sub else NX
            if sub is None and K is not None:  # whole mesh timed: compare on the array path's columns
                diff = rel(calls(m, be, d, K)[ph](), ref[ph])
            else:
                diff = rel(o, ref[ph])
            rows.append(dict(variant=f"numba_t{T}", threads=T, phase=ph, columns=c, reps=reps,
                             seconds_per_call=t * NX / c, max_rel_diff_vs_array=diff))
            log(f"numba_t{T} {ph}: {t:.4f} s on {c} columns (rel diff to array {diff:.2e})")
        del be
    df = pd.DataFrame(rows)
    df["seconds_per_step"] = STAGES * df["seconds_per_call"]
    df["flops_per_call"] = df["phase"].map(lambda p: cnt[p][0])
    df["min_bytes_per_call"] = df["phase"].map(lambda p: cnt[p][1])
    df["GFLOP_per_s"] = df["flops_per_call"] / df["seconds_per_call"] / 1e9
    df["GB_per_s_min"] = df["min_bytes_per_call"] / df["seconds_per_call"] / 1e9
    arr = df[df.variant == "array"].set_index("phase")["seconds_per_call"]
    df["speedup_vs_array"] = df["phase"].map(arr) / df["seconds_per_call"]
    df.insert(0, "mesh", "x".join(str(v) for v in (m.N_sbn, m.NX, m.NZ, m.NW, m.NPHI)))
    df.insert(0, "machine", provenance.machine_tag())
    tot = df.groupby("variant", sort=False)["seconds_per_step"].sum()
    io.write_csv(df, out / "numba_phases.csv", index=False)
    io.write_csv(cdf, out / "ceilings.csv", index=False)

    step = None
    if a.step:
        from solver.bsp import bench

        log("one whole step, numba backend, all cores")
        step = bench.phase_times(a.config, list(a.overrides), backends=("numba",), steps=1, out=None)
        io.write_csv(step, out / "step_numba.csv", index=False)
    io.write_json(out / "run.json", provenance.collect(cfg, get_backend("numba"), extra={
        "machine_tag": provenance.machine_tag(),  # the host's tag (the numba backend alone would give the CPU's)
        "script": "workflow/scripts/bsp_numba_bench.py", "argv": sys.argv[1:], "threads_timed": threads,
        "columns_timed_array_t1": cols, "jit_compile_s": compile_s, "branches": n_br,
        "numba_version": numba.__version__, "numba_threading_layer": numba.threading_layer(),
        "wall_s": time.perf_counter() - t_start}))

    wide = df.pivot_table(index="phase", columns="variant", values="seconds_per_step", sort=False)
    wide = wide[["array"] + [f"numba_t{T}" for T in threads]]
    wide.loc["sum (BTE kernels)"] = tot[wide.columns]
    print(f"\nseconds per step ({STAGES} calls), mesh {df['mesh'][0]}, array and numba_t1 on {cols} of {NX} "
          f"x columns (scaled), {provenance.cpu_model()}")
    print(wide.to_string(float_format=lambda v: f"{v:.4g}"))
    best = df[df.variant == f"numba_t{max(threads)}"].set_index("phase")
    print(f"\nnumba_t{max(threads)}: GFLOP/s and GB/s (fewest bytes) per phase; copy ceiling "
          f"{cdf['GB_per_s'].iloc[-1]:.1f} GB/s ({max(threads)} threads), {cdf['GB_per_s'].iloc[0]:.1f} GB/s (1 thread)")
    print(best[["GFLOP_per_s", "GB_per_s_min", "speedup_vs_array", "max_rel_diff_vs_array"]].to_string(
        float_format=lambda v: f"{v:.3g}"))
    if step is not None:
        s = step.set_index("phase")["seconds_per_step"]
        keys = ["step", "step/BTE"] + [f"step/BTE/{p}" for p in PHASES + ("overlap", "RK")] + ["step/DENS", "step/ITER"]
        print(f"\nwhole step, numba backend, {get_backend('numba').threads} threads (seconds):")
        print("\n".join(f"  {k:22s} {s[k]:.4f}" for k in keys if k in s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
