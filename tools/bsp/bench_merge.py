"""Merge several `bsp_bench` runs of the same code into the committed bench table (issue #12):

    python tools/bsp/bench_merge.py OUTDIR RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds one run's `steps.csv` and `steps_spread.csv` (as `python -m solver bsp bench
--out RUN_DIR` writes them).  Writes into OUTDIR:
  steps.csv         per (mesh, backend, threads): the median over the runs of every time column
                    (step_ms, bte_ms, dens_ms, iter_ms, newton_per_step, startup_s); steps and commit
                    of the first run holding the case
  steps_runs.csv    every run's row, with its run number (1-based, in the order given)
  steps_spread.csv  per case: min of the runs' minima, medians of their p10 / median / p90, max of
                    their maxima, and the run medians
A case need not be in every run (the numba rows may come from fewer runs than the cupy rows).
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pandas as pd

KEY = ["mesh", "backend", "threads"]
MEDIAN_COLS = ["step_ms", "bte_ms", "dens_ms", "iter_ms", "newton_per_step", "startup_s"]


def merge(out: Path, runs: list[Path]) -> pd.DataFrame:
    steps = [pd.read_csv(r / "steps.csv").assign(run=i + 1) for i, r in enumerate(runs)]
    spread = [pd.read_csv(r / "steps_spread.csv").assign(run=i + 1) for i, r in enumerate(runs)]
    allrows = pd.concat(steps, ignore_index=True)
    allspread = pd.concat(spread, ignore_index=True)
    order = allrows.drop_duplicates(KEY)[KEY]
    med, spr = [], []
    for _, k in order.iterrows():
        sel = (allrows[KEY] == k.values).all(axis=1)
        rows = allrows[sel]
        first = rows.iloc[0].to_dict()
        first.update({c: statistics.median(rows[c]) for c in MEDIAN_COLS})
        first.pop("run")
        med.append(first)
        sp = allspread[(allspread[KEY] == k.values).all(axis=1)]
        spr.append({**{c: first[c] for c in KEY}, "steps": first["steps"],
                    "step_ms_min": sp["step_ms_min"].min(), "step_ms_p10": statistics.median(sp["step_ms_p10"]),
                    "step_ms_median": first["step_ms"], "step_ms_p90": statistics.median(sp["step_ms_p90"]),
                    "step_ms_max": sp["step_ms_max"].max(),
                    "run_medians": " / ".join(f"{v:.3f}" for v in rows["step_ms"]),
                    "note": f"{len(rows)} bench runs: min of mins, medians of p10/median/p90, max of maxes"})
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(med)
    table.to_csv(out / "steps.csv", index=False, float_format="%.6g")
    allrows.to_csv(out / "steps_runs.csv", index=False)
    pd.DataFrame(spr).to_csv(out / "steps_spread.csv", index=False, float_format="%.6g")
    return table


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    print(merge(Path(sys.argv[1]), [Path(a) for a in sys.argv[2:]]).to_string(index=False))
