"""Snakemake wrapper: Fig 1 (geometry) and Tables 8, 9 of 001 / Table 1 of 000 from the solver's model."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
from solver import io, provenance
from solver.bsp import analysis as A
from solver.bsp import docs

mesh = A.parse_mesh(snakemake.params.mesh)
sets = [f"mesh.{k}={v}" for k, v in mesh.items()] + ["time.steps=1"] + list(snakemake.params.sets)
m = docs.make_model(snakemake.input.cfg, sets)
out = snakemake.output
if not hasattr(out, "table8"):  # rule bsp_fig1_geometry
    io.save_figure(docs.geometry_figure(m), out[0])
else:  # rule bsp_doc_tables
    io.write_csv(docs.table8_constants(m), out.table8)
    io.write_csv(docs.table9_valleys(m), out.table9)
    io.write_csv(docs.table_scales(m), out.scales)
    io.write_csv(docs.table1_layout(m), out.table1)
io.write_json(Path(out[0]).parent / f"{snakemake.rule}.provenance.json",
              provenance.collect(config=m.cfg, extra={"rule": snakemake.rule}))
