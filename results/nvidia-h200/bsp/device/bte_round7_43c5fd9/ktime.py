"""Device timing of WENO_x, scat_gain, scat_loss and the fused stage (CUDA events) on a synthetic stage of
one mesh, plus sha1 of their outputs (same seed: compare two trees bit for bit).  argv: label mesh reps"""
import hashlib
import math
import sys

import cupy as cp
import numpy as np

from solver.backend import get_backend
from solver.bsp import scattering
from solver.bsp.kernels.cuda import rk, weno
from solver.bsp.kernels.cuda import scattering as cs
from solver.bsp.model import Model, load

label, mesh, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
ns, nx, nz, nw, nphi = (int(v) for v in mesh.split("x"))
m = Model(load(None, [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}",
                      "numerics.backend=cupy"]))
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
rho = PhiHat.sum(-1) * m.dw
rho_eq = rho * 1.1
e, d = cp.asarray(eps), cp.asarray(deps)
out, Phi1 = cp.empty_like(Phi), cp.empty_like(Phi)
G = cp.empty(PhiHat.shape)
Lc = cp.empty(PhiHat.shape)
rho1, PH1 = cp.empty_like(rho), cp.empty_like(PhiHat)
r = (rho_eq[0], rho_eq[-1], rho[0], rho[-1])
runs = {
    "WENO_x": lambda: weno.x_into(m, be, Phi, r, out),
    "scat_gain": lambda: cs.gain_into(m, be, PhiHat, e, W, None, G),
    "scat_loss": lambda: cs.loss_into(m, be, e, W, None, Lc),
    "RK_wphi_s1": lambda: rk.stage_into(m, be, 1, Phi, Phi, G, Lc, out, d, Phi1, rho1, PH1,
                                        alpha=float(abs(deps).max() * m.A3), dt=1e-3),
}
res = {"WENO_x": out, "scat_gain": G, "scat_loss": Lc, "RK_wphi_s1": Phi1}
ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
for name, fn in runs.items():
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        ev0.record()
        fn()
        ev1.record()
        ev1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(ev0, ev1))
    h = hashlib.sha1(cp.asnumpy(res[name]).tobytes()).hexdigest()[:12]
    gbs = 2 * Phi.nbytes / (np.median(ts) * 1e-3) / 1e9 if name == "WENO_x" else float("nan")
    print(f"{label},{mesh},{name},{np.median(ts):.4f},{np.min(ts):.4f},{np.percentile(ts, 90):.4f},{gbs:.0f},{h}",
          flush=True)
