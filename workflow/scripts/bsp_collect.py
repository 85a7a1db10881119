"""Snakemake wrapper: run directories of one series -> tidy table (solver.bsp.analysis.collect_runs)."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
from solver import io, provenance
from solver.bsp import analysis

runs = analysis.collect_runs([Path(p).parent for p in snakemake.input], warmup=int(snakemake.params.warmup),
                             machine=snakemake.params.machine)
io.write_csv(runs, snakemake.output[0])
io.write_json(Path(snakemake.output[0]).with_suffix(".provenance.json"),
              provenance.collect(extra={"rule": snakemake.rule, "inputs": list(snakemake.input)}))
print(runs.to_string(), file=sys.stderr)
