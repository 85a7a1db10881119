"""What a checkpoint of a long run costs, with the tables converted whole against only their new rows (docs/iv.md §21).

    python3 tools/bsp/checkpoint_probe.py OUT.csv [STEPS] [MESH]      (defaults 245000, 6x65x65x300x48; numpy backend)

A Simulation of MESH is started up (no steps), then given synthetic scalars and timers tables of STEPS steps (one scalars
row and six timer rows per step, as a standard-mesh I-V point records them).  Five checkpoints follow, each after 500
more steps of rows, first with the tables converted whole (``pd.DataFrame(rows)``, as before _grown_frame), then with
``_grown_frame`` (the incremental conversion), the two in the same process, alternating five times.  OUT.csv: one row per
checkpoint (mode, round, steps, seconds, file MB); the medians and their ratio are printed last.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this tree's solver
from solver import provenance  # noqa: E402
from solver.backend import get_backend  # noqa: E402
from solver.bsp import simulation  # noqa: E402
from solver.bsp.model import load  # noqa: E402

PHASES = ("step", "step/BTE", "step/BTE/RK", "step/BTE/overlap", "step/DENS", "step/ITER")


def main(out_csv: str, steps: int = 245000, mesh: str = "6x65x65x300x48") -> int:
    nsb, nx, nz, nw, nphi = mesh.split("x")
    cfg = load("config/bsp/dgmosfet.yaml", [f"mesh.N_sbn={nsb}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}",
                                            f"mesh.NPHI={nphi}", "numerics.backend=numpy", "time.steps=1",
                                            "time.t_end_ps=null", "output.progress=false", "steady.enabled=true"])
    tmp = tempfile.TemporaryDirectory(prefix="ckp_probe_")
    work = Path(tmp.name)
    sim = simulation.Simulation(cfg, get_backend("numpy"), work, progress=False)
    sim._wall0, sim._wall_before, sim._timer_rows = time.perf_counter(), 0.0, []
    sim.startup()
    sim.record_scalars(sim.host_fields(sim.state))
    row = dict(sim.scalars[-1])
    grown = simulation._grown_frame
    whole = lambda cache, name, rows: pd.DataFrame(rows)  # noqa: E731
    recs = []
    for rnd in range(5):
        for mode, fn in (("whole", whole), ("grown", grown)):
            simulation._grown_frame = fn
            sim._frames = {}
            sim._timer_rows = [{"step": s, "phase": p, "seconds": 1e-3} for s in range(steps) for p in PHASES]
            sim.scalars = [dict(row, step=s) for s in range(steps)]
            sim.save_checkpoint()  # the first after the tables appeared: converts them whole in either mode
            for k in range(5):
                s0 = steps + 500 * k
                sim._timer_rows.extend({"step": s, "phase": p, "seconds": 1e-3} for s in range(s0, s0 + 500) for p in PHASES)
                sim.scalars.extend(dict(row, step=s) for s in range(s0, s0 + 500))
                t = time.perf_counter()
                sim.save_checkpoint()
                recs.append({"mode": mode, "round": rnd, "steps": s0 + 500, "seconds": time.perf_counter() - t,
                             "file_MB": (work / simulation.CHECKPOINT).stat().st_size / 1e6})
    simulation._grown_frame = grown
    df = pd.DataFrame(recs)
    df.to_csv(out_csv, index=False)
    med = df.groupby("mode")["seconds"].median()
    spread = df.groupby("mode")["seconds"].quantile([0.1, 0.9]).unstack()
    print(f"{mesh}, {steps} steps of tables, checkpoint every 500 steps ({provenance.git_info().get('commit', '?')[:7]}):")
    for m in ("whole", "grown"):
        print(f"  {m:5s}: median {med[m]:.3f} s (p10-p90 {spread.loc[m, 0.1]:.3f}-{spread.loc[m, 0.9]:.3f}), n={int((df['mode'] == m).sum())}")
    print(f"  grown / whole = {med['grown'] / med['whole']:.3f}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:3]), *sys.argv[3:4]))
