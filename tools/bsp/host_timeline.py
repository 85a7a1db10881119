"""Where a step's host time goes on the GPU (issue #12): per RK stage, host timestamps of the phases under
``step`` (BTE, DENS, ITER) and of the ITER graph's run and wait (kernels/cuda/iter_graph.py), medians over
STEPS steps after WARM; then a cProfile of PROF steps (own time, top 35).  The host waits for the GPU only
in IterGraph._wait (and the timer's flush at the end of the step): the rest of the stage is host work, and
the part after the wait (post) plus the gap to the next BTE launch is time the GPU sits idle.
PYTHONPATH=. python tools/bsp/host_timeline.py MESH [STEPS] [WARM] [PROF] [--set key=value ...]"""
import cProfile
import io
import pstats
import sys
import time
from contextlib import contextmanager

import numpy as np

from solver import timing
from solver.backend import get_backend
from solver.bsp.kernels.cuda import iter_graph
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

args = [a for a in sys.argv[1:] if "=" not in a]
sets = [a for a in sys.argv[1:] if "=" in a]
mesh = args[0]
steps = int(args[1]) if len(args) > 1 else 60
warm = int(args[2]) if len(args) > 2 else 10
prof = int(args[3]) if len(args) > 3 else 40
ns, nx, nz, nw, nphi = mesh.split("x")
T = time.perf_counter
stamps: list = []
on = [False]

_phase = timing.PhaseTimer.phase


@contextmanager
def phase(self, name):
    top = on[0] and len(self._stack) == 1
    if top:
        stamps.append((name + ">", T()))
    with _phase(self, name):
        yield
    if top:
        stamps.append(("<" + name, T()))


timing.PhaseTimer.phase = phase
_run = iter_graph.IterGraph.run


def run(self, *a, **k):
    if on[0]:
        stamps.append(("run>", T()))
    return _run(self, *a, **k)


def stamped(fn):
    """A host wait of IterGraph stamped as wait> / <wait: _wait, and _wait_mark (numerics.bte_speculate's wait for
    the iteration's copies only)."""
    def wait(self, *a):
        if on[0]:
            stamps.append(("wait>", T()))
        fn(self, *a)
        if on[0]:
            stamps.append(("<wait", T()))
    return wait


G = iter_graph.IterGraph
G.run, G._wait, G._wait_mark = run, stamped(G._wait), stamped(G._wait_mark)
be = get_backend("cupy")
cfg = load("config/bsp/dgmosfet.yaml", [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}",
                                        f"mesh.NPHI={nphi}", "output.progress=false", "numerics.backend=cupy",
                                        "time.steps=100000", "time.t_end_ps=null", "output.checkpoint_every_steps=0"] + sets)
sim = Simulation(cfg, be, None, progress=False)
sim._timer_rows = []
sim.startup()
for _ in range(warm):
    sim.step()
be.synchronize()
on[0] = True
t0 = T()
for _ in range(steps):
    sim.step()
    stamps.append(("step|", T()))
wall = (T() - t0) / steps
on[0] = False
# per stage intervals
iv: dict = {}
last: dict = {}
prev_iter_end = None
for name, t in stamps:
    last[name] = t
    if name == "BTE>" and prev_iter_end is not None:
        iv.setdefault("gap <ITER -> next BTE> (incl. step end)", []).append(t - prev_iter_end)
    if name == "<BTE":
        iv.setdefault("BTE host (launches)", []).append(t - last["BTE>"])
    if name == "ITER>":
        iv.setdefault("<BTE -> ITER> (DENS, probe, dx launch)", []).append(t - last["<BTE"])
    if name == "run>" and "ITER>" in last:
        iv.setdefault("ITER> -> graph run (setup)", []).append(t - last["ITER>"])
    if name == "wait>":
        iv.setdefault("run -> wait (copies in, launch, copy out)", []).append(t - last["run>"])
    if name == "<wait":
        iv.setdefault("wait (GPU busy)", []).append(t - last["wait>"])
    if name == "<ITER":
        iv.setdefault("<wait -> <ITER (post)", []).append(t - last.get("<wait", t))
        prev_iter_end = t
ph = {}
for r in sim._timer_rows:
    if r["step"] > warm:
        ph.setdefault(r["phase"], []).append(r["seconds"])
print(f"{mesh}: {steps} steps after {warm}; host wall per step {1e3 * wall:.3f} ms")
for k in ("step", "step/BTE", "step/DENS", "step/ITER"):
    if k in ph:
        print(f"  timer {k:12s} median {1e3 * np.median(ph[k]):.3f} ms per step")
print("  per stage, host intervals (median / p10 / p90, us):")
for k, v in iv.items():
    v = 1e6 * np.array(v)
    print(f"    {k:45s} {np.median(v):8.1f} {np.percentile(v, 10):8.1f} {np.percentile(v, 90):8.1f}  (n={len(v)})")
if prof:
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(prof):
        sim.step()
    be.synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(35)
    print(f"cProfile of {prof} steps (own time):")
    print("\n".join(s.getvalue().splitlines()[:60]))
