"""per-stage BTE fast paths through their wrappers (fresh outputs as in a run), CPU time, 1 thread"""
import sys, time, numpy as np
from solver.backend import get_backend
from solver.bsp.model import Model, load
from solver.bsp import dens, scattering
from solver.bsp.kernels.numba import TABLE as T, rk as RKM
NX = int(sys.argv[1]) if len(sys.argv) > 1 else 65
thr = int(sys.argv[2]) if len(sys.argv) > 2 else 1
clock = time.process_time if thr == 1 else time.perf_counter
m = Model(load(None, [f"mesh.NX={NX}", "mesh.N_sbn=6", "mesh.NW=300", "mesh.NPHI=48", "mesh.NZ=65"]))
be = get_backend("numba", threads=thr)
NPb = get_backend("numpy")
rng = np.random.default_rng(0)
Phi = (m.s_w * m.maxwellian)[None, :, None, :, None] * (0.5 + rng.random(m.shape))
Phi0 = Phi * 1.01
deps = 5 * rng.standard_normal((NX, 3, 6)); A = float(np.abs(deps).max())
eps = rng.uniform(-0.2, 0.2, (NX, 3, 6))
from tests.conftest import BteCases
chi = BteCases.sine_chi(m)
W = scattering.overlap(m, NPb, chi)
rho, PhiHat = dens.dens(m, NPb, Phi)
rho_eq = rho * (0.5 + rng.random(rho.shape))
tx = T["WENO_x"](m, be, Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1])
tw = T["WENO_w"](m, be, Phi, deps); tp = T["WENO_phi"](m, be, Phi, deps, A)
G = T["scat_gain"](m, be, PhiHat, eps, W); Lc = T["scat_loss"](m, be, eps, W)
calls = {
 "WENO_x": lambda: T["WENO_x"](m, be, Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1]),
 "WENO_w": lambda: T["WENO_w"](m, be, Phi, deps),
 "WENO_phi": lambda: T["WENO_phi"](m, be, Phi, deps, A),
 "scat_gain": lambda: T["scat_gain"](m, be, PhiHat, eps, W),
 "scat_loss": lambda: T["scat_loss"](m, be, eps, W),
 "RK": lambda: T["RK"](m, be, 1, Phi0, Phi, G, Lc, (tx, tw, tp), 1e-3),
 "w+phi+RK": lambda: T["RK"](m, be, 1, Phi0, Phi, G, Lc, (tx, T["WENO_w"](m, be, Phi, deps), T["WENO_phi"](m, be, Phi, deps, A)), 1e-3),
 "stage_fused": lambda: RKM.stage_update(m, be, 1, Phi0, Phi, G, Lc, tx, deps, A, 1e-3),
}
only = [a for a in sys.argv[3:] if not a.startswith("-")]
tot = 0
for k, f in calls.items():
    if only and k not in only: continue
    f(); ts = []
    for _ in range(5):
        t = clock(); r = f(); ts.append(clock() - t); del r
    ts.sort(); tot += ts[2] if k in ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss", "RK") else 0
    print(f"{k:10s} NX={NX} t={thr}: median {ts[2]*1e3:8.2f} ms (min {ts[0]*1e3:.2f}, max {ts[-1]*1e3:.2f})", flush=True)
print(f"sum {tot*1e3:.1f} ms per stage")
