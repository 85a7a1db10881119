"""Diagnose a negative-density fault of an I-V point (docs/iv.md §8): step a run in-process and
record, every EVERY steps, the channel density and where the most negative Phi sits.

    PYTHONPATH=. python tools/bsp/iv_diag.py MESH SRC V_G RAMP_PS T_END_PS [KEY=VALUE ...]

MESH 'N_sbnxNXxNZxNWxNPHI'; SRC a run folder with final_state.h5 (continuation source) or 'none'
(a fresh start); V_DS is 0.05 V; numba, 1 thread.  Columns: step, t_ps, vg (the ramped gate
voltage; NaN once the ramp is over), Ns_min / i_min (smallest N_s(x) summed over valleys and
subbands, dimensionless, and its x node), Ns_mid (N_s at the middle node), phi_neg and at (the most
negative Phi and its index (x, valley, subband, w, phi)), neg_mass (sum of the negative Phi over
the sum of Phi), A_eps.  Prints a table; writes it to $DIAG_OUT (default /tmp/iv_diag.csv)."""
import math
import os
import sys

import numpy as np
import pandas as pd

from solver.bsp.model import load
from solver.bsp.simulation import Simulation
from solver.config import RunFault

mesh, src, vg, ramp, tend = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
a, b, c, d, e = mesh.split("x")
sets = [f"mesh.N_sbn={a}", f"mesh.NX={b}", f"mesh.NZ={c}", f"mesh.NW={d}", f"mesh.NPHI={e}", f"bias.V_G={vg}",
        "bias.V_DS=0.05", f"time.t_end_ps={tend}", "time.steps=null", f"continuation.ramp_ps={ramp}",
        "numerics.backend=numba", "numerics.threads=1"] + ([f"continuation.init_from={src}"] if src != "none" else [])
sim = Simulation(load("config/bsp/dgmosfet.yaml", sets + sys.argv[6:]), progress=False)
sim._timer_rows = []
sim.startup()
if src != "none":
    sim.init_from(src)
rows = []


def record(tag=""):
    st = sim.state
    tot = np.asarray(st.rho).sum(axis=(1, 2))
    Phi = np.asarray(st.Phi)
    ramping = sim.source is not None and sim.model.cfg is not sim.cfg
    rows.append(dict(step=st.step, t_ps=st.t * sim.model.scales.t * 1e12,
                     vg=sim.model.cfg["bias"]["V_G_top"] if ramping else math.nan,
                     Ns_min=float(tot.min()), i_min=int(tot.argmin()), Ns_mid=float(tot[len(tot) // 2]),
                     phi_neg=float(Phi.min()), at=tuple(int(i) for i in np.unravel_index(int(Phi.argmin()), Phi.shape)),
                     neg_mass=float(np.minimum(Phi, 0).sum() / Phi.sum()), A_eps=float(st.A_eps), tag=tag))


record()
every = int(os.environ.get("EVERY", "200"))
try:
    while not sim.done():
        sim.step()
        if sim.state.step % every == 0:
            record()
except RunFault as exc:
    print("FAULT", exc)
    record("fault")
df = pd.DataFrame(rows)
df.to_csv(os.environ.get("DIAG_OUT", "/tmp/iv_diag.csv"), index=False)
pd.set_option("display.width", 200)
print(df.to_string(index=False))
