"""One whole step of a mesh under ncu (issue #12/#13: where a step's GPU time goes, kernel by kernel):
start-up + WARM steps on cupy with the default config, then cudaProfilerStart, one step, cudaProfilerStop.
Run under `ncu --profile-from-start off --graph-profiling node ...` (graph kernels one by one);
without ncu it prints the step's phase times.
PYTHONPATH=. python tools/bsp/step_ncu.py MESH [WARM]"""
import sys

import cupy as cp

from solver.backend import get_backend
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

mesh = sys.argv[1]
warm = int(sys.argv[2]) if len(sys.argv) > 2 else 10
ns, nx, nz, nw, nphi = mesh.split("x")
be = get_backend("cupy")
cfg = load("config/bsp/dgmosfet.yaml", [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}",
                                        f"mesh.NPHI={nphi}", "output.progress=false", "numerics.backend=cupy",
                                        "time.steps=1000", "time.t_end_ps=null", "output.checkpoint_every_steps=0"]
           + sys.argv[3:])
sim = Simulation(cfg, be, None, progress=False)
sim._timer_rows = []
sim.startup()
for _ in range(warm):
    sim.step()
cp.cuda.runtime.deviceSynchronize()
cp.cuda.runtime.profilerStart()
sim.step()
cp.cuda.runtime.deviceSynchronize()
cp.cuda.runtime.profilerStop()
rows = [r for r in sim._timer_rows if r["step"] == sim.state.step]
for r in rows:
    if r["phase"].count("/") <= 2:
        print(f"{r['phase']}: {1e3 * r['seconds']:.3f} ms")
print("newton iterations", sim.state.newton_iterations)
