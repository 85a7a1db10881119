"""Snakemake wrapper: Fig 6 of 001 (convergence of N_s(x), j(x) towards the finest mesh)."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import io, provenance
from solver.bsp import analysis as A

meshes = list(snakemake.params.meshes)
profiles = {m: pd.read_csv(p) for m, p in zip(meshes, snakemake.input.profiles)}
reference = max(meshes, key=lambda m: A.parse_mesh(m)["NX"])
t = A.convergence(profiles, reference)
t.insert(0, "reference", reference)
io.write_csv(t, snakemake.output.table)
io.save_figure(A.plot_convergence(profiles, reference, t, snakemake.params.t_ps), snakemake.output.fig)
io.write_json(Path(snakemake.output.table).parent / "convergence.provenance.json",
              provenance.collect(extra={"rule": snakemake.rule, "inputs": list(snakemake.input)}))
print(t.to_string(), file=sys.stderr)
