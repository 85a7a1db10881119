"""docs/iv.md §9.2: frozen-coefficient gain c a1 (r-1)/dx against the scattering loss L_c at the source node, on the
normal inflow line phi = 0, from a final_state.h5 (c = 1 upwind, 1.28 linear WENO).  Usage: PYTHONPATH=. python contact_mode_gain.py RUN_DIR"""
import sys, h5py, numpy as np
from solver.bsp.model import load, Model
from solver.bsp import scattering
from solver.backend import get_backend
src = sys.argv[1]
f = h5py.File(src + "/final_state.h5")
NX, NV, NS, NW, NP = f["Phi"].shape
NZ = f["chi"].shape[-1]
cfg = load("config/bsp/dgmosfet.yaml", [f"mesh.N_sbn={NS}", f"mesh.NX={NX}", f"mesh.NZ={NZ}", f"mesh.NW={NW}", f"mesh.NPHI={NP}"])
m = Model(cfg); be = get_backend("numpy")
chi = f["chi"][:]; eps = f["eps"][:]; rho = f["rho"][:]; req = f["rho_eq"][:]
W = scattering.overlap(m, be, chi)
Lc = scattering.scat_loss(m, be, eps, W)
a1 = np.asarray(m.a1)  # (3, NW, NPHI)
dx = m.dx; w = np.asarray(m.w)
np.set_printoptions(precision=3, linewidth=160)
print(src, "dx", dx, "dw", w[1]-w[0])
for (nu, p) in ((2, 1), (1, 1), (0, 1), (2, 0)):
    r1 = req[0, nu, p] / rho[0, nu, p] - 1
    for c in (1.0, 1.28):
        g = c * a1[nu, :, 0] * r1 / dx
        net = g - Lc[0, nu, p]
        print(f"nu={nu} p={p} r-1={r1:+.4f} c={c}: max net {net.max():+.2f} at w index {net.argmax()} (w={w[net.argmax()]:.1f}); gain there {g[net.argmax()]:.2f} loss {Lc[0,nu,p,net.argmax()]:.2f}")
    print("   a1(phi=0) by w:", a1[nu, ::3, 0])
    print("   loss by w     :", Lc[0, nu, p, ::3])
