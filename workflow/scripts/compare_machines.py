"""Snakemake wrapper: rules compare_study and compare_ceilings (solver.compare)."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import compare as C
from solver import io, provenance

root = snakemake.params.root
ms = C.machines(root)
if snakemake.rule == "compare_ceilings":
    ceil = pd.DataFrame([r for m in ms for r in C.ceilings(root, m)])
    measured = ceil[["copy_GB_per_s", "fp64_GFLOP_per_s", "fp32_GFLOP_per_s"]].notna().any(axis=1)
    io.write_csv(ceil[measured], snakemake.output[0], float_format="%.6g")
else:
    study = snakemake.wildcards.study
    t = C.study_table(root, study, ms, reference=snakemake.params.reference)
    io.write_csv(t, snakemake.output.table, float_format="%.6g")
    io.save_figure(C.plot_study(t, f"{study}: speedup over the reference machine, with the machines' copy-bandwidth "
                                   f"and FP64 ratios ({', '.join(ms)})"), snakemake.output.fig)
    io.write_json(Path(snakemake.output.table).with_suffix(".provenance.json"),
                  provenance.collect(extra={"rule": snakemake.rule, "machines": ms, "inputs": list(snakemake.input)}))
    print(t.to_string(), file=sys.stderr)
