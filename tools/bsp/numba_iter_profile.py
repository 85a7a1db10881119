"""Where the numba ITER time goes at T threads (docs/performance-numba-iter.md §7): one POTENTIAL
solve (a few Newton iterations) with every numba kernel call of solver/bsp/kernels/numba/iter.py
timed (calls, total ms), the subphase wrappers timed around them (wrapper - kernels = serial glue),
the cost of an empty parallel region, and the eigen kernel under static and dynamic
(numba.parallel_chunksize) schedules.

    python tools/bsp/numba_iter_profile.py --threads 16 [config.yaml] [--repeat 5]

The state: start-up (INITCOND, THERMEQUIL) of the config on the numba backend; POTENTIAL from its
potential with the densities scaled by 1.01 (so that Newton iterates)."""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", nargs="?", default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)

    import numba
    import numpy as np
    from numba import njit, prange

    from solver.backend import get_backend
    from solver.bsp import poisson
    from solver.bsp.kernels.numba import iter as it
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(a.config, ["numerics.backend=numba", f"numerics.threads={a.threads}", "output.progress=false",
                          "output.checkpoint_every_steps=0"])
    be = get_backend("numba", a.threads)
    sim = Simulation(cfg, backend=be, progress=False)
    sim.startup()
    m, V0, rho = sim.model, sim.state.V.copy(), sim.state.rho * 1.01

    def solve():
        return poisson.potential(m, be, V0, rho, sim.eq.V_b)

    solve()  # compile / load the cache
    kernels = [n for n in dir(it) if n.startswith("_") and n.endswith(("_kernel", "eliminate", "update", "backsub"))
               and hasattr(getattr(it, n), "py_func")]
    wrappers = ["eigen", "frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms"]
    acc = defaultdict(lambda: [0, 0.0])

    def timed(name, fn):
        def call(*args, **kw):
            t = time.perf_counter()
            r = fn(*args, **kw)
            e = acc[name]
            e[0] += 1
            e[1] += time.perf_counter() - t
            return r
        return call

    saved = {n: getattr(it, n) for n in kernels + wrappers}
    from solver.bsp import kernels as _kernels
    TABLE = _kernels.REGISTRY.table("numba")
    saved_table = dict(TABLE)
    best = None
    for _ in range(a.repeat):
        acc.clear()
        for n in kernels:
            setattr(it, n, timed(n, saved[n]))
        for k, fn in saved_table.items():
            if fn in saved.values():
                TABLE[k] = timed(fn.__name__, fn)
        t = time.perf_counter()
        res = solve()
        wall = time.perf_counter() - t
        for n, fn in saved.items():
            setattr(it, n, fn)
        TABLE.update(saved_table)
        if best is None or wall < best[0]:
            best = (wall, {k: tuple(v) for k, v in acc.items()}, res.iterations)
    wall, rows, iters = best
    print(f"threads {numba.get_num_threads()}, POTENTIAL {wall * 1e3:.2f} ms, {iters} Newton iterations "
          f"(best of {a.repeat}); per call of POTENTIAL:")
    print(f"{'function':<20}{'calls':>7}{'ms':>10}{'us/call':>10}")
    for k, (n, s) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"{k:<20}{n:>7}{s * 1e3:>10.3f}{s * 1e6 / max(n, 1):>10.1f}")
    kern = sum(s for k, (n, s) in rows.items() if k in kernels)
    wrap = sum(s for k, (n, s) in rows.items() if k in wrappers)
    print(f"kernels {kern * 1e3:.3f} ms, wrappers {wrap * 1e3:.3f} ms (glue inside them {1e3 * (wrap - kern):.3f}), "
          f"outside the wrappers {1e3 * (wall - wrap):.3f} ms")

    @njit(parallel=True)
    def empty(x):
        for i in prange(x.shape[0]):
            x[i] += 1.0

    x = np.zeros(numba.get_num_threads())
    empty(x)
    ts = []
    for _ in range(300):
        t = time.perf_counter()
        empty(x)
        ts.append(time.perf_counter() - t)
    ts.sort()
    print(f"empty parallel region: median {ts[150] * 1e6:.1f} us, min {ts[0] * 1e6:.1f} us")

    V = np.ascontiguousarray(V0, dtype=float)
    for chunk in (0, 1, 2, 4):
        tt = []
        for _ in range(2 * a.repeat):
            with numba.parallel_chunksize(chunk):
                t = time.perf_counter()
                it.eigen(m, be, V)
                tt.append(time.perf_counter() - t)
        tt.sort()
        print(f"eigen, parallel_chunksize {chunk}: best {tt[0] * 1e3:.3f} ms, median {tt[len(tt) // 2] * 1e3:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
