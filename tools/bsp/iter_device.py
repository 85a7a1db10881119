"""One-shot device check and timing of ITER's GPU variants (issue #12; docs/performance-iter-next.md).

    python tools/bsp/iter_device.py --out DIR          (GPU, CuPy; < 5 minutes on one H200)
    python tools/bsp/iter_device.py --out DIR --cpu    (the parts that run on NumPy, small meshes)

Parts (each caught: a failure is printed and recorded, the next part runs):
  linsys  numerics.linsys variants per Newton solve (construct_linsys + solve_linsys of the cupy
          table, random SPD Frechet blocks, Dirichlet x-boundaries) at NX x NZ = 33x33, 65x65,
          97x97, 65x129, 129x129, 33x257: block_cr where NZ <= 127, batched_cr with
          numerics.batched_blocks = lu ("batched_cr lu", replayed from its CUDA graph) and, where
          NZ <= blocktri.GJ_MAX_NZ, gauss_jordan ("batched_cr gj"; "nograph": numerics.linsys_graph
          = false).  Accuracy against SuperLU, Dirichlet entries exact, two solves bitwise equal,
          graph bitwise equal to no graph, and the median time per solve (CUDA events; host_ms: the
          host's wall time of the call);
  gjinv   kernel gj_inverse alone (32 blocks of n = 33 .. 193 per launch) per thread count and
          register row slots: error against numpy, median time per launch;
  eigen   numerics.eigen: the kernel eigenvalues (bisection) vs eigenvalues_nr warm-started from
          the levels of V after a 1e-3 max|V| change of V (a Newton update), per call, at the same
          meshes: difference / ||T||, Sturm evaluations, median time per call;
  runs    whole runs on the GPU: default config (auto variants) against numerics.kernels = array
          after 10 steps (coarse 6x33x33x150x24) and 4 steps (6x17x129x40x12, batched_cr), and two
          default runs bitwise equal;
  phases  ITER and its sub-phases per step (the run's timers) and the host wall time per step, 8
          steps after 3, on 6x65x65x300x48 and 6x65x129x300x48, per linsys configuration (auto,
          block_cr, batched_cr with and without its graph, with gauss_jordan blocks);
  bench   ``python -m solver bsp bench`` (solver.bsp.bench) for cupy on 6x33x33x150x24,
          6x65x65x300x48, 6x65x129x300x48, 6x33x257x150x24 (10 steps after 3 warm-up), with the
          default config and with numerics.eigen = bisection: DIR/bench_auto/, DIR/bench_bisection/.
          On --cpu: numpy, 6x9x13x16x8, 2 steps after 1, default vs numerics.linsys = batched_cr.
``--parts`` picks parts (default all).  Writes DIR/iter_device.csv (part, mesh, impl, quantity, value,
note) and prints a short table last.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from solver.backend import get_backend  # noqa: E402
from solver.bsp import bench, blocktri_batched, kernels, poisson, schrodinger  # noqa: E402
from solver.bsp.blocktri import GJ_MAX_NZ  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402
from solver.io import atomic_path  # noqa: E402

NP = get_backend("numpy")
ROWS: list[dict] = []
GPU_MESHES = ((33, 33), (65, 65), (97, 97), (65, 129), (129, 129), (33, 257))
CPU_MESHES = ((17, 33), (9, 65))
BENCH_GPU = ("6x33x33x150x24", "6x65x65x300x48", "6x65x129x300x48", "6x33x257x150x24")


def row(part, mesh, impl, quantity, value, note=""):
    ROWS.append(dict(part=part, mesh=mesh, impl=impl, quantity=quantity, value=value, note=note))


def model(NX, NZ, *extra):
    return Model(load(None, [f"mesh.NX={NX}", f"mesh.NZ={NZ}", *extra]))


class Env:
    """Backend, transfers and a timer for the GPU (CuPy events) or the CPU (--cpu)."""

    def __init__(self, cpu: bool):
        self.cpu = cpu
        self.backend = NP if cpu else get_backend("cupy")
        self.xp = self.backend.xp
        self.reps, self.warm = (3, 1) if cpu else (20, 3)

    def host(self, a):
        return self.backend.to_numpy(a)

    def time_ms(self, fn, reps=None, host=False):
        """Median milliseconds of fn() over ``reps`` calls after the warm-up calls (CUDA events on the
        GPU; ``host``: the wall time of the call on the host, without a synchronisation)."""
        for _ in range(self.warm):
            fn()
        if host and not self.cpu:
            self.xp.cuda.get_current_stream().synchronize()
        ts = []
        for _ in range(reps or self.reps):
            if self.cpu or host:
                t0 = time.perf_counter()
                fn()
                ts.append(1e3 * (time.perf_counter() - t0))
                if host and not self.cpu:
                    self.xp.cuda.get_current_stream().synchronize()
            else:
                cp = self.xp
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                fn()
                end.record()
                end.synchronize()
                ts.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(ts)


def run_part(name, fn):
    t0 = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # a failing part must not stop the others
        traceback.print_exc()
        row(name, "", "", "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])
    print(f"part {name}: {time.perf_counter() - t0:.1f} s", flush=True)


def _spd_F(rng, nxi, nz, scale=20.0):
    B = rng.standard_normal((nxi, 2 * nz, nz))
    c = rng.uniform(0.0, 1.0, (nxi, 2 * nz))
    return scale * np.einsum("iaj,ia,iak->ijk", B, c, B) / nz


# ---------------------------------------------------------------------- linsys
def part_linsys(env, rng):
    """Per variant: construct + solve through the backend's phase functions (the cupy table; on
    --cpu the array phases of blocktri_batched and the SuperLU reference)."""
    xp = env.xp
    for NX, NZ in (CPU_MESHES if env.cpu else GPU_MESHES):
        mesh = f"{NX}x{NZ}"
        m = model(NX, NZ)
        sysm = poisson.NewtonSystem(m, "dirichlet")
        F = _spd_F(rng, NX - 2, NZ - 2)
        rhs = rng.standard_normal((NX - 2, NZ - 2))
        bvals = sysm.boundary_values(m, 0.3 + 0.1 * rng.standard_normal(NZ), 0.4 + 0.1 * rng.standard_normal(NZ)).ravel()
        A0, b0 = poisson.construct_linsys(m, NP, sysm, F, rhs, bvals)
        x0 = poisson.solve_linsys(m, NP, sysm, A0, b0)
        d = sysm.dirichlet_flat
        if env.cpu:
            variants = ["batched_cr"]
            row("linsys", mesh, "superlu", "ms", env.time_ms(lambda: poisson.solve_linsys(m, NP, sysm, A0, b0)))
        else:
            variants = ((["block_cr"] if NZ <= 127 else []) + ["batched_cr lu"]
                        + (["batched_cr gj", "batched_cr gj nograph"] if NZ <= GJ_MAX_NZ else []))
        xs = {}
        for v in variants:
            try:
                extra = ((["numerics.linsys_graph=false"] if "nograph" in v else [])
                         + ([f"numerics.batched_blocks={'lu' if ' lu' in v else 'gauss_jordan'}"]
                            if " " in v else []))
                mv = model(NX, NZ, f"numerics.linsys={v.split()[0]}", *extra)
                table = kernels.REGISTRY.table(env.backend.name)
                cons = table.get("construct_linsys", blocktri_batched.construct_linsys)
                solve = table.get("solve_linsys", blocktri_batched.solve_linsys)
                Fd, rd = xp.asarray(F), xp.asarray(rhs)
                A, b = cons(mv, env.backend, sysm, Fd, rd, bvals)
                x1, x2 = solve(mv, env.backend, sysm, A, b), solve(mv, env.backend, sysm, A, b)
                x = env.host(x1)
                row("linsys", mesh, v, "maxrel_vs_superlu", float(np.abs(x - x0).max() / np.abs(x0).max()))
                row("linsys", mesh, v, "dirichlet_exact", float(np.array_equal(x[d], bvals[d])))
                row("linsys", mesh, v, "repeat_bitwise", float(np.array_equal(x, env.host(x2))))
                xs[v] = x
                if v == "batched_cr gj nograph" and "batched_cr gj" in xs:
                    row("linsys", mesh, "batched_cr gj", "graph_bitwise_nograph",
                        float(np.array_equal(x, xs["batched_cr gj"])))
                reps = None
                row("linsys", mesh, v, "ms", env.time_ms(lambda: solve(mv, env.backend, sysm, A, b), reps))
                row("linsys", mesh, v, "host_ms", env.time_ms(lambda: solve(mv, env.backend, sysm, A, b), reps, host=True))
                row("linsys", mesh, v, "construct_ms",
                    env.time_ms(lambda: cons(mv, env.backend, sysm, Fd, rd, bvals), reps))
                del A, b
            except Exception as exc:
                traceback.print_exc()
                row("linsys", mesh, v, "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])
        c = blocktri_batched.cr_batched_counts(NX, NZ)
        row("linsys", mesh, "batched_cr", "model_gflop", sum(lv["getrf"] + lv["getrs"] + lv["gemm"] + lv["back"]
                                                             for lv in c) / 1e9)
        row("linsys", mesh, "batched_cr", "model_launches", sum(lv["launches"] for lv in c))


# ---------------------------------------------------------------------- gjinv
GJ_SIZES = (65, 97, 129, 165, 193)
GJ_CONFIGS = ((1024, 8), (1024, 16), (1024, 24), (512, 32))


def part_gjinv(env, rng, m=32):
    """Kernel gj_inverse alone: m blocks of size n per launch (one level of the batched solve),
    per (threads at most, register row slots): max error against numpy's inverse and the median
    time per launch (the per-step latency is ms / n)."""
    from solver.bsp.kernels.cuda import newton
    for n in GJ_SIZES:
        a = rng.standard_normal((m, n, n)) + 2.0 * np.sqrt(n) * np.eye(n)
        want = np.linalg.inv(a)
        ad = env.xp.asarray(a)
        for mt, rr in GJ_CONFIGS:
            name = f"t{mt} r{rr}"
            try:
                rg, nt, rreg, smem = newton.gj_config(n, mt, rr)
                got = env.host(newton.gj_inverse(ad, max_threads=mt, rreg=rr))
                row("gjinv", str(n), name, "maxrel", float(np.abs(got - want).max() / np.abs(want).max()),
                    f"RG {rg} NT {nt} RREG {rreg} smem {smem}")
                row("gjinv", str(n), name, "ms", env.time_ms(lambda: newton.gj_inverse(ad, max_threads=mt, rreg=rr)))
            except Exception as exc:
                row("gjinv", str(n), name, "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])


# ---------------------------------------------------------------------- eigen
def part_eigen(env, rng):
    if env.cpu:
        row("eigen", "", "eigenvalues_nr", "skipped", float("nan"),
            "needs CuPy (CPU: tests/test_bsp_kernels_cuda_eigen.py, g++ emulation)")
        return
    from solver.bsp.kernels.cuda import eigen
    xp = env.xp
    ic = {}
    for NX, NZ in GPU_MESHES:
        mesh = f"{NX}x{NZ}"
        try:
            m = model(NX, NZ)
            if NZ not in ic:  # INITCOND at NX = 17 on the GPU (default variants), columns spread over NX
                m17 = model(17, NZ)
                ic[NZ] = env.host(poisson.initcond(m17, env.backend).V)
            idx = np.round(np.linspace(0, 16, NX)).astype(int)
            Vh = np.ascontiguousarray(ic[NZ][idx])
            V = xp.asarray(Vh)
            V1 = xp.asarray(np.ascontiguousarray(Vh + 1e-3 * np.abs(Vh).max() * rng.standard_normal(Vh.shape)))
            tn = max(float(np.abs(schrodinger._kinetic(m, nu)[0]).max()) for nu in range(3)) + float(np.abs(Vh).max())
            e_bis, Dg_bis = eigen.eigenvalues(m, V)
            e_cold, Dg_cold = eigen.eigenvalues_nr(m, V)
            row("eigen", mesh, "newton cold", "bitwise_equal_bisection",
                float(bool(xp.array_equal(e_cold, e_bis)) and bool(xp.array_equal(Dg_cold, Dg_bis))))
            e1_bis, _ = eigen.eigenvalues(m, V1)
            e1, _, its = eigen.eigenvalues_nr(m, V1, e_bis, iterations=True)
            row("eigen", mesh, "newton warm", "maxdiff_over_Tnorm", float(xp.abs(e1 - e1_bis).max()) / tn,
                "V + 1e-3 max|V| noise")
            row("eigen", mesh, "newton warm", "evaluations_mean", float(its.mean()))
            row("eigen", mesh, "newton warm", "evaluations_max", float(its.max()))
            row("eigen", mesh, "bisection", "ms", env.time_ms(lambda: eigen.eigenvalues(m, V1)))
            row("eigen", mesh, "newton warm", "ms", env.time_ms(lambda: eigen.eigenvalues_nr(m, V1, e_bis)))
            row("eigen", mesh, "ipim a", "ms", env.time_ms(lambda: eigen.ipim(m, e1, Dg_bis)))
        except Exception as exc:
            traceback.print_exc()
            row("eigen", mesh, "", "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])


# ---------------------------------------------------------------------- whole runs
def _run(env, mesh, steps, *extra):
    from solver.bsp.analysis import parse_mesh
    from solver.bsp.simulation import Simulation

    cfg = load(None, [f"mesh.{k}={v}" for k, v in parse_mesh(mesh).items()]
               + [f"numerics.backend={env.backend.name}", f"time.steps={steps}", "time.t_end_ps=null",
                  "output.progress=false", "output.checkpoint_every_steps=0", *extra])
    sim = Simulation(cfg, env.backend, None, progress=False)
    sim.run(resume=False)
    impl = kernels.implementations(sim.model, env.backend)
    return {k: env.host(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}, impl


def part_runs(env, rng):
    cases = (("6x9x13x16x8", 3),) if env.cpu else (("6x33x33x150x24", 10), ("6x17x129x40x12", 4))
    for mesh, steps in cases:
        try:
            auto, impl = _run(env, mesh, steps)
            auto2, _ = _run(env, mesh, steps)
            ref, _ = _run(env, mesh, steps, "numerics.kernels=array")
            note = f"{steps} steps; eigen: {impl['eigen']}; solve_linsys: {impl['solve_linsys']}"
            for k in ref:
                rel = float(np.abs(auto[k] - ref[k]).max() / np.abs(ref[k]).max())
                row("runs", mesh, "auto vs array", f"maxrel_{k}", rel, note)
            row("runs", mesh, "auto", "repeat_bitwise", float(all(np.array_equal(auto[k], auto2[k]) for k in auto)), note)
        except Exception as exc:
            traceback.print_exc()
            row("runs", mesh, "", "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])


# ---------------------------------------------------------------------- ITER phases per step
PHASE_MESHES = ("6x65x65x300x48", "6x65x129x300x48")
PHASE_CONFIGS = {"auto": [], "block_cr": ["numerics.linsys=block_cr"],
                 "batched_cr lu": ["numerics.linsys=batched_cr", "numerics.batched_blocks=lu"],
                 "batched_cr gj": ["numerics.linsys=batched_cr", "numerics.batched_blocks=gauss_jordan"]}


def part_phases(env, steps=8, warm=3):
    """Median ms per step of ITER and its sub-phases (the run's phase timers, CUDA events) and the
    host wall time per step, over ``steps`` steps after ``warm``, per linsys configuration."""
    from solver.bsp.analysis import parse_mesh
    from solver.bsp.simulation import Simulation

    for mesh in (("6x9x13x16x8",) if env.cpu else PHASE_MESHES):
        for name, extra in PHASE_CONFIGS.items():
            if "block_cr" in name and parse_mesh(mesh)["NZ"] > 127:
                continue
            try:
                cfg = load(None, [f"mesh.{k}={v}" for k, v in parse_mesh(mesh).items()]
                           + [f"numerics.backend={env.backend.name}", f"time.steps={steps + warm}", "time.t_end_ps=null",
                              "output.progress=false", "output.checkpoint_every_steps=0", *extra])
                sim = Simulation(cfg, env.backend, None, progress=False)
                sim._timer_rows = []  # as Simulation.run (and bench.run_case)
                sim.startup()
                wall, newton = [], []
                for k in range(steps + warm):
                    t0 = time.perf_counter()
                    sim.step()
                    if k >= warm:
                        wall.append(1e3 * (time.perf_counter() - t0))
                        newton.append(sim.state.newton_iterations)
                timed = sim.timer.steps[warm:]
                keys = sorted(k for k in timed[0] if k.startswith("step/ITER"))
                for k in keys:
                    row("phases", mesh, name, k + "_ms", statistics.median(1e3 * t.get(k, 0.0) for t in timed))
                row("phases", mesh, name, "step_wall_ms", statistics.median(wall),
                    f"p10-p90 {np.percentile(wall, 10):.2f}-{np.percentile(wall, 90):.2f}")
                row("phases", mesh, name, "newton_per_step", float(np.mean(newton)))
            except Exception as exc:
                traceback.print_exc()
                row("phases", mesh, name, "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])


# ---------------------------------------------------------------------- bench
def part_bench(env, out, timeout):
    if env.cpu:
        cases = [bench.Case.parse("6x9x13x16x8:numpy:1:2:1")]
        configs = {"auto": [], "batched_cr": ["numerics.linsys=batched_cr"]}
    else:
        cases = [bench.Case.parse(f"{mesh}:cupy:1:10:3") for mesh in BENCH_GPU]
        configs = {"auto": [], "bisection": ["numerics.eigen=bisection"]}
    for name, overrides in configs.items():
        steps, spread, records = bench.bench(None, overrides, cases, timeout=timeout)
        bench.write_bench(Path(out) / f"bench_{name}", steps, spread,
                          {"overrides": overrides, "cases": records, "startup_s": bench.STARTUP_S})
        for r in steps.to_dict("records"):
            for q in ("step_ms", "iter_ms", "newton_per_step", "startup_s"):
                row("bench", r["mesh"], name, q, float("nan") if r[q] is None else float(r[q]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--cpu", action="store_true", help="NumPy only (the parts that run without CuPy)")
    ap.add_argument("--bench-timeout", type=float, default=60.0, help="seconds per bench case")
    ap.add_argument("--parts", default="linsys,gjinv,eigen,runs,phases,bench", help="comma-separated parts to run")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    t0 = time.perf_counter()
    env = Env(args.cpu)
    rng = np.random.default_rng(2026)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for name, fn in (("linsys", lambda: part_linsys(env, rng)), ("gjinv", lambda: part_gjinv(env, rng)),
                     ("eigen", lambda: part_eigen(env, rng)),
                     ("runs", lambda: part_runs(env, rng)), ("phases", lambda: part_phases(env)),
                     ("bench", lambda: part_bench(env, args.out, args.bench_timeout))):
        if name in parts:
            run_part(name, fn)
    out = Path(args.out) / "iter_device.csv"
    with atomic_path(out) as tmp:
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["part", "mesh", "impl", "quantity", "value", "note"])
            w.writeheader()
            w.writerows(ROWS)
    print(f"\nwrote {out} ({len(ROWS)} rows) in {time.perf_counter() - t0:.0f} s "
          f"({'cpu/numpy' if args.cpu else 'gpu/cupy'})\n")
    print(f"{'part':6} {'mesh':16} {'impl':14} {'quantity':24} {'value':>11}  note")
    for r in ROWS:
        print(f"{r['part']:6} {r['mesh']:16} {r['impl']:14} {r['quantity']:24} {r['value']:11.4g}  {r['note'][:90]}")
    return 1 if any(r["quantity"] == "error" for r in ROWS) else 0


if __name__ == "__main__":
    sys.exit(main())
