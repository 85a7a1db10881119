"""The papers' printed numbers shown beside ours (issue #15): values as printed, derived speedups,
the labels that name the paper's hardware."""
import numpy as np
import pandas as pd
import pytest

from solver.bsp import analysis as A


def test_table5_000_as_printed_and_its_speedups():
    t = A.paper_table5_000()
    assert t.shape == (10, 9) and list(t.columns) == list(A.TABLE5_000)
    assert t.iloc[0]["step"] == 19.82 and t.iloc[-1]["ITER"] == 0.26 and t.iloc[-1]["scatt."] == 0.105
    assert all(lab.startswith(A.PAPER_000_HW) for lab in t.index)
    sp = A.paper_speedups_000()
    assert sp.iloc[8]["step"] == pytest.approx(19.82 / 1.73) and sp.iloc[-1]["BTE"] == pytest.approx(18.56 / 0.21)
    assert [A.paper_thread_count(x) for x in sp.index] == [1, 2, 4, 6, 8, 10, 12, 14, 16, None]


def test_tables_2_3_7_of_001():
    sp = A.paper_speedups_001()
    assert sp.loc["paper 001: Tesla V100", "BTE"] == 416.40 and sp.loc["paper 001: GeForce RTX 3090", "iter.Frechet"] == 145.46
    assert np.isnan(sp.loc["paper 001: 2x Xeon Silver 4210 (20 cores), 2 threads", "iter.eigen"])
    assert [A.paper_thread_count(x) for x in sp.index] == [2, 4, 8, 16, None, None]
    t7 = A.paper_table7_001(["6x97x97x450x72", "3x9x9x12x8"])
    assert t7.loc["6x97x97x450x72", "paper 001: Tesla V100"] == 207.50 and t7.loc["3x9x9x12x8"].isna().all()


def test_with_source_keeps_our_rows_first():
    ours = pd.DataFrame({"step": [2.0, 1.0]}, index=pd.Index(["numba_t1", "cupy_t1"], name="variant"))
    out = A.with_source(ours, "nvidia-h200", A.paper_table5_000())
    assert list(out["source"][:2]) == ["ours (nvidia-h200)"] * 2 and (out["source"][2:] == "paper").all()
    assert list(out.columns) == ["source", "step"] and out["step"].iloc[2] == 19.82


def test_paper_runs_weights():
    """Figs 11 and 13 with the paper's versions: ITER of the hybrid code 0.26 of 0.47 s per step."""
    w = A.weights(A.paper_runs_000(), "step", A.TOP)
    assert w["ITER [%]"].iloc[-1] == pytest.approx(100 * 0.26 / 0.47)
    wi = A.weights(A.paper_runs_000(), "ITER", A.ITER_STEPS)
    assert wi["ITER/eigen"].iloc[0] == 0.23 and wi["other"].iloc[0] == pytest.approx(1.22 - 0.23 - 0.37 - 0.59)
    assert A.variant_label(w.index[0]) == "paper 000 (E5-2630, K40c): sequential"


def _run_row(variant, backend, threads, iter_s, sections=None):
    row = {"machine": "m", "variant": variant, "backend": backend, "threads": threads, "step": 1.0, "BTE": 0.8,
           "DENS": 0.01, "ITER": iter_s, "BTE/RK": 0.5, "BTE/WENO_x": 0.2}
    row.update(sections or {})
    return row


