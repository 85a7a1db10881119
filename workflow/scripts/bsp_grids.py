"""Snakemake wrapper: Table 7 of 001 (iter speedup along the grid sequence)."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import io, provenance
from solver.bsp import analysis as A

runs = pd.read_csv(snakemake.input[0], dtype={"mesh": str})
sp = A.grid_speedups(runs, snakemake.params.baseline, "ITER", list(snakemake.params.meshes))
paper = A.paper_table7_001(sp.index)  # the paper's columns beside ours, named with its hardware
io.write_csv(pd.concat([sp, paper], axis=1).rename_axis("mesh"), snakemake.output.table, index=True)
io.save_figure(A.plot_grid_speedups(sp, f"Table 7 (001): iter speedup vs {snakemake.params.baseline} along the grid sequence",
                                    paper), snakemake.output.fig)
io.write_json(Path(snakemake.output.table).parent / "grids.provenance.json",
              provenance.collect(extra={"rule": snakemake.rule, "inputs": list(snakemake.input)}))
print(sp.to_string(), file=sys.stderr)
