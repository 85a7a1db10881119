"""Device timing of the fused w + phi + RK kernel (bsp_wphi_rk, stage 1 with scattering) for
numerics.bte_kernels fast vs fast2 on a synthetic stage of one mesh (docs/performance-bte-kernels.md §12;
the synthetic stage of round 7's ktime.py).  The variants are timed in alternating rounds of ``reps``
launches (CUDA events around each launch), so that clock and neighbour drift hit both alike.
Prints CSV lines: mesh,variant,median_ms,min_ms,p10_ms,p90_ms,n,sha1,repeat_equal,rel_vs_fast
(sha1 of Phi^1, standard mesh only; repeat_equal: the output after the timed launches equals the first one's; rel_vs_fast: max |Phi1 - Phi1_fast| /
max |Phi1_fast|).  argv: mesh reps rounds"""
import hashlib
import math
import sys

import cupy as cp
import numpy as np

from solver.backend import get_backend
from solver.bsp import scattering
from solver.bsp.kernels.cuda import rk
from solver.bsp.kernels.cuda import scattering as cs
from solver.bsp.model import Model, load

mesh, reps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
VARIANTS = ("fast", "fast2")
ns, nx, nz, nw, nphi = (int(v) for v in mesh.split("x"))
base = [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}",
        "numerics.backend=cupy"]
models = {v: Model(load(None, base + [f"numerics.bte_kernels={v}"])) for v in VARIANTS}
m = models["fast"]
be = get_backend("cupy")
NP = get_backend("numpy")
x = m.x[:, None, None]
eps = 1.5 * np.arange(ns)[None, None, :] ** 2 + np.array([0.0, 0.0, -1.0])[None, :, None] + 2.0 * np.sin(math.pi * x)
deps = np.broadcast_to(2.0 * math.pi * np.cos(math.pi * x), eps.shape).copy()
chi = np.zeros((nx, 3, ns, nz))
for p in range(ns):
    chi[:, :, p, :] = np.sin((p + 1) * math.pi * m.z)
chi /= np.sqrt(m.dz * (chi**2).sum(-1, keepdims=True))
W = cp.asarray(scattering.overlap(m, NP, chi))
cp.random.seed(1)
prof = cp.asarray((m.s_w * m.maxwellian)[None, :, None, :, None])
Phi = prof * (0.5 + cp.random.random(m.shape))
PhiHat = Phi.sum(-1) * m.dphi
e, d = cp.asarray(eps), cp.asarray(deps)
tx = cp.random.random(m.shape) * 1e-2
G = cp.empty(PhiHat.shape)
Lc = cp.empty(PhiHat.shape)
cs.gain_into(m, be, PhiHat, e, W, None, G)
cs.loss_into(m, be, e, W, None, Lc)
alpha = float(abs(deps).max() * m.A3)
out = {v: (cp.empty_like(Phi), cp.empty(Phi.shape[:3]), cp.empty_like(PhiHat)) for v in VARIANTS}


def launch(v):
    Phi1, rho1, PH1 = out[v]
    rk.stage_into(models[v], be, 1, Phi, Phi, G, Lc, tx, d, Phi1, rho1, PH1, alpha=alpha, dt=1e-3)


def sha(a):
    return hashlib.sha1(cp.asnumpy(a).tobytes()).hexdigest()[:12]


first = {}
for v in VARIANTS:
    for _ in range(3):
        launch(v)
    cp.cuda.Device().synchronize()
    first[v] = out[v][0].copy()
ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
ts = {v: [] for v in VARIANTS}
for _ in range(rounds):
    for v in VARIANTS:
        for _ in range(reps):
            ev0.record()
            launch(v)
            ev1.record()
            ev1.synchronize()
            ts[v].append(cp.cuda.get_elapsed_time(ev0, ev1))
ref = out["fast"][0]
for v in VARIANTS:
    t = np.asarray(ts[v])
    h = sha(out[v][0]) if out[v][0].size <= 1 << 25 else "-"  # fine mesh: no 1 GB copy to the host
    same = bool(cp.array_equal(out[v][0], first[v]))
    r = float(cp.abs(out[v][0] - ref).max() / cp.abs(ref).max())
    print(f"{mesh},{v},{np.median(t):.4f},{t.min():.4f},{np.percentile(t, 10):.4f},{np.percentile(t, 90):.4f},"
          f"{t.size},{h},{same},{r:.3e}", flush=True)
