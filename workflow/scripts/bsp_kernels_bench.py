"""BSP BTE phases on the GPU: the CuPy array code vs the CUDA fast paths
(solver/bsp/kernels/cuda_bte.py), with flop/byte counts, the device's measured copy bandwidth and
the largest relative difference of each fast path to the array path on the full mesh.

    python workflow/scripts/bsp_kernels_bench.py --out DIR [--configs config/coarse.yaml,config/standard.yaml]
        [--reps 10] [--gpu-tests] [--phases-steps 2]

Each BTE phase is one function call per RK stage (three per step): WENO_x = weno.dx_term,
WENO_w = dw_term, WENO_phi = dphi_term, scat_gain = scattering.gain, scat_loss =
scattering.loss_coefficient; plus ``rhs`` = bte.rhs (the whole BTE right-hand side of one stage,
including the Lc * Phi broadcast and the sums, which are array code on both paths).  Data: a
synthetic stage of the mesh (eps(x), deps/dx, sine chi -> W, Boltzmann rho_eq, equilibrium Phi
with 20 % noise).  Times: CUDA events around each call, 2 warm-up calls, median of ``--reps``.

``--gpu-tests``: first run ``pytest -m gpu tests/test_bsp_kernels_cuda.py`` into DIR/gpu_tests.log.
``--phases-steps N``: then whole time steps of the cupy backend (solver.bsp.bench.phase_times) with
numerics.kernels array and auto on each mesh, into DIR/phases.csv (0 = skip).

Writes DIR/kernels_bench.csv, DIR/ceilings.csv, DIR/phases.csv, DIR/run.json; prints a table last.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from solver import io, provenance  # noqa: E402
from solver.backend import get_backend  # noqa: E402
from solver.bsp import bte, dens, kernels, scattering, weno  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402
from solver.bsp.synthetic import synthetic_stage  # noqa: E402

PHASES = ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss", "rhs")
STAGES = 3

# flops as written (weno5_faces / cuda_bte.weno_face): central 5, differences 5, correction 44
# (4 of them divisions, each about 8-10 FP64 instructions on the device), sign 1
FACE_FLOPS = 55
NODE_FLOPS = {"WENO_x": FACE_FLOPS + 1 + 2,  # g = a1 Phi; difference and 1/dx
              "WENO_w": FACE_FLOPS + 2 + 2,  # a2 = a1 (-deps), g = a2 Phi; difference, 1/dw
              "WENO_phi": 2 * FACE_FLOPS + 7 + 1 + 2}  # g+- (a3, +-alpha, *P, *0.5), h+ + h-, diff, 1/dphi
DIVS = {"WENO_x": 4, "WENO_w": 4, "WENO_phi": 8}
GAIN_FLOPS = 10  # delta (2), r (2), (f1 - f0) t + f0 (3), t (1), coef (1), acc (1) per (output, branch, p')
LOSS_FLOPS = 8  # Gamma (3), 1 + 2 al Gamma (2), coef (1), product (1), acc (1)


def counts(m, n_branches):
    """(flops, fewest bytes, divisions) of one call of each phase on the whole mesh."""
    nodes = int(np.prod(m.shape))
    NX, NS, NW = m.NX, m.N_sbn, m.NW
    per_sub = NX * NS * NW  # (i, p, l) per valley
    out = {ph: (NODE_FLOPS[ph] * nodes, 16 * nodes, DIVS[ph] * nodes) for ph in NODE_FLOPS}
    small = 8 * (NX * 3 * NS * (1 + 3 * NS))  # eps and W
    out["scat_gain"] = (GAIN_FLOPS * n_branches * per_sub * NS + 3 * per_sub, small + 16 * 3 * per_sub, 0)
    out["scat_loss"] = (LOSS_FLOPS * n_branches * per_sub * NS, small + 8 * 3 * per_sub, 0)
    fl = sum(v[0] for v in out.values()) + 3 * nodes  # + Lc Phi, G - ., - 3 terms
    out["rhs"] = (fl, 16 * nodes, sum(DIVS.values()) * nodes)  # fused floor: read Phi, write H
    return out


def timed(cp, fn, reps, warm=2):
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


def rel(cp, a, b):
    return float(cp.abs(a - b).max() / max(float(cp.abs(b).max()), 1e-300))


def copy_ceiling(cp, mib=1024, reps=10):
    n = mib * 2**20 // 8
    src = cp.ones(n)
    dst = cp.empty_like(src)
    med, best = timed(cp, lambda: cp.copyto(dst, src), reps)
    return {"kind": "device copy (cupy.copyto)", "MiB": mib, "median_s": med, "GB_per_s": 2 * n * 8 / med / 1e9,
            "best_GB_per_s": 2 * n * 8 / best / 1e9}


def bench_mesh(be, cfg_path, reps, overrides=(), mesh=None):
    cp = be.xp
    mesh = mesh or Path(cfg_path).stem
    ma = Model(load(cfg_path, list(overrides) + ["numerics.kernels=auto"]))
    mr = Model(load(cfg_path, list(overrides) + ["numerics.kernels=array"]))
    h = synthetic_stage(mr)
    d = {k: cp.asarray(v) for k, v in h.items()}
    W = scattering.overlap(mr, be, d["chi"])
    rho, PH = dens.dens(mr, be, d["Phi"])
    A = float(np.abs(h["deps"]).max())
    nb = sum(len(v) for v in scattering.branches(mr).values())
    cnt = counts(mr, nb)
    calls = {
        "WENO_x": lambda m: weno.dx_term(m, be, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1], rho[0], rho[-1]),
        "WENO_w": lambda m: weno.dw_term(m, be, d["Phi"], d["deps"]),
        "WENO_phi": lambda m: weno.dphi_term(m, be, d["Phi"], d["deps"], A),
        "scat_gain": lambda m: scattering.gain(m, be, PH, d["eps"], W),
        "scat_loss": lambda m: scattering.loss_coefficient(m, be, d["eps"], W),
        "rhs": lambda m: bte.rhs(m, be, d["Phi"], bte.StageData(eps=d["eps"], deps_dx=d["deps"], W=W, PhiHat=PH,
                                                                 rho=rho, rho_eq=d["rho_eq"], A_eps=A)),
    }
    fast_names = {"WENO_x": "dx_term", "WENO_w": "dw_term", "WENO_phi": "dphi_term", "scat_gain": "gain",
                  "scat_loss": "loss_coefficient"}
    for ph, name in fast_names.items():
        assert kernels.lookup(ma, be, name) is not None, f"no fast path {name} on {be.name}"
    rows = []
    for ph in PHASES:
        ref = calls[ph](mr)
        fast = calls[ph](ma)
        diff = rel(cp, fast, ref)
        del ref, fast
        cp.get_default_memory_pool().free_all_blocks()
        t_arr, _ = timed(cp, lambda: calls[ph](mr), max(3, reps // 2))
        t_fast, t_best = timed(cp, lambda: calls[ph](ma), reps)
        fl, by, dv = cnt[ph]
        rows.append({"mesh": mesh, "shape": "x".join(map(str, mr.shape)), "phase": ph,
                     "array_s_per_call": t_arr, "fast_s_per_call": t_fast, "fast_best_s": t_best,
                     "array_ms_per_step": 1e3 * STAGES * t_arr, "fast_ms_per_step": 1e3 * STAGES * t_fast,
                     "speedup": t_arr / t_fast, "max_rel_diff": diff, "branches": nb,
                     "flops": fl, "divisions": dv, "fewest_bytes": by,
                     "fast_GFLOP_per_s": fl / t_fast / 1e9, "fast_GB_per_s": by / t_fast / 1e9})
        print(f"{mesh:9s} {ph:9s} array {1e3 * t_arr:9.3f} ms  fast {1e3 * t_fast:8.4f} ms  "
              f"x{t_arr / t_fast:7.1f}  rel {diff:.2e}", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default="config/coarse.yaml,config/standard.yaml")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--gpu-tests", action="store_true")
    ap.add_argument("--phases-steps", type=int, default=2)
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.gpu_tests:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-v", "-s", "-p", "no:cacheprovider",
                            "tests/test_bsp_kernels_cuda.py"], cwd=REPO, capture_output=True, text=True)
        (out / "gpu_tests.log").write_text(r.stdout + r.stderr)
        tail = [ln for ln in r.stdout.splitlines() if "passed" in ln or "failed" in ln or "error" in ln.lower()]
        print(f"gpu tests rc={r.returncode} ({time.perf_counter() - t0:.0f} s): {tail[-1] if tail else '?'}", flush=True)
    be = get_backend("cupy")
    cp = be.xp
    ceil = pd.DataFrame([copy_ceiling(cp)])
    io.write_csv(ceil, out / "ceilings.csv")
    print(f"copy ceiling: {ceil['GB_per_s'][0]:.0f} GB/s (median), {ceil['best_GB_per_s'][0]:.0f} GB/s (best)", flush=True)
    rows = []
    cfgs = [c for c in a.configs.split(",") if c]
    for c in cfgs:
        rows += bench_mesh(be, REPO / c, a.reps)
        cp.get_default_memory_pool().free_all_blocks()
    df = pd.DataFrame(rows)
    io.write_csv(df, out / "kernels_bench.csv", float_format="%.6g")
    if a.phases_steps > 0:
        from solver.bsp.bench import phase_times
        ph = []
        for c in cfgs:
            for mode in ("array", "auto"):
                t = phase_times(REPO / c, [f"numerics.kernels={mode}"], ("cupy",), a.phases_steps)
                t.insert(0, "kernels", mode)
                t.insert(0, "mesh", Path(c).stem)
                ph.append(t)
                cp.get_default_memory_pool().free_all_blocks()
        phd = pd.concat(ph, ignore_index=True)
        io.write_csv(phd, out / "phases.csv", float_format="%.6g")
        wide = phd.pivot_table(index="phase", columns=["mesh", "kernels"], values="seconds_per_step")
        print("\nwhole steps (cupy backend, s per step):")
        print(wide.to_string(float_format=lambda v: f"{v:.4g}"))
    io.write_json(out / "run.json", provenance.collect(None, be, {
        "script": "workflow/scripts/bsp_kernels_bench.py", "configs": cfgs, "reps": a.reps,
        "fast_paths": kernels.available("cupy")}))
    print("\nBTE phases, ms per step (3 calls), array vs CUDA fast path:")
    show = df[["mesh", "phase", "array_ms_per_step", "fast_ms_per_step", "speedup", "max_rel_diff",
               "fast_GB_per_s", "fast_GFLOP_per_s"]]
    print(show.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
