"""Time GaussJordanCR.resolve, numerics.resolve levels vs fused, as captured CUDA graphs (one graph per
variant, the resolve alone, as BatchedGraph.resolve replays it): CUDA events around each replay, REPS
replays per variant, interleaved in blocks of 10; prints the median and the 10-90 % spread in us, and
whether the two variants' x are bitwise equal.  Usage: python tools/bsp/resolve_probe.py NX NZ [REPS]."""
from __future__ import annotations

import sys

import numpy as np

import cupy as cp

from solver.bsp.kernels.cuda import _cublas, newton


def main(NX: int, NZ: int, reps: int = 100) -> None:
    rng = np.random.default_rng(1)
    D = rng.standard_normal((NX, NZ, NZ)) * 0.3 + np.eye(NZ) * (0.3 * NZ + 4.0)
    lo, up = rng.standard_normal((NX, NZ)), rng.standard_normal((NX, NZ))
    lo[0] = up[-1] = 0.0
    dD, dlo, dup = cp.asarray(D), cp.asarray(lo), cp.asarray(up)
    db = cp.asarray(rng.standard_normal((NX, NZ)))
    dirm = cp.zeros((NX, NZ), dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        s = newton.GaussJordanCR(NX, NZ, _cublas.Blas(stream), "fused")
        s(dD, dlo, dup, db, dirm)
        graphs, xs = {}, {}
        for kind in ("levels", "fused"):
            s.resolve_kind = kind
            s.resolve(dlo, dup, db, dirm)
            stream.synchronize()
            stream.begin_capture()
            x = s.resolve(dlo, dup, db, dirm)
            graphs[kind] = stream.end_capture()
            graphs[kind].launch(stream)
            stream.synchronize()
            xs[kind] = cp.asnumpy(x)
        times = {k: [] for k in graphs}
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        for _ in range(reps // 10):
            for kind, g in graphs.items():
                for _ in range(10):
                    e0.record(stream)
                    g.launch(stream)
                    e1.record(stream)
                    e1.synchronize()
                    times[kind].append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
    print(f"resolve NX={NX} NZ={NZ}: fused grid {s.grid}, levels {2 * len(s.levels) + 2} launches; "
          f"fused == levels bitwise: {np.array_equal(xs['fused'], xs['levels'])}")
    for kind, t in times.items():
        t = np.sort(t)
        print(f"  {kind:6s} median {np.median(t):7.1f} us  (p10 {t[len(t) // 10]:.1f}, p90 {t[9 * len(t) // 10]:.1f}, "
              f"n {len(t)})")
    print(f"RESOLVE,{NX},{NZ},{np.median(times['levels']):.1f},{np.median(times['fused']):.1f},{s.grid[0]}x{s.grid[1]}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 100)
