"""The scalar time series of a run folder, finished or not: scalars.csv where the run finished, else
the table kept in its checkpoint (written every output.checkpoint_every_steps).  Used by the device
scripts to bring back a long run cut at a call's limit (docs/iv.md §10).

    python tools/bsp/run_scalars.py RUN_DIR OUT.csv [EVERY]   # EVERY: keep every n-th row (and the last)
"""
import sys
from pathlib import Path

import h5py
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this tree's solver, without PYTHONPATH
from solver.bsp.simulation import CHECKPOINT, _read_table  # noqa: E402

run, out = Path(sys.argv[1]), sys.argv[2]
every = int(sys.argv[3]) if len(sys.argv) > 3 else 1
if (run / "scalars.csv").exists() and (run / "run.json").exists():
    df, src = pd.read_csv(run / "scalars.csv"), "scalars.csv"
else:
    with h5py.File(run / CHECKPOINT, "r") as f:
        df, src = _read_table(f["scalars"]), CHECKPOINT
keep = df.iloc[::every]
if len(df) and keep.index[-1] != df.index[-1]:
    keep = pd.concat([keep, df.iloc[[-1]]])
keep.to_csv(out, index=False, float_format="%.12e")
last = df.iloc[-1]
print(f"{run}: {len(df)} rows from {src}, last step {int(last['step'])}, t = {last['time_s'] * 1e12:.4f} ps"
      + (f", contact_phi_min {last['contact_phi_min']:.3e} (worst {df['contact_phi_min'].min():.3e})"
         if "contact_phi_min" in df else ""))
