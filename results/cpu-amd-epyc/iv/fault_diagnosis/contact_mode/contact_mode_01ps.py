"""docs/iv.md §9.4: how far the inflow-ghost variants move the 0.1 ps state, in the terms of
`solver bsp validate` (1 % on the mean current, on max|N_s(x) - ref| / max N_s and max|j(x) - ref| / max|j|,
on the mass; the steps within 1), on MESH with the default bias (V_G = 0.5 V, V_DS = 0.1 V), numba.
The reference here is the authors' rule on the same mesh.   PYTHONPATH=. python contact_mode_01ps.py MESH"""
import sys
import numpy as np
from solver.bsp import weno
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

orig = weno.weno_x
mesh = sys.argv[1]
a, b, c, d, e = mesh.split("x")
sets = [f"mesh.N_sbn={a}", f"mesh.NX={b}", f"mesh.NZ={c}", f"mesh.NW={d}", f"mesh.NPHI={e}", "time.t_end_ps=0.1",
        "time.steps=null", "numerics.backend=numba", "numerics.threads=1"]


def variant(kind):
    def fx(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
        if kind == "reference" or closed:
            return orig(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=closed, eps=eps)
        eps_ = weno._eps(model) if eps is None else eps
        Phi = np.asarray(Phi)
        NX = Phi.shape[0]
        a1 = model.a1
        in_l, in_r, left = weno._phi_masks(model)
        shape = model.s_w * model.maxwellian
        d0 = np.asarray(rho_eq0) - np.asarray(rho0)
        dL = np.asarray(rho_eqL) - np.asarray(rhoL)
        out = np.empty_like(Phi)
        for nu in range(Phi.shape[1]):
            gp = np.empty((NX + 6,) + Phi.shape[2:])
            g = gp[3:NX + 3]
            np.multiply(Phi[:, nu], a1[nu], out=g)
            gl = Phi[0, nu] + d0[nu][:, None, None] * shape[nu][None, :, None]
            gr = Phi[-1, nu] + dL[nu][:, None, None] * shape[nu][None, :, None]
            if kind == "hybrid":
                r0 = np.minimum(np.asarray(rho_eq0) / np.asarray(rho0), 1.0)[nu][:, None, None]
                rL = np.minimum(np.asarray(rho_eqL) / np.asarray(rhoL), 1.0)[nu][:, None, None]
                gl = r0 * Phi[0, nu] + np.maximum(d0[nu], 0.0)[:, None, None] * shape[nu][None, :, None]
                gr = rL * Phi[-1, nu] + np.maximum(dL[nu], 0.0)[:, None, None] * shape[nu][None, :, None]
            if kind == "additive_clip":
                gl, gr = np.maximum(gl, 0.0), np.maximum(gr, 0.0)
            gp[0:3] = np.where(in_l[nu][None], a1[nu][None] * gl, g[0])
            gp[NX + 3:] = np.where(in_r[nu][None], a1[nu][None] * gr, g[NX - 1])
            f = weno.weno5_faces(np, gp, 0, left[nu], eps_)
            np.subtract(f[1:], f[:-1], out=out[:, nu])
            out[:, nu] /= model.dx
        return out
    return fx


res = {}
for kind in ("reference", "additive", "additive_clip", "hybrid"):
    weno.weno_x = variant(kind)
    sim = Simulation(load("config/bsp/dgmosfet.yaml", sets), progress=False)
    sim._timer_rows = []
    sim.startup()
    while not sim.done():
        sim.step()
    hf = sim.host_fields(sim.state)
    j = np.asarray(hf["j_sub"]).reshape(sim.model.NX, -1).sum(axis=1)
    ns = np.asarray(sim.state.rho).reshape(sim.model.NX, -1).sum(axis=1)
    res[kind] = dict(j=j, ns=ns, jm=j.mean(), mass=ns.sum() * sim.model.dx, steps=sim.state.step)
ref = res["reference"]
print(f"mesh {mesh}, 0.1 ps, against the authors' rule on the same mesh")
print(f"{'variant':14s} {'mean j':>9s} {'N_s(x)':>9s} {'j(x)':>9s} {'mass':>9s} {'steps':>6s}")
for k, r in res.items():
    print(f"{k:14s} {abs(r['jm'] / ref['jm'] - 1):9.2e} {np.abs(r['ns'] - ref['ns']).max() / ref['ns'].max():9.2e} "
          f"{np.abs(r['j'] - ref['j']).max() / np.abs(ref['j']).max():9.2e} {abs(r['mass'] / ref['mass'] - 1):9.2e} {r['steps'] - ref['steps']:6d}")
