"""Snakemake wrapper: Figs 11-13, 15 of 000 and Figs 7-9 of 001 from the timing runs (the ITER sections of
Fig 13 of 000, Figs 8-9 of 001 and Fig 15's section columns from the sections runs, as the tables of bsp_phases.py)."""
import sys

sys.stderr = open(snakemake.log[0], "w")
import pandas as pd

from solver import io
from solver.bsp import analysis as A

runs = pd.read_csv(snakemake.input.timing)
sec, t5, t3 = A.sectioned_tables(runs, A.read_sections(snakemake.input.sections))
out, mesh, base = snakemake.output, snakemake.params.mesh, snakemake.params.baseline
paper = A.paper_runs_000()  # Table 5 of 000's versions as the last bars
io.save_figure(A.plot_weights(A.weights(pd.concat([runs, paper]), "step", A.TOP), A.TOP,
                              f"Fig 11 (000): weight of BTE / DENS / ITER per time step, mesh {mesh}"), out.fig11)
io.save_figure(A.plot_weights(A.weights(runs, "BTE", A.BTE_KERNELS), A.BTE_KERNELS,
                              f"Fig 12 (000): weight of the BTE kernels, mesh {mesh}"), out.fig12)
io.save_figure(A.plot_weights(A.weights(pd.concat([sec, paper]), "ITER", A.ITER_STEPS), A.ITER_STEPS,
                              f"Fig 13 (000): weight of the ITER steps, mesh {mesh}"), out.fig13)
paper001 = A.paper_speedups_001()
io.save_figure(A.plot_speedups(A.speedups(t5, base),
                               f"Fig 15 (000): speedup per phase vs {base}, mesh {mesh}", A.paper_speedups_000()), out.fig15)
io.save_figure(A.plot_speedups(A.speedups(A.phase_table(runs, A.TABLE2_001), base),
                               f"Fig 7 (001): speedup of a time step, BTE and iter vs {base}", paper001), out.fig7)
io.save_figure(A.plot_speedups(A.speedups(t3, base),
                               f"Figs 8-9 (001): speedup of the iter sections vs {base}", paper001), out.fig8_9)
