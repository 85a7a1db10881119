"""Time one ITER (the POTENTIAL Newton solve) per subphase: reference vs the numba fast paths of
solver/bsp/kernels/numba/iter.py, on one mesh and one thread count (docs/performance-numba-iter.md).

    python tools/bsp/numba_iter_bench.py --threads 16 [config.yaml] [--set mesh.NX=33 ...] [--repeat 5]

The problem: start-up (INITCOND, THERMEQUIL) and one time step on the numba backend; then
POTENTIAL from the potential at the start of that step with the densities at its end (a few
Newton iterations).  "reference" is poisson.potential with the lookups of today's numba backend
(host LAPACK eigenpairs, NumPy Frechet, SuperLU; BLAS threads = --threads where the BLAS obeys
OMP/OPENBLAS/MKL_NUM_THREADS, set before NumPy is imported); "numba_iter" is the numba
backend's own ITER table (kernels/numba/iter.py).  Prints ms per ITER call and per Newton iteration for each
subphase (best of --repeat calls), the iteration count and the largest difference of V.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager
from types import SimpleNamespace


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", nargs="?", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="cpu: process CPU time (all threads summed; for 1 thread on a busy machine)")
    return p.parse_args(argv)


ITER_PHASES = ("eigen", "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms")


@contextmanager
def reference_iter():
    """The numba table without its ITER entries: ITER on the array reference (host LAPACK, SuperLU)."""
    from solver.bsp import kernels

    table = kernels.REGISTRY.table("numba")
    saved = {k: table.pop(k) for k in ITER_PHASES if k in table}
    try:
        yield
    finally:
        table.update(saved)


SUBPHASES = {"eigen": ("eigen",), "Frechet": ("Frechet",),
             "construct": ("construct_linsys", "constrlinsys"), "solve": ("solve_linsys", "solvelinsys")}


def main(argv=None) -> int:
    a = _args(argv)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(k, str(a.threads))
    import numpy as np

    from solver.backend import get_backend
    from solver.bsp import poisson
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation
    from solver import timing
    from solver.timing import PhaseTimer

    clock = time.perf_counter if a.clock == "wall" else time.process_time
    if a.clock == "cpu":  # PhaseTimer reads time.perf_counter: give it the CPU clock
        timing.time = SimpleNamespace(perf_counter=time.process_time)

    cfg = load(a.config, list(a.overrides) + ["numerics.backend=numba", f"numerics.threads={a.threads}",
                                              "output.progress=false", "output.checkpoint_every_steps=0"])
    be = get_backend("numba", a.threads)
    sim = Simulation(cfg, backend=be, progress=False)
    t0 = time.perf_counter()
    sim.startup()
    V_prev, state = sim.state.V.copy(), sim._iter
    sim._timer_rows = []  # what Simulation.run sets before its first step
    sim.step()
    rho = sim.state.rho.copy()
    m = sim.model
    mesh = cfg["mesh"]
    print(f"mesh N_sbn x NX x NZ x NW x NPHI = {mesh['N_sbn']}x{mesh['NX']}x{mesh['NZ']}x{mesh['NW']}x{mesh['NPHI']}, "
          f"threads {be.threads}, set-up {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    def one(tm):
        return poisson.potential(m, be, V_prev, rho, sim.eq.V_b, timer=tm, state=state)

    rows = {}
    results = {}
    for variant in ("reference", "numba_iter"):
        with (reference_iter() if variant == "reference" else _nothing()):
            one(None)  # compile / warm up
            best = None
            for _ in range(a.repeat):
                tm = PhaseTimer(be)
                t = clock()
                with tm.phase("ITER"):
                    res = one(tm)
                wall = clock() - t
                step = tm.end_step()
                sub = {k: sum(step.get("ITER/" + n, 0.0) for n in names) for k, names in SUBPHASES.items()}
                sub["ITER"] = wall
                if best is None or wall < best[0]["ITER"]:
                    best = (sub, res.iterations)
        rows[variant] = best
        results[variant] = res
    it = {k: v[1] for k, v in rows.items()}
    print(f"\nITER (POTENTIAL) per call, ms of {a.clock} time (best of {a.repeat}); Newton iterations: "
          + ", ".join(f"{k} {v}" for k, v in it.items()))
    print(f"{'subphase':<12}{'reference':>12}{'numba_iter':>12}{'speed-up':>10}{'ref/iter':>10}{'numba/iter':>12}")
    for k in list(SUBPHASES) + ["other", "ITER"]:
        vals = []
        for variant in ("reference", "numba_iter"):
            sub = rows[variant][0]
            v = sub["ITER"] - sum(sub[s] for s in SUBPHASES) if k == "other" else sub[k]
            vals.append(1e3 * v)
        print(f"{k:<12}{vals[0]:>12.2f}{vals[1]:>12.2f}{vals[0] / max(vals[1], 1e-12):>10.1f}"
              f"{vals[0] / it['reference']:>10.2f}{vals[1] / it['numba_iter']:>12.2f}")
    V0, V1 = np.asarray(results["reference"].V), np.asarray(results["numba_iter"].V)
    print(f"max |V_numba_iter - V_reference| / max |V_reference| = {np.abs(V1 - V0).max() / np.abs(V0).max():.2e}")
    return 0


@contextmanager
def _nothing():
    yield


if __name__ == "__main__":
    sys.exit(main())
