"""Device timing of the x kernel bsp_weno_dx (phase WENO_x, one RK stage) for numerics.bte_kernels fast vs fast2
on a synthetic stage of one mesh (docs/performance-bte-kernels.md §13; the A/B build fast2up of §13.4, the upwards
walk, became fast2's only form).  Phi as in bte_s12_ktime.py (the start-up
shape s_w M times 0.5 + U(0, 1)), open contacts with the reference rule, rho = rho_eq (0.9 + 0.2 U).  The variants
are timed in alternating rounds of ``reps`` launches each; per round the launches are queued back to back behind
3 untimed ones (so the host's launch overhead is hidden) with a CUDA event before each and one after the last:
the time of launch i = elapsed(event i, event i + 1).
Prints CSV lines: mesh,variant,median_us,min_us,p10_us,p90_us,n,hash,repeat_equal,rel_vs_fast,rel_vs_array,eq_fast2
(hash: the sum of the output's 64-bit words mod 2^64, hex, on the device; repeat_equal: the output after the
timed launches equals the first one's; rel_vs_fast: max |x - x_fast| / max |x_fast|; rel_vs_array: the same
against weno.weno_x's array code on the same GPU (numerics.kernels array), i.e. the reference's operations;
standard mesh only; eq_fast2: the values equal fast2's, np.array_equal: -0 == +0).
argv: mesh reps rounds"""
import math
import sys

import cupy as cp
import numpy as np

from solver.backend import get_backend
from solver.bsp import weno
from solver.bsp.kernels.cuda import weno as cw
from solver.bsp.model import Model, load

mesh, reps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
VARIANTS = ("fast", "fast2")
ns, nx, nz, nw, nphi = (int(v) for v in mesh.split("x"))
base = [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}",
        "numerics.backend=cupy"]
models = {v: Model(load(None, base + [f"numerics.bte_kernels={v}"])) for v in VARIANTS}
m = models["fast"]
be = get_backend("cupy")
cp.random.seed(1)
prof = cp.asarray((m.s_w * m.maxwellian)[None, :, None, :, None])
Phi = prof * (0.5 + cp.random.random(m.shape))
rho_eq = cp.asarray(1.0 + np.random.default_rng(2).random((2, 3, ns)))
rho = rho_eq * (0.9 + 0.2 * cp.random.random(rho_eq.shape))
r = (rho_eq[0], rho_eq[1], rho[0], rho[1])
out = {v: cp.empty_like(Phi) for v in VARIANTS}
for v in VARIANTS:
    defs = cw.x_defines(models[v], weno._eps(models[v]))
    assert ("BSP_WENO_FAST2" in defs) == (v == "fast2"), (v, defs)



def launch(v):
    cw.x_into(models[v], be, Phi, r, out[v])


def words(a):
    return hex(int(a.view(cp.uint64).sum(dtype=cp.uint64)))


first = {}
for v in VARIANTS:
    for _ in range(3):
        launch(v)
    cp.cuda.Device().synchronize()
    first[v] = out[v].copy()
ts = {v: [] for v in VARIANTS}
for _ in range(rounds):
    for v in VARIANTS:
        for _ in range(3):
            launch(v)
        ev = [cp.cuda.Event() for _ in range(reps + 1)]
        for i in range(reps):
            ev[i].record()
            launch(v)
        ev[reps].record()
        ev[reps].synchronize()
        ts[v] += [cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) * 1e3 for i in range(reps)]
ref_arr = None
if Phi.size <= 1 << 25:  # standard mesh; the fine mesh's array code would hold tens of GB of temporaries
    ref_arr = weno.weno_x(Model(load(None, base + ["numerics.kernels=array"])), be, Phi, *r)
ref = out["fast"]
for v in VARIANTS:
    t = np.asarray(ts[v])
    same = bool(cp.array_equal(out[v], first[v]))
    rf = float(cp.abs(out[v] - ref).max() / cp.abs(ref).max())
    ra = "-" if ref_arr is None else f"{float(cp.abs(out[v] - ref_arr).max() / cp.abs(ref_arr).max()):.3e}"
    assert math.isfinite(rf)
    print(f"{mesh},{v},{np.median(t):.2f},{t.min():.2f},{np.percentile(t, 10):.2f},{np.percentile(t, 90):.2f},"
          f"{t.size},{words(out[v])},{same},{rf:.3e},{ra},{bool(cp.array_equal(out[v], out['fast2']))}", flush=True)
