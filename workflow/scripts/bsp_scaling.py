"""Snakemake wrapper: Fig 14 of 000 and Figs 10-13 of 001 from the scaling runs."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import io, provenance
from solver.bsp import analysis as A

runs = pd.read_csv(snakemake.input[0], dtype={"mesh": str})
p, out = snakemake.params, snakemake.output
variant = p.baseline if p.baseline in set(runs["variant"]) else runs["variant"].iloc[0]
t = A.mesh_scaling(runs, p.reference, A.TABLE5_000, variant=variant)
io.write_csv(t, out.table, index=True)
io.save_figure(A.plot_mesh_scaling(t, ["step", "BTE", "DENS", "ITER", "FD-WENO-5", "scatt.", "lin. sys.", "Schrod.", "NR kernel"],
                                   f"Fig 14 (000): cost per phase, each dimension doubled from {p.reference} ({variant})"), out.fig)
meshes = list(t["mesh"])
sp = A.grid_speedups(runs, variant, "ITER", meshes)
paper = A.paper_table7_001(sp.index)  # the paper prints only the reference mesh's row (Table 7)
labels = [f"{name}: {m}" for name, m in zip(t.index, t["mesh"]) if m in set(sp.index)]
sp.index = paper.index = labels
io.write_csv(pd.concat([sp, paper], axis=1), out.speedup, index=True)
io.save_figure(A.plot_grid_speedups(sp, f"Figs 10-13 (001): iter speedup vs {variant}, each dimension doubled", paper),
               out.speedup_fig)
io.write_json(Path(out.table).parent / "scaling.provenance.json",
              provenance.collect(extra={"rule": snakemake.rule, "inputs": list(snakemake.input)}))
print(t.to_string(), file=sys.stderr)
