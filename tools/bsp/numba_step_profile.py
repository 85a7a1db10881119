"""Where a numba time step's ITER goes, piece by piece (docs/performance-numba-iter.md §9): a
Simulation on the numba backend, ``--warmup`` steps, then ``--steps`` steps with every ITER function
of solver/bsp/poisson.py and schrodinger.py that the step calls, every numba kernel of
solver/bsp/kernels/numba/iter.py and the numba table's ITER entries timed (calls and seconds per
step, nested calls counted apart).  ITER minus the top-level pieces is the Python glue of
poisson.potential / _newton_loop / the step.

    python tools/bsp/numba_step_profile.py [config.yaml] --threads T [--steps 5] [--warmup 2] [--set K=V]

Prints per piece the median over the steps of (calls, ms per step) and the serial fraction.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import defaultdict


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", nargs="?", default="config/standard.yaml")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="cpu: process CPU time (a shared machine at one thread); ITER then = potential + "
                        "iter_start + deps_dx_max")
    a = p.parse_args(argv)

    import numba
    import numpy as np

    from solver.bsp import kernels as _kernels
    from solver.bsp import poisson, schrodinger
    from solver.bsp.kernels.numba import iter as it
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(a.config, [f"time.steps={a.warmup + a.steps}", "time.t_end_ps=null", "numerics.backend=numba",
                          f"numerics.threads={a.threads}", "output.progress=false",
                          "output.checkpoint_every_steps=0"] + a.set)
    sim = Simulation(cfg, progress=False)
    sim._timer_rows = []
    sim.startup()
    for _ in range(a.warmup):
        sim.step()

    clock = time.perf_counter if a.clock == "wall" else time.process_time
    acc = defaultdict(lambda: [0, 0.0])
    depth = [0]
    top = set()

    def timed(name, fn, is_top):
        if is_top:
            top.add(name)

        @functools.wraps(fn)
        def call(*args, **kw):
            d = depth[0]
            depth[0] = d + 1
            t = clock()
            try:
                return fn(*args, **kw)
            finally:
                e = acc[name if (d == 0 or not is_top) else name + " (nested)"]
                e[0] += 1
                e[1] += clock() - t
                depth[0] = d
        return call

    # top-level pieces (module attributes the callers look up at call time)
    for mod, names in ((poisson, ("density", "frechet", "newton_rhs", "construct_linsys", "linsys_rhs",
                                  "solve_linsys", "iter_start", "norms", "norms_tail")),
                       (schrodinger, ("eigen", "deps_dx_max"))):
        for n in names:
            if hasattr(mod, n):
                setattr(mod, n, timed(n, getattr(mod, n), True))
    potential = poisson.potential

    def timed_potential(*args, **kw):  # the whole POTENTIAL solve, outside the depth count
        t = clock()
        try:
            return potential(*args, **kw)
        finally:
            e = acc["potential (all)"]
            e[0] += 1
            e[1] += clock() - t
    poisson.potential = timed_potential
    TABLE = _kernels.REGISTRY.table("numba")
    for k in ("newton_norms", "newton_norms_tail", "deps_dx", "newton_iteration", "linsys_rhs"):
        if k in TABLE:
            TABLE[k] = timed("numba:" + k, TABLE[k], True)
    # numba kernels of iter.py (called from its Python wrappers through module globals)
    for n in dir(it):
        f = getattr(it, n)
        if n.startswith("_") and hasattr(f, "py_func"):
            setattr(it, n, timed("k:" + n, f, False))

    per_step = []
    for _ in range(a.steps):
        acc.clear()
        sim.step()
        times = sim.timer.steps[-1]
        per_step.append(({k: tuple(v) for k, v in acc.items()}, dict(times), int(sim.state.newton_iterations)))

    names = sorted({k for r, _, _ in per_step for k in r})
    med = lambda xs: float(np.median(xs))  # noqa: E731
    rows = []
    for k in names:
        calls = med([r.get(k, (0, 0.0))[0] for r, _, _ in per_step])
        ms = med([1e3 * r.get(k, (0, 0.0))[1] for r, _, _ in per_step])
        lo = min(1e3 * r.get(k, (0, 0.0))[1] for r, _, _ in per_step)
        hi = max(1e3 * r.get(k, (0, 0.0))[1] for r, _, _ in per_step)
        rows.append((k, calls, ms, lo, hi))
    if a.clock == "wall":
        it_ms = [1e3 * t.get("step/ITER", 0.0) for _, t, _ in per_step]
    else:
        it_ms = [1e3 * sum(r.get(k, (0, 0.0))[1] for k in ("potential (all)", "iter_start", "deps_dx_max"))
                 for r, _, _ in per_step]
    step_ms = [1e3 * t.get("step", 0.0) for _, t, _ in per_step]
    topsum = [sum(1e3 * r[k][1] for k in r if k in top or k.startswith("numba:")) for r, _, _ in per_step]
    glue = [i - s for i, s in zip(it_ms, topsum)]
    print(f"threads {numba.get_num_threads()}, clock {a.clock}, {a.steps} steps after {a.warmup}; step {med(step_ms):.2f} ms, "
          f"ITER {med(it_ms):.2f} ms (min {min(it_ms):.2f}, max {max(it_ms):.2f}), Newton per step "
          f"{[n for _, _, n in per_step]}")
    print(f"{'piece':<28}{'calls':>7}{'ms/step':>10}{'min':>9}{'max':>9}")
    for k, calls, ms, lo, hi in sorted(rows, key=lambda r: (not (r[0] in top or r[0].startswith('numba:')), -r[2])):
        print(f"{k:<28}{calls:>7.0f}{ms:>10.3f}{lo:>9.3f}{hi:>9.3f}")
    print(f"{'glue (ITER - top pieces)':<28}{'':>7}{med(glue):>10.3f}{min(glue):>9.3f}{max(glue):>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