def test_iter_sections_come_from_the_sections_runs(tmp_path):
    # a graphed timing run times ITER only (its sections 0); its sections run (iter_graph false)
    # times them: Table 3 of 001, Table 5's section columns and the ITER weights read those, the
    # step / BTE / ITER columns stay the timing run's
    parts = {"ITER/eigen": 0.02, "ITER/Frechet": 0.01, "ITER/construct_linsys": 0.005, "ITER/solve_linsys": 0.015}
    zero = dict.fromkeys(parts, 0.0)
    runs = pd.DataFrame([_run_row("numpy_t1", "numpy", 1, 0.06, {**parts, "ITER/eigen": 0.04}),
                         _run_row("numba_t1", "numba", 1, 0.04, zero),
                         _run_row("cupy_t1", "cupy", 1, 0.001, zero)])
    sections = pd.DataFrame([_run_row("numba_t1", "numba", 1, 0.05, parts),
                             _run_row("numba_t9", "numba", 9, 0.05, parts)])  # no timing run: ignored
    sec = A.with_sections(runs, sections)
    assert sorted(sec["variant"]) == ["cupy_t1", "numba_t1", "numpy_t1"]
    assert dict(zip(sec["variant"], sec["sections"])) == {"numpy_t1": "timing", "numba_t1": "sections",
                                                          "cupy_t1": "timing"}
    t5 = A.section_columns(A.phase_table(runs, A.TABLE5_000), A.phase_table(sec, A.TABLE5_000), sec)
    assert A.TABLE5_SECTION_COLUMNS == ("lin. sys.", "Schrod.", "NR kernel")
    assert t5.loc["numba_t1", "Schrod."] == 0.02 and t5.loc["numba_t1", "lin. sys."] == 0.015
    assert t5.loc["numba_t1", "ITER"] == 0.04  # the graphed timing run's ITER
    assert t5.loc["numpy_t1", "Schrod."] == 0.04 and t5.loc["cupy_t1", "Schrod."] == 0.0
    assert [A.SECTIONS_NOTE in t5.loc[v, "note"] for v in ("numpy_t1", "numba_t1", "cupy_t1")] == [False, True, False]
    t3 = A.section_columns(A.phase_table(runs, A.TABLE3_001), A.phase_table(sec, A.TABLE3_001), sec, A.TABLE3_001)
    assert list(t3.loc["numba_t1", list(A.TABLE3_001)]) == [0.02, 0.01, 0.005, 0.015]
    w = A.weights(sec, "ITER", A.ITER_STEPS)
    assert w.loc["numba_t1", "ITER/eigen [%]"] == pytest.approx(40.0)  # 0.02 of the sections run's 0.05
    # without sections runs: the timing runs as they are, no note
    t5_plain = A.section_columns(A.phase_table(runs, A.TABLE5_000), A.phase_table(A.with_sections(runs, None),
                                 A.TABLE5_000), A.with_sections(runs, None))
    assert t5_plain.loc["numba_t1", "Schrod."] == 0.0 and not t5_plain["note"].str.contains("sections").any()
    # the tables' and the figures' one source: sectioned_tables over read_sections' CSVs
    csv = tmp_path / "sections_runs.csv"
    sections.to_csv(csv, index=False)
    assert A.read_sections([]) is None
    sec2, t5b, t3b = A.sectioned_tables(runs, A.read_sections([csv]))
    assert t5b.loc["numba_t1", "Schrod."] == 0.02 and list(t3b.loc["numba_t1", list(A.TABLE3_001)]) == [0.02, 0.01, 0.005, 0.015]
    assert A.speedups(t3b, "numpy_t1").loc["numba_t1", "iter.eigen"] == pytest.approx(0.04 / 0.02)  # Figs 8-9's bars


def test_sections_runs_time_the_sections_in_every_step(tmp_path):
    # the premise of bsp.sections: with the Newton iteration graphed (numerics.iter_graph, numba here)
    # a step that keeps the Jacobian times ITER only; with iter_graph false every step times eigen
    from solver.backend import get_backend
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    steps = {}
    for graph in ("true", "false"):
        cfg = load(None, ["mesh.N_sbn=6", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=24", "mesh.NPHI=8", "time.steps=5",
                          "time.t_end_ps=null", "numerics.backend=numba", "numerics.threads=1",
                          f"numerics.iter_graph={graph}", "output.progress=false", "output.checkpoint_every_steps=0"])
        sim = Simulation(cfg, get_backend("numba"), tmp_path / graph, progress=False)
        sim.run()
        t = pd.read_csv(tmp_path / graph / "timers.csv")
        steps[graph] = sorted(set(t.loc[t["phase"] == "step/ITER/eigen", "step"]))
    assert steps["false"] == [1, 2, 3, 4, 5]
    assert steps["true"] != steps["false"] and 1 in steps["true"]  # the kept-Jacobian steps: ITER only
