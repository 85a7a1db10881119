"""Fig 10 of paper 000 (section 3.4): the time step with and without the overlap of the next
stage's x-derivative (WENO_x, on a second CUDA stream) with the ITER phase (numerics.overlap).

    python workflow/scripts/bsp_overlap.py --config CFG [--set K=V ...] [--mesh LABEL] [--steps 11]
        --csv fig10_overlap_000.csv --fig fig10_overlap_000.png

Per setting one run of --steps steps on the cupy backend; the first step (kernel loading) is left
out of the means.  Checks that both runs end with bit-identical Phi, V and eps.  Writes the CSV
(one row per setting: step, BTE, WENO_x inside BTE, WENO_x on the side stream, ITER, in ms per
step) with a run.json beside it, and the figure.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from solver import io, provenance  # noqa: E402
from solver.backend import get_backend  # noqa: E402
from solver.bsp.model import load  # noqa: E402
from solver.bsp.simulation import Simulation  # noqa: E402

PHASES = {"step": "step", "BTE": "step/BTE", "WENO_x (in BTE)": "step/BTE/WENO_x",
          "WENO_x (side stream)": "step/WENO_x_overlapped", "ITER": "step/ITER"}


def run(cfg_path, overrides, overlap, steps, be):
    cfg = load(cfg_path, list(overrides) + [f"numerics.overlap={'true' if overlap else 'false'}", f"time.steps={steps}",
                                            "time.t_end_ps=null", "numerics.backend=cupy", "output.progress=false",
                                            "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, be, None, progress=False)
    sim.run(resume=False)
    kept = sim.timer.steps[1:] or sim.timer.steps
    row = {name: 1e3 * float(np.mean([s.get(key, 0.0) for s in kept])) for name, key in PHASES.items()}
    state = {k: be.to_numpy(getattr(sim.state, k)) for k in ("Phi", "V", "eps")}
    return row, state, len(kept)


def figure(df, out_png, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from solver import io as _io

    fig, ax = plt.subplots(figsize=(6, 1.2 + 0.9 * len(df)))
    labels = [f"{r.mesh}\n{'overlap' if r.overlap else 'sequential'}" for r in df.itertuples()]
    y = np.arange(len(df))
    ax.barh(y, df["ITER"], color="C1", label="ITER")
    ax.barh(y, df["BTE"], left=df["ITER"], color="C0", label="BTE")
    rest = df["step"] - df["ITER"] - df["BTE"]
    ax.barh(y, rest, left=df["ITER"] + df["BTE"], color="0.7", label="DENS + other")
    ax.barh(y + 0.3, df["WENO_x (side stream)"], height=0.2, color="C2", label="WENO_x on the side stream (concurrent)")
    for k, r in enumerate(df.itertuples()):
        ax.text(r.step, k, f" {r.step:.2f} ms", va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("ms per time step")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    ax.set_xlim(0, 1.15 * float(df["step"].max()))
    _io.save_figure(fig, out_png)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--mesh", default=None)
    ap.add_argument("--steps", type=int, default=11)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--fig", required=True)
    a = ap.parse_args(argv)
    be = get_backend("cupy")
    mesh = a.mesh or (Path(a.config).stem if a.config else "default")
    rows, states = [], {}
    for ov in (False, True):
        row, states[ov], n = run(a.config, a.overrides, ov, a.steps, be)
        rows.append({"machine": provenance.machine_tag(), "mesh": mesh, "overlap": ov, "steps_averaged": n, **row})
    same = all(np.array_equal(states[False][k], states[True][k]) for k in ("Phi", "V", "eps"))
    df = pd.DataFrame(rows)
    df["identical_results"] = same
    df["saving_ms_per_step"] = df["step"].iloc[0] - df["step"]
    io.write_csv(df, a.csv, float_format="%.6g")
    io.write_json(Path(a.csv).with_suffix(".run.json"), provenance.collect(
        {"config": a.config, "overrides": a.overrides, "steps": a.steps}, be, {"identical_results": same}))
    figure(df, a.fig, f"Fig 10 (paper 000): WENO_x overlapped with ITER, {mesh}")
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if not same:
        print("overlap changed the results", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
