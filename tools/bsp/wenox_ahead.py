"""A/B of bsp_weno_dx's fast2 build with the x values loaded BSP_WENOX_AHEAD iterations early (0 = as the
schema builds it): CUDA events per launch, alternating rounds, the outputs compared bit for bit with AHEAD = 0.
    python tools/bsp/wenox_ahead.py MESH REPS ROUNDS [AHEAD ...]      (PYTHONPATH = the repository root)"""
import statistics
import sys

import cupy as cp
import numpy as np

from solver.backend import get_backend
from solver.bsp.kernels.cuda import weno as cw
from solver.bsp.model import Model, load

mesh, reps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
aheads = [int(v) for v in sys.argv[4:]] or [0, 1, 2, 3]
ns, nx, nz, nw, nphi = (int(v) for v in mesh.split("x"))
m = Model(load(None, [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}",
                      "numerics.backend=cupy"]))
be = get_backend("cupy")
cp.random.seed(1)
Phi = cp.asarray((m.s_w * m.maxwellian)[None, :, None, :, None]) * (0.5 + cp.random.random(m.shape))
rho_eq = cp.asarray(1.0 + np.random.default_rng(2).random((2, 3, ns)))
rho = rho_eq * (0.9 + 0.2 * cp.random.random(rho_eq.shape))
r = (rho_eq[0], rho_eq[1], rho[0], rho[1])
base_defines = cw.x_defines
out = {d: cp.empty_like(Phi) for d in aheads}


def launch(d):
    cw.x_defines = lambda model, eps: dict(base_defines(model, eps), BSP_WENOX_AHEAD=d)
    try:
        cw.x_into(m, be, Phi, r, out[d])
    finally:
        cw.x_defines = base_defines


times = {d: [] for d in aheads}
for d in aheads:
    launch(d)
cp.cuda.Device().synchronize()
for _ in range(rounds):
    for d in aheads:
        for _ in range(3):
            launch(d)
        ev = [cp.cuda.Event() for _ in range(reps + 1)]
        ev[0].record()
        for k in range(reps):
            launch(d)
            ev[k + 1].record()
        ev[-1].synchronize()
        times[d] += [cp.cuda.get_elapsed_time(ev[k], ev[k + 1]) * 1e3 for k in range(reps)]
t0 = statistics.median(times[aheads[0]])
for d in aheads:
    t = sorted(times[d])
    same = bool(cp.array_equal(out[d], out[aheads[0]]))
    print(f"{mesh} ahead={d} median {statistics.median(t):8.1f} us  p10 {t[len(t) // 10]:8.1f}  p90 "
          f"{t[9 * len(t) // 10]:8.1f}  n={len(t)}  x{statistics.median(t) / t0:.3f}  equal_to_ahead0 {same}")
