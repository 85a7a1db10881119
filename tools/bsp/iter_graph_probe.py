"""numerics.iter_graph on the device: the GPU time of one replay of the stage graph (CUDA events, 50
replays after 10 steps of the mesh) and ITER's host-side time per stage from the run's timer, so that
the ITER per step splits into GPU work and the rest.
PYTHONPATH=. python tools/bsp/iter_graph_probe.py MESH [STEPS] [--no-timing]  (--no-timing: the run only, for ncu)"""
import sys
import time

import numpy as np

import cupy as cp

from solver.backend import get_backend
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

mesh = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
timing = "--no-timing" not in sys.argv
ns, nx, nz, nw, nphi = mesh.split("x")
be = get_backend("cupy")
cfg = load("config/bsp/dgmosfet.yaml", [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}",
                                        f"mesh.NPHI={nphi}", "output.progress=false", "numerics.backend=cupy",
                                        f"time.steps={steps}", "time.t_end_ps=null", "output.checkpoint_every_steps=0"])
sim = Simulation(cfg, be, None, progress=False)
sim.run(resume=False)
g = sim.model.device_cache[("cuda.iter_graph", "dirichlet")]
tot = sim.timer.totals
print(f"{mesh}: {steps} steps, replays {g.replays}, captures {g.captures}")
for k in sorted(tot):
    if k.startswith("step/ITER") or k in ("step", "step/BTE"):
        print(f"  {k}: {1e3 * tot[k] / steps:.3f} ms per step (mean)")
for kind in ("stage", "iteration"):
    graph = g.graphs.get(kind)
    if graph is None or not timing:
        continue
    ev = [cp.cuda.Event() for _ in range(2)]
    t = []
    for _ in range(60):
        ev[0].record()
        graph.launch()
        ev[1].record()
        ev[1].synchronize()
        t.append(cp.cuda.get_elapsed_time(ev[0], ev[1]))
    t = np.array(t[10:])
    print(f"  {kind} graph replay, GPU: median {np.median(t):.3f} ms (p10 {np.percentile(t, 10):.3f}, "
          f"p90 {np.percentile(t, 90):.3f})")
    h0 = time.perf_counter()
    for _ in range(50):
        graph.launch()
    h1 = time.perf_counter()
    cp.cuda.get_current_stream().synchronize()
    print(f"  {kind} graph launch, host: {1e3 * (h1 - h0) / 50:.3f} ms per cudaGraphLaunch (50 back to back)")
