"""Diagnosis only: the inflow ghosts of weno_x set to the equilibrium (Maxwellian) distribution
a1 rho_eq s_w M at the contact, instead of a1 (rho_eq/rho) Phi(x_0).  Run: python maxw.py SRC T_END"""
import sys, math
import numpy as np
import pandas as pd
from solver.bsp import weno, bte
from solver.bsp.model import load
from solver.bsp.simulation import Simulation
from solver.config import RunFault

MODE = sys.argv[3] if len(sys.argv) > 3 else "maxwell"

def weno_x_eq(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    xp = backend.xp
    eps = weno._eps(model) if eps is None else eps
    NX = Phi.shape[0]
    a1 = model.a1
    in_l, in_r, left = weno._phi_masks(model)
    shape = model.s_w * model.maxwellian  # (3, NW): dw dphi sum over (w, phi) of shape = 1
    out = np.empty_like(Phi)
    for nu in range(Phi.shape[1]):
        P = Phi[:, nu]
        gp = np.empty((NX + 6,) + P.shape[1:])
        g = gp[3:NX + 3]
        np.multiply(P, a1[nu], out=g)
        if MODE == "maxwell":
            eq0 = a1[nu][None] * rho_eq0[nu][:, None, None] * shape[nu][None, :, None]  # (N_sbn, NW, NPHI)
            eqL = a1[nu][None] * rho_eqL[nu][:, None, None] * shape[nu][None, :, None]
            gp[0:3] = np.where(in_l[nu][None], eq0, g[0])
            gp[NX + 3:] = np.where(in_r[nu][None], eqL, g[NX - 1])
        else:  # the reference rule, for the control
            fl = np.where(in_l[nu], (rho_eq0 / rho0)[nu][:, None, None], 1.0)
            fr = np.where(in_r[nu], (rho_eqL / rhoL)[nu][:, None, None], 1.0)
            gp[0:3] = g[0] * fl
            gp[NX + 3:] = g[NX - 1] * fr
        f = weno.weno5_faces(np, gp, 0, left[nu], eps)
        np.subtract(f[1:], f[:-1], out=out[:, nu])
        out[:, nu] /= model.dx
    return out

weno.weno_x = weno_x_eq
src, tend = sys.argv[1], float(sys.argv[2])
sets = ["mesh.N_sbn=3", "mesh.NX=33", "mesh.NZ=33", "mesh.NW=24", "mesh.NPHI=8", "bias.V_G=-0.2", "bias.V_DS=0.05",
        f"time.t_end_ps={tend}", "time.steps=null", "numerics.backend=numba", "numerics.threads=1",
        f"continuation.init_from={src}"]
sim = Simulation(load("config/bsp/dgmosfet.yaml", sets), progress=False)
sim._timer_rows = []
sim.startup(); sim.init_from(src)
rows = []
def rec():
    st = sim.state; Phi = np.asarray(st.Phi); tot = np.asarray(st.rho).sum(axis=(1, 2))
    rows.append(dict(step=st.step, t_ps=st.t * sim.model.scales.t * 1e12, Ns_min=tot.min(), Ns_mid=tot[16],
                     phi_neg=Phi.min(), at=tuple(int(i) for i in np.unravel_index(int(Phi.argmin()), Phi.shape)),
                     neg_mass=np.minimum(Phi, 0).sum() / Phi.sum(), current=float(sim.host_fields(st)["j_sub"].sum())))
rec()
try:
    while not sim.done():
        sim.step()
        if sim.state.step % 200 == 0:
            rec()
except RunFault as e:
    print("FAULT", e); rec()
print(pd.DataFrame(rows).to_string(index=False))
