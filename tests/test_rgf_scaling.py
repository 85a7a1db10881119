"""Fig 8a measured (solver.rgf.scaling): the chunk processes of a timed parallel sweep together
compute the energies of the one-process sweep, and the record names the makespan."""
import json

import pandas as pd

from solver.rgf.scaling import scaling_run

SWEEP = ["--ny", "1", "--nz", "1", "--xuc", "2", "--emin", "4.5", "--emax", "8", "--ne", "5", "--backend", "numpy"]


def test_two_workers_cover_the_sweep(tmp_path):
    df = scaling_run(2, 3, SWEEP, tmp_path / "w2_c3.csv", tmp_path / "w2_c3", "cpu", log=lambda m: None)
    assert df.chunk.tolist() == [0, 1, 2] and set(df.worker) <= {0, 1} and (df.process_s > 0).all()
    rec = json.loads((tmp_path / "w2_c3.run.json").read_text())
    assert rec["config"]["sweep_args"] == SWEEP and rec["makespan_s"] >= df.process_s.max()
    energies = sorted(pd.concat(pd.read_csv(tmp_path / "w2_c3" / f"chunk{c}.csv") for c in range(3)).E_eV.unique())
    assert len(energies) == 5 and energies[0] == 4.5 and energies[-1] == 8.0
