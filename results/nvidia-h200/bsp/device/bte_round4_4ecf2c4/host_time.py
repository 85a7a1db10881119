"""Host time per RK stage of the BTE phase (perf_counter around scattering.overlap and bte.advance, no
synchronisation) against the phase's CUDA-event time, numerics.bte_graph off / on."""
import sys
import time

import numpy as np

from solver.bsp import bte, scattering
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

mesh, graph, nsteps = sys.argv[1], sys.argv[2], int(sys.argv[3])
ns, nx, nz, nw, nphi = mesh.split("x")
cfg = load(None, [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}",
                  "numerics.backend=cupy", f"numerics.bte_graph={graph}", "time.steps=1000", "time.t_end_ps=null",
                  "output.progress=false", "output.checkpoint_every_steps=0"])
acc = {"overlap": [], "advance": []}


def timed(name, fn):
    def f(*a, **k):
        t0 = time.perf_counter()
        r = fn(*a, **k)
        acc[name].append(time.perf_counter() - t0)
        return r
    return f


sim = Simulation(cfg, progress=False)
sim._timer_rows = []
sim.startup()
for _ in range(5):
    sim.step()
bte.advance = timed("advance", bte.advance)
scattering.overlap = timed("overlap", scattering.overlap)
bte_ev, wall = [], []
for _ in range(nsteps):
    t0 = time.perf_counter()
    sim.step()
    wall.append(time.perf_counter() - t0)
    bte_ev.append(sim.timer.steps[-1]["step/BTE"])
us = lambda v: f"{1e6 * np.median(v):8.1f}"  # noqa: E731
print(f"{mesh} bte_graph={graph}: per stage host us: overlap {us(acc['overlap'])}  advance {us(acc['advance'])}  "
      f"| per step BTE events ms {1e3 * np.median(bte_ev):.3f} (p10 {1e3 * np.percentile(bte_ev, 10):.3f}, "
      f"p90 {1e3 * np.percentile(bte_ev, 90):.3f})  step wall ms {1e3 * np.median(wall):.2f}")
