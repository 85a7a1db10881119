"""Backend comparisons and per-phase baselines.

``python -m solver bsp compare-backends``: the same run on two backends, largest relative
difference of the state after N steps (GPU vs NumPy acceptance: 1e-10 after 20 steps).
``python -m solver bsp phases``: per-phase time of one (or a few) steps on each backend, as a
tidy CSV (backend, phase, seconds per step) with the run records beside it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from solver import io


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def compare_backends(cfg_path=None, overrides=(), backends=("numpy", "cupy"), steps=20) -> pd.DataFrame:
    from solver.backend import get_backend
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    states = {}
    for name in backends:
        cfg = load(cfg_path, list(overrides) + [f"time.steps={steps}", "time.t_end_ps=null",
                                                f"numerics.backend={name}", "output.progress=false"])
        sim = Simulation(cfg, backend=get_backend(name), progress=False)
        sim.run()
        be, st = sim.backend, sim.state
        states[name] = {k: be.to_numpy(getattr(st, k)) for k in ("Phi", "V", "eps", "rho")}
        states[name]["mean_current"] = sim.scalars[-1]["mean_current_A_per_m"]
    ref = states[backends[0]]
    rows = []
    for name in backends[1:]:
        for k in ("Phi", "V", "eps", "rho", "mean_current"):
            rows.append({"backend": name, "reference": backends[0], "steps": steps, "field": k,
                         "max_rel_diff": _rel(states[name][k], ref[k])})
    return pd.DataFrame(rows)


def phase_times(cfg_path=None, overrides=(), backends=("numpy",), steps=1, out=None) -> pd.DataFrame:
    from solver.backend import get_backend
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    rows = []
    for name in backends:
        cfg = load(cfg_path, list(overrides) + [f"time.steps={steps}", "time.t_end_ps=null",
                                                f"numerics.backend={name}", "output.progress=false",
                                                "output.checkpoint_every_steps=0"])
        run_dir = Path(out, name) if out else None
        sim = Simulation(cfg, backend=get_backend(name), out_dir=run_dir, progress=False)
        rec = sim.run(resume=False)
        for phase, sec in rec["timers"]["mean_per_step_s"].items():
            rows.append({"backend": name, "device": rec["device"].get("device"), "phase": phase,
                         "seconds_per_step": sec})
        for phase, sec in rec["timers"]["startup_s"].items():
            rows.append({"backend": name, "device": rec["device"].get("device"), "phase": phase,
                         "seconds_per_step": sec})
        print(f"{name}: {rec['summary']['steps']} steps, startup {rec['summary']['startup_s']:.2f} s", file=sys.stderr)
    return pd.DataFrame(rows)


def register(bs) -> None:
    c = bs.add_parser("compare-backends", help="largest relative difference between backends after N steps")
    c.add_argument("config", nargs="?", default=None)
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--backends", default="numpy,cupy")
    c.add_argument("--steps", type=int, default=20)
    c.add_argument("--csv")
    c.add_argument("--tol", type=float, default=1e-10)
    c.set_defaults(func=_compare)
    p = bs.add_parser("phases", help="per-phase time per step on each backend (tidy CSV)")
    p.add_argument("config", nargs="?", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--backends", default="numpy")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--out", help="folder for the runs' records")
    p.add_argument("--csv")
    p.set_defaults(func=_phases)


def _compare(args) -> int:
    df = compare_backends(args.config, args.overrides, tuple(args.backends.split(",")), args.steps)
    if args.csv:
        io.write_csv(df, args.csv)
    print(df.to_string(index=False))
    return 0 if (df["max_rel_diff"] <= args.tol).all() else 1


def _phases(args) -> int:
    df = phase_times(args.config, args.overrides, tuple(args.backends.split(",")), args.steps, args.out)
    if args.csv:
        io.write_csv(df, args.csv)
    wide = df.pivot_table(index="phase", columns="backend", values="seconds_per_step")
    print(wide.to_string(float_format=lambda v: f"{v:.4g}"))
    return 0
