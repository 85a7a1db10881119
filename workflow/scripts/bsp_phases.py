"""Snakemake wrapper: Table 5 of 000, Tables 2-3 of 001, speedups and weights from the timing runs
(their ITER sections from the sections runs, where the config has them)."""
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import io, provenance
from solver.bsp import analysis as A

runs = pd.read_csv(snakemake.input.timing)
# the ITER sections of the variants with a sections run (bsp.sections: Newton iteration ungraphed)
sec, t5, t3 = A.sectioned_tables(runs, A.read_sections(snakemake.input.sections))
out = snakemake.output
machine = str(runs["machine"].iloc[0]) if len(runs) else ""
# the papers' printed rows beside ours (source column): Table 5 of 000, Tables 2-3 of 001's speedups
spread = [c for c in ("timed_steps", *A.STEP_SPREAD) if c in runs]  # the step time's spread over the timed steps
t5_spread = t5.join(runs.drop_duplicates("variant").set_index("variant")[spread])
io.write_csv(A.with_source(t5_spread, machine, A.paper_table5_000()), out.table5, index=True)
io.write_csv(A.phase_table(runs, A.TABLE2_001), out.table2, index=True)
io.write_csv(t3, out.table3, index=True)
io.write_csv(A.with_source(A.speedups(t5, snakemake.params.baseline), machine, A.paper_speedups_000()),
             out.speedups000, index=True)
t23 = A.phase_table(runs, A.TABLE2_001).join(t3)
io.write_csv(A.with_source(A.speedups(t23, snakemake.params.baseline), machine, A.paper_speedups_001()),
             out.speedups001, index=True)
paper = A.paper_runs_000()  # Table 5 of 000 (sequential, 16 cores, 16 cores + K40c) beside ours
w = pd.concat({
    "top": A.weights(pd.concat([runs, paper]), "step", A.TOP),
    "BTE": A.weights(runs, "BTE", A.BTE_KERNELS),
    "ITER": A.weights(pd.concat([sec, paper]), "ITER", A.ITER_STEPS),
}, names=["parent"])
io.write_csv(w, out.weights, index=True)
io.write_json(Path(out.table5).parent / "phase_tables.provenance.json",
              provenance.collect(extra={"rule": snakemake.rule, "inputs": list(snakemake.input)}))
print(t5.to_string(), file=sys.stderr)
