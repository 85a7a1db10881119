"""Snakemake wrapper: the cross-machine table (Table 5 of 000 of every machine, side by side, per mesh)."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import io
from solver.bsp import analysis as A

tables = {Path(p).parents[2].name: pd.read_csv(p, dtype={"mesh": str}) for p in snakemake.input}
io.write_csv(A.compare_machines(tables), snakemake.output[0], index=True)
