"""The numba Newton solve with the kept factors (numerics.iter_jacobian: step; docs/performance-numba-iter.md §8):

    python tools/bsp/numba_resolve_bench.py kernels --threads T [--meshes 65x65,129x129] [--repeat 7]
        one solve_linsys per call, factor-and-solve (reuse=False) against the re-solve with the kept
        factors (reuse=True), wall ms (min, median) and process CPU ms (min);
    python tools/bsp/numba_resolve_bench.py steps --threads T [--steps 4] [--warmup 1] [config] [--set K=V ...]
        time steps of the standard mesh 6x65x65x300x48 (mesh keys overridable with --set): per timed
        step the ITER timers (wall ms), ITER's process CPU ms, Newton iterations, factorizations and
        re-solves, one JSON line (counts of the re-solve are 0 on code without it).

Run from the tree to measure with PYTHONPATH=. (a script's folder, not the cwd, is first on sys.path)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _kernels(a) -> None:
    import numpy as np

    from solver.backend import get_backend
    from solver.bsp import poisson
    from solver.bsp.kernels.numba import iter as ni
    from solver.bsp.model import Model, load

    rng = np.random.default_rng(0)
    be = get_backend("numba", threads=a.threads)
    for mesh in a.meshes.split(","):
        NX, NZ = map(int, mesh.split("x"))
        m = Model(load(None, [f"mesh.NX={NX}", f"mesh.NZ={NZ}"]))
        sysm = poisson.NewtonSystem(m, "dirichlet")
        G = rng.standard_normal((NX - 2, NZ - 2, NZ - 2))
        F = np.einsum("ijk,ilk->ijl", G, G) / NZ  # SPD Frechet-like blocks
        rhs = rng.standard_normal((NX - 2, NZ - 2))
        bvals = sysm.boundary_values(m, np.full(NZ, 0.3), np.full(NZ, 0.4)).ravel()
        A, b = ni.construct_linsys(m, be, sysm, F, rhs, bvals)
        out = {}
        for name, reuse in (("factor", False), ("resolve", True), ("factor", False), ("resolve", True)):
            w, c = [], []
            for _ in range(a.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                ni.solve_linsys(m, be, sysm, A, b, reuse)
                w.append(time.perf_counter() - t0)
                c.append(time.process_time() - c0)
            out[name] = (1e3 * min(w), 1e3 * float(np.median(w)), 1e3 * min(c))
        print(f"{mesh} threads={a.threads} " + "  ".join(
            f"{k}: wall min {v[0]:.3f} median {v[1]:.3f} cpu min {v[2]:.3f} ms" for k, v in out.items()), flush=True)


def _steps(a) -> None:
    from solver.bsp import poisson
    from solver.bsp.kernels.numba import iter as ni
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cnt = {"factor": 0, "resolve": 0, "cpu": 0.0}

    def counted(name, key):
        fn = getattr(ni, name)

        def call(*x, **k):
            cnt[key] += 1
            return fn(*x, **k)
        setattr(ni, name, call)
    counted("_cr_solve", "factor")
    if hasattr(ni, "_cr_resolve"):
        counted("_cr_resolve", "resolve")
    potential = poisson.potential

    def timed(*x, **k):
        c = time.process_time()
        try:
            return potential(*x, **k)
        finally:
            cnt["cpu"] += time.process_time() - c
    poisson.potential = timed
    dims = dict(zip(("N_sbn", "NX", "NZ", "NW", "NPHI"), (6, 65, 65, 300, 48)))
    ov = ([f"mesh.{k}={v}" for k, v in dims.items()]
          + [f"time.steps={a.steps + a.warmup}", "time.t_end_ps=null", "numerics.backend=numba",
             f"numerics.threads={a.threads}", "output.progress=false", "output.checkpoint_every_steps=0"] + a.overrides)
    sim = Simulation(load(a.config, ov), progress=False)
    sim._timer_rows = []
    sim.startup()
    rows = []
    for s in range(a.steps + a.warmup):
        before = dict(cnt)
        sim.step()
        if s >= a.warmup:
            t = sim.timer.steps[-1]
            rows.append({**{k: round(1e3 * v, 3) for k, v in t.items() if k.startswith("step/ITER") or k == "step"},
                         "iter_cpu": round(1e3 * (cnt["cpu"] - before["cpu"]), 3),
                         "newton": int(sim.state.newton_iterations),
                         "factor": cnt["factor"] - before["factor"], "resolve": cnt["resolve"] - before["resolve"]})
    print(json.dumps(rows))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("kernels", "steps"))
    p.add_argument("config", nargs="?", default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--meshes", default="65x65,129x129")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    a = p.parse_args(argv)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = str(a.threads)
    (_kernels if a.what == "kernels" else _steps)(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
