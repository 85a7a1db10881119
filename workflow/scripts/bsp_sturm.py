"""Snakemake wrapper: Fig 4 of 001, the Sturm count of a Schroedinger matrix of a real run
(solver.bsp.schrodinger.schrodinger_matrix / sturm_count on the run's final potential)."""
import json
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import h5py
import numpy as np
import pandas as pd

from solver import io, provenance
from solver.bsp import analysis as A
from solver.bsp import schrodinger
from solver.bsp.model import Model

rec = json.loads(Path(snakemake.input.run).read_text())
m = Model(rec["config"])
with h5py.File(snakemake.input.fields, "r") as f:
    V = f["V"][...]
    unit = f["V"].attrs.get("units", "V")
V = V / m.scales.V if str(unit) == "V" else V  # the solver's matrix takes the dimensionless V
nu = int(snakemake.params.nu)
i = snakemake.params.x_index
i = m.NX // 2 if i is None else int(i)
diag, off = schrodinger.schrodinger_matrix(m, V, nu)
diag, off = np.asarray(diag)[i], np.asarray(off)[i]
xi, sigma, ev = A.sturm_curve(diag, off, schrodinger.sturm_count, n_eig=int(snakemake.params.n_eig))
eV = m.scales.energy_eV
io.save_figure(A.plot_sturm(xi * eV, sigma, ev * eV, unit="eV",
                            title=f"Fig 4 (001): Sturm count of the Schroedinger matrix, valley {nu}, x node {i} of {m.NX}, "
                                  f"order {len(diag)}"), snakemake.output.fig)
io.write_csv(pd.DataFrame({"k": np.arange(1, len(ev) + 1), "eigenvalue_eV": ev * eV,
                           "sigma_just_below": [int(schrodinger.sturm_count(diag, off, e - 1e-9 * max(1, abs(e)))) for e in ev],
                           "sigma_just_above": [int(schrodinger.sturm_count(diag, off, e + 1e-9 * max(1, abs(e)))) for e in ev]}),
             snakemake.output.table)
io.write_json(Path(snakemake.output.table).with_suffix(".provenance.json"),
              provenance.collect(extra={"rule": snakemake.rule, "inputs": list(snakemake.input), "nu": nu, "x_index": i}))
