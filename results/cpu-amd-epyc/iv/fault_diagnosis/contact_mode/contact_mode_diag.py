"""Diagnosis only (docs/iv.md §9): step a fresh run (V_DS = 0.05 V, numba, 1 thread) and record every
EVERY steps, per contact, the inflow-ghost factor r - 1 = rho_eq/rho - 1 of subband 1 of each valley
and the most negative Phi on that contact's inflow lines phi = 0 (source) / NPHI/2 (drain) of
valleys 1 and 2, subband 1 (with its w index), plus the global negative mass.

    PYTHONPATH=. python contact_mode_diag.py MESH V_G T_END_PS OUT.csv [KEY=VALUE ...]
"""
import sys
import numpy as np
import pandas as pd
from solver.bsp.model import load
from solver.bsp.simulation import Simulation
from solver.config import RunFault

mesh, vg, tend, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
a, b, c, d, e = mesh.split("x")
EVERY = 100
sets = [f"mesh.N_sbn={a}", f"mesh.NX={b}", f"mesh.NZ={c}", f"mesh.NW={d}", f"mesh.NPHI={e}", f"bias.V_G={vg}",
        "bias.V_DS=0.05", f"time.t_end_ps={tend}", "time.steps=null", "numerics.backend=numba", "numerics.threads=1"]
sim = Simulation(load("config/bsp/dgmosfet.yaml", sets + sys.argv[5:]), progress=False)
sim._timer_rows = []
sim.startup()
NP = int(e)
rows = []


def record(tag=""):
    st = sim.state
    Phi = np.asarray(st.Phi)
    rho = np.asarray(st.rho)
    req = np.asarray(sim.eq.rho_eq)
    row = dict(step=st.step, t_ps=st.t * sim.model.scales.t * 1e12,
               neg_mass=float(np.minimum(Phi, 0).sum() / Phi.sum()), tag=tag)
    for side, i, m in (("src", 0, 0), ("drn", -1, NP // 2)):
        rr = req[i] / rho[i] - 1.0
        for nu in (0, 1, 2):
            row[f"r1_{side}_v{nu}"] = float(rr[nu, 1])
        for nu in (1, 2):
            line = Phi[i, nu, 1, :, m]
            row[f"min_{side}_v{nu}"] = float(line.min())
            row[f"wmin_{side}_v{nu}"] = int(line.argmin())
    rows.append(row)


record()
try:
    while not sim.done():
        sim.step()
        if sim.state.step % EVERY == 0:
            record()
            pd.DataFrame(rows).to_csv(out, index=False)
except RunFault as ex:
    print("FAULT", ex)
    record("fault")
pd.DataFrame(rows).to_csv(out, index=False)
print(pd.DataFrame(rows).iloc[::5].to_string(index=False))
