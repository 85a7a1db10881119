"""Validation against the authors' reference implementation on the coarse mesh (6 x 33 x 33 x 150 x 24).

``python -m solver bsp validate RUN_DIR`` compares a run of ``config/coarse.yaml`` at t = 0.1 ps
with the reference numbers in ``tests/data/reference_t0.1ps/`` (copied from the authors' outputs):
mean current, N_s(x) and j(x) within 1 %, the number of time steps within one.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from solver import io

REFERENCE = Path(__file__).resolve().parents[2] / "tests" / "data" / "reference_t0.1ps"
L_X = 20e-9  # m, the reference's device length: its avg_current column is int j dx in A


def compare(run_dir, reference=REFERENCE, rtol=0.01) -> pd.DataFrame:
    run_dir, reference = Path(run_dir), Path(reference)
    prof = pd.read_csv(run_dir / "profiles.csv")
    rec = io.read_json(run_dir / "run.json")
    ref = pd.read_csv(reference / "profiles_t0.1ps.csv")
    ref_sc = pd.read_csv(reference / "scalars_t0.1ps.csv")
    if len(prof) != len(ref):
        raise ValueError(f"run has NX = {len(prof)}, reference has {len(ref)}: run config/coarse.yaml")
    ref_last = ref_sc.iloc[-1]
    rows = []

    def add(name, value, target, err, tol):
        rows.append({"check": name, "run": value, "reference": target, "error": err, "tolerance": tol,
                     "pass": bool(err <= tol)})

    jm = rec["summary"]["mean_current_A_per_m"]
    jm_ref = ref_last["avg_current_col3_integral_j_dx_A"] / L_X
    add("mean current (A/m)", jm, jm_ref, abs(jm / jm_ref - 1), rtol)
    for col, label in (("Ns_total_m-2", "N_s(x) max rel. error"), ("j_total_A_per_m", "j(x) max rel. error")):
        a, b = prof[col].to_numpy(), ref[col].to_numpy()
        err = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
        add(label, float(a[len(a) // 2]), float(b[len(b) // 2]), err, rtol)
    mass, mass_ref = rec["summary"]["total_mass_per_m"], float(ref_last["total_mass_per_m"])
    add("total mass (per m)", mass, mass_ref, abs(mass / mass_ref - 1), rtol)
    steps, steps_ref = rec["summary"]["steps"], int(ref_last["step"])
    add("time steps", steps, steps_ref, abs(steps - steps_ref), 1)
    return pd.DataFrame(rows)


def register(bs) -> None:
    v = bs.add_parser("validate", help="compare a config/coarse.yaml run at 0.1 ps with the reference implementation")
    v.add_argument("run_dir")
    v.add_argument("--reference", default=str(REFERENCE))
    v.add_argument("--csv", help="write the comparison table here")
    v.set_defaults(func=_main)


def _main(args) -> int:
    from solver.config import ConfigError

    needs = {"run_dir": (args.run_dir, ("profiles.csv", "run.json"), "the --out folder of a finished config/coarse.yaml run"),
             "--reference": (args.reference, ("profiles_t0.1ps.csv", "scalars_t0.1ps.csv"), "the reference outputs' folder")}
    for what, (folder, files, allowed) in needs.items():
        missing = [n for n in files if not (Path(folder) / n).is_file()]
        if missing:
            raise ConfigError(f"argument {what}: {folder!r} given, which has no {', '.join(missing)}; allowed: {allowed}")
    df = compare(args.run_dir, args.reference)
    if args.csv:
        io.write_csv(df, args.csv)
    with pd.option_context("display.width", 140, "display.float_format", "{:.6g}".format):
        print(df.to_string(index=False))
    return 0 if df["pass"].all() else 1
