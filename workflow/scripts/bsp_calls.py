"""Snakemake wrapper: Table 3 of 000 (calls per time step of every timed phase)."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
from solver import io
from solver.bsp import analysis as A

t = A.calls_per_step({v: Path(p).parent for v, p in zip(snakemake.params.variants, snakemake.input)})
t[f"{A.PAPER_000_HW} (Table 3)"] = t.index.map(A.PAPER_000_TABLE3)  # the paper's calls beside ours
io.write_csv(t, snakemake.output[0], index=True)
print(t.to_string(), file=sys.stderr)
