"""Snakemake wrapper: Fig 6 of 000, the sparsity pattern of the Newton matrix L^(k) of POTENTIAL,
assembled by the solver (poisson.NewtonSystem, poisson.frechet) from the final state of a real run."""
import json
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import io, provenance
from solver.bsp import analysis as A
from solver.bsp.model import Model

rec = json.loads(Path(snakemake.input.run).read_text())
m = Model(rec["config"])
V, eps, chi, rho = A.fields_state(m, snakemake.input.fields)
L = A.newton_matrix(m, eps, chi, rho)
io.save_figure(A.plot_spy(L, m.NZ, title=f"Fig 6 (000): Newton matrix of POTENTIAL, NX x NZ = {m.NX} x {m.NZ}"),
               snakemake.output.fig)
io.write_csv(pd.DataFrame([{"n": L.shape[0], "nnz": L.nnz, "NX": m.NX, "NZ": m.NZ,
                            "nnz_dense_blocks": (m.NX - 2) * (m.NZ - 2) ** 2, "density": L.nnz / L.shape[0] ** 2}]),
             snakemake.output.table)
io.write_json(Path(snakemake.output.table).with_suffix(".provenance.json"),
              provenance.collect(extra={"rule": snakemake.rule, "inputs": list(snakemake.input)}))
