"""The bsp workflow's analysis functions on small synthetic run records (known ratios, orders of a
manufactured sequence), the doc tables against the model's constants, and the DAG itself."""
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from solver.bsp import analysis as A
from solver.bsp import constants as K
from solver.bsp import docs, layout
from solver.bsp.model import Model, load

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model():
    return Model(load(None, ["time.steps=1"]))


# ------------------------------------------------------------------------------ layout (Table 1)
def test_layout_phi_matches_model_and_paper_mapping(model):
    assert layout.shape_of("Phi", model) == model.shape == (65, 3, 6, 300, 48)
    assert layout.BY_NAME["Phi"].order == "i > nu > p > l > m"
    # the paper's 1-D index (000, eq. after Table 1) equals C-order raveling of our shape
    NX, _, P, NW, NPHI = model.shape
    nu, p, i, l, m = 2, 4, 17, 123, 31
    paper = i * 3 * P * NW * NPHI + nu * P * NW * NPHI + p * NW * NPHI + l * NPHI + m
    assert np.ravel_multi_index((i, nu, p, l, m), model.shape) == paper


def test_layout_table_rows(model):
    t = docs.table1_layout(model).set_index("array")
    assert t.loc["W", "shape_concrete"] == "65x3x6x3x6"
    assert t.loc["chi", "memory_order"] == "i > nu > p > j"
    assert t.loc["V", "fastest_index"] == "j"
    assert t.loc["N", "paper_order"] == "i > j > nu > p"
    assert t.loc["Phi", "MiB_float64"] == pytest.approx(65 * 18 * 300 * 48 * 8 / 2**20, rel=1e-3)


# ------------------------------------------------------------------------------ Tables 8, 9, scales
def test_table8_from_constants(model):
    t = docs.table8_constants(model).set_index("symbol")["value"]
    assert t["m_e"] == K.M_E and t["eps_0"] == K.EPS_0 and t["q"] == K.Q
    assert t["V_c,ox"] == 3.15 and t["eps_R,Si"] == 11.7 and t["eps_R,ox"] == 3.9 and t["m_ox"] == 0.5
    assert t["N_D,contact"] == 1e26 and t["N_D,channel"] == 1e18 and t["N_D,ox"] == 0.0


def test_table9_masses_and_kane(model):
    t = docs.table9_valleys(model)
    assert list(t["valley"]) == [1, 2, 3]
    np.testing.assert_array_equal(t[["m_x", "m_y", "m_z"]].to_numpy(), np.array(K.VALLEY_MASSES))
    assert (t["kane_alpha_per_eV"] == 0.5).all()
    assert t["kane_alpha_dimless"].iloc[0] == pytest.approx(0.012926, rel=1e-4)  # physics.md §3


def test_scales_against_physics_md(model):
    s = docs.table_scales(model).set_index("scale")["value"]
    assert s["time t*"] == pytest.approx(0.29660e-12, rel=1e-4)
    assert s["surface current j*"] == pytest.approx(3665.3, rel=1e-4)
    assert s["c_s1"] == pytest.approx(0.046055, rel=1e-4)
    assert s["c_p"] == pytest.approx(1899.76, rel=1e-5)


def test_geometry_figure_draws_gates(model):
    fig = docs.geometry_figure(model)
    gate_lines = [ln for ln in fig.axes[0].lines if ln.get_color() == "crimson"]
    assert len(gate_lines) == 2 and len(gate_lines[0].get_xdata()) == model.gate_x.sum() == 39


# ------------------------------------------------------------------------------ synthetic runs
def _write_run(d: Path, backend, threads, mesh, per_step: dict, steps=4, warm_factor=10.0):
    """A synthetic run folder: the first step is warm_factor times slower (left out by warmup=1)."""
    d.mkdir(parents=True, exist_ok=True)
    m = A.parse_mesh(mesh)
    rows = []
    for s in range(1, steps + 1):
        for ph, v in per_step.items():
            rows.append({"step": s, "phase": "step" if ph == "step" else f"step/{ph}", "seconds": v * (warm_factor if s == 1 else 1.0)})
    pd.DataFrame(rows).to_csv(d / "timers.csv", index=False)
    rec = {"machine_tag": "synthetic", "config": {"mesh": m, "numerics": {"backend": backend, "threads": threads}},
           "summary": {"steps": steps, "wall_s": 1.0, "startup_s": 0.1, "mean_current_A_per_m": 5.0},
           "timers": {"steps": steps, "mean_per_step_s": {}}}
    (d / "run.json").write_text(json.dumps(rec))
    return d


def _times(scale=1.0, iter_scale=None):
    """Per-step phase times whose children sum to their parents."""
    iter_scale = scale if iter_scale is None else iter_scale
    bte = {k: v * scale for k, v in zip(A.BTE_KERNELS, (1.0, 1.0, 0.5, 4.0, 1.0, 0.5))}
    it = {k: v * iter_scale for k, v in zip(A.ITER_STEPS, (0.2, 0.3, 0.1, 0.4))}
    out = {**bte, **it, "BTE": sum(bte.values()), "ITER": sum(it.values()), "DENS": 0.1 * scale}
    out["step"] = out["BTE"] + out["ITER"] + out["DENS"]
    return out


def test_collect_leaves_out_warmup_and_normalizes(tmp_path):
    d = _write_run(tmp_path / "a", "numpy", 1, "6x65x65x300x48", _times())
    r = A.collect_runs([d], warmup=1).iloc[0]
    assert r["variant"] == "numpy_t1" and r["mesh"] == "6x65x65x300x48" and r["NW"] == 300
    assert r["step"] == pytest.approx(_times()["step"])            # the 10x slower first step is left out
    assert r["BTE/scat_gain"] == pytest.approx(4.0)
    assert r["timed_steps"] == 3 and r["step_max"] == pytest.approx(_times()["step"])
    r0 = A.collect_runs([d], warmup=0).iloc[0]
    assert r0["step"] == pytest.approx(_times()["step"])  # the median of (10, 1, 1, 1) x step
    assert r0["step_max"] == pytest.approx(10 * _times()["step"]) and r0["step_min"] == pytest.approx(_times()["step"])
    assert A.mean_phase_times(d, 0, stat="mean")["step"] == pytest.approx(_times()["step"] * 13 / 4)  # (10 + 3) / 4


def test_step_spread_quantiles(tmp_path):
    """p10 / p90 of the step time over the timed steps (linear interpolation between steps)."""
    d = tmp_path / "a"
    d.mkdir()
    rows = [{"step": s, "phase": "step", "seconds": float(s)} for s in range(1, 13)]  # warm-up 2 -> 3..12
    pd.DataFrame(rows).to_csv(d / "timers.csv", index=False)
    (d / "run.json").write_text(json.dumps({"config": {"mesh": A.parse_mesh("3x9x9x12x8"), "numerics": {}},
                                            "summary": {"steps": 12}, "timers": {"steps": 12}}))
    r = A.collect_runs([d], warmup=2).iloc[0]
    assert r["timed_steps"] == 10 and r["step"] == 7.5 and r["step_min"] == 3.0 and r["step_max"] == 12.0
    assert r["step_p10"] == pytest.approx(3.9) and r["step_p90"] == pytest.approx(11.1)


def test_calls_per_step(tmp_path):
    d = _write_run(tmp_path / "a", "numpy", 1, "2x9x9x12x8", _times(), steps=4)
    rec = json.loads((d / "run.json").read_text())
    rec["timers"]["calls"] = {"step": 4, "step/BTE": 12, "step/ITER/POTENTIAL/eigen": 30, "startup/INITCOND": 1}
    (d / "run.json").write_text(json.dumps(rec))
    t = A.calls_per_step({"numpy_t1": d})
    assert t.loc["step", "numpy_t1"] == 1.0 and t.loc["BTE", "numpy_t1"] == 3.0
    assert t.loc["ITER/eigen", "numpy_t1"] == 7.5 and "startup/INITCOND" not in t.index


def test_normalize_deeper_phase_names():
    """Nested phases fold onto the papers' names; committed timers with the old names
    (constrlinsys, solvelinsys) read as construct_linsys, solve_linsys."""
    s = A.normalize_phases(pd.Series({"step": 3.0, "step/ITER": 2.0, "step/ITER/POTENTIAL/eigen": 0.5,
                                      "step/ITER/POTENTIAL/solvelinsys": 1.0,
                                      "step/ITER/POTENTIAL/constrlinsys": 0.25, "startup/INITCOND": 9.0}))
    assert s["ITER/eigen"] == 0.5 and s["ITER/solve_linsys"] == 1.0 and s["ITER/construct_linsys"] == 0.25
    assert "startup/INITCOND" not in s and "ITER/solvelinsys" not in s


@pytest.fixture
def timing_runs(tmp_path):
    ds = [_write_run(tmp_path / "t1", "numpy", 1, "2x9x9x12x8", _times(1.0)),
          _write_run(tmp_path / "t4", "numba", 4, "2x9x9x12x8", _times(0.25, 0.5)),
          _write_run(tmp_path / "g", "cupy", 1, "2x9x9x12x8", _times(0.05, 0.1)),
          _write_run(tmp_path / "t2", "numba", 2, "2x9x9x12x8", _times(0.5, 0.5))]
    return A.collect_runs(ds)


def test_phase_table_and_speedups(timing_runs):
    t5 = A.phase_table(timing_runs, A.TABLE5_000)
    assert list(t5.index) == ["numpy_t1", "numba_t2", "numba_t4", "cupy_t1"]  # sequential, threads, GPU
    assert t5.loc["numpy_t1", "FD-WENO-5"] == pytest.approx(2.5)
    assert t5.loc["numpy_t1", "scatt."] == pytest.approx(5.0)
    assert t5.loc["numpy_t1", "NR kernel"] == pytest.approx(0.3)
    sp = A.speedups(t5, "numpy_t1")
    assert sp.loc["numba_t4", "BTE"] == pytest.approx(4.0)
    assert sp.loc["numba_t4", "ITER"] == pytest.approx(2.0)
    assert sp.loc["cupy_t1", "scatt."] == pytest.approx(20.0)
    assert (sp.loc["numpy_t1"] == 1.0).all()
    with pytest.raises(KeyError):
        A.speedups(t5, "numba_t16")


def test_weights_sum_to_parent(timing_runs):
    w = A.weights(timing_runs, "BTE", A.BTE_KERNELS)
    pct = w[[f"{c} [%]" for c in A.BTE_KERNELS] + ["other [%]"]].sum(axis=1)
    np.testing.assert_allclose(pct, 100.0)
    assert w.loc["numpy_t1", "BTE/scat_gain [%]"] == pytest.approx(50.0)
    np.testing.assert_allclose(w["other"], 0.0, atol=1e-12)
    top = A.weights(timing_runs, "step", A.TOP)
    assert top.loc["numpy_t1", "ITER [%]"] == pytest.approx(100 * 1.0 / 9.1)


def test_mesh_scaling_and_doubling(tmp_path):
    ref = "6x65x65x300x48"
    assert A.double(ref, "NX") == "6x129x65x300x48" and A.double(ref, "NW") == "6x65x65x600x48"
    ds = [_write_run(tmp_path / "ref", "numpy", 1, ref, _times(1.0))]
    factor = {"N_sbn": 4.0, "NX": 2.0, "NZ": 1.0, "NW": 2.0, "NPHI": 2.0}  # a manufactured cost model
    for d, f in factor.items():
        ds.append(_write_run(tmp_path / d, "numpy", 1, A.double(ref, d), _times(f, 8.0 if d == "NZ" else f)))
    t = A.mesh_scaling(A.collect_runs(ds), ref, A.TABLE5_000)
    assert list(t.index) == ["reference", "N_sbn x2", "NX x2", "NZ x2", "NW x2", "NPHI x2"]
    assert t.loc["N_sbn x2", "scatt. ratio"] == pytest.approx(4.0)
    assert t.loc["NZ x2", "ITER ratio"] == pytest.approx(8.0)
    assert t.loc["NZ x2", "FD-WENO-5 ratio"] == pytest.approx(1.0)
    assert t.loc["reference", "step ratio"] == 1.0


def test_grid_speedups(tmp_path):
    ds = []
    for k, mesh in enumerate(["6x33x33x150x24", "6x65x65x300x48"]):
        ds.append(_write_run(tmp_path / f"s{k}", "numpy", 1, mesh, _times(1.0, 10.0 * (k + 1))))
        ds.append(_write_run(tmp_path / f"g{k}", "cupy", 1, mesh, _times(0.1, 1.0 / (k + 1))))
    sp = A.grid_speedups(A.collect_runs(ds), "numpy_t1", "ITER", ["6x33x33x150x24", "6x65x65x300x48"])
    assert list(sp.columns) == ["numpy_t1", "cupy_t1"]
    assert sp.loc["6x33x33x150x24", "cupy_t1"] == pytest.approx(10.0)
    assert sp.loc["6x65x65x300x48", "cupy_t1"] == pytest.approx(40.0)


def test_compare_machines(timing_runs):
    other = timing_runs.copy()
    for c in A.PHASES:
        other[c] = other[c] / 2
    other = other[other["variant"] != "numba_t2"]
    c = A.compare_machines({"nvidia-h200": other, "nvidia-h100": timing_runs})
    assert list(c.columns) == ["nvidia-h100", "nvidia-h200"]
    key = ("2x9x9x12x8", "cupy_t1", "BTE")
    assert c.loc[key, "nvidia-h200"] == pytest.approx(c.loc[key, "nvidia-h100"] / 2)
    assert np.isnan(c.loc[("2x9x9x12x8", "numba_t2", "step"), "nvidia-h200"])


def _fused_times(scale=1.0):
    """_times of a run with the fused stage RK_wphi: no WENO_w / WENO_phi timers, their 1.0 + 0.5
    inside BTE/RK (0.5 + 1.5 = 2.0); BTE and step as in _times."""
    out = _times(scale)
    out["BTE/RK"] += out.pop("BTE/WENO_w") + out.pop("BTE/WENO_phi")
    return out


@pytest.fixture
def fused_runs(tmp_path):
    ds = [_write_run(tmp_path / "t1", "numpy", 1, "2x9x9x12x8", _times(1.0)),
          _write_run(tmp_path / "t2", "numba", 2, "2x9x9x12x8", _fused_times(0.5)),
          _write_run(tmp_path / "g", "cupy", 1, "2x9x9x12x8", _fused_times(0.05))]
    return A.collect_runs(ds)


def test_fused_stage_leaves_fd_weno_unknown(fused_runs):
    """Runs whose RK holds WENO_w + WENO_phi (no timers of their own): FD-WENO-5 and the w / phi
    weights are NaN (not WENO_x alone, not 0) and the rows carry the note; the unfused row as before."""
    assert list(A.fused_wphi(A._ordered(fused_runs))) == [False, True, True]
    t5 = A.phase_table(fused_runs, A.TABLE5_000)
    assert t5.loc["numpy_t1", "FD-WENO-5"] == pytest.approx(2.5) and t5.loc["numpy_t1", "note"] == ""
    assert np.isnan(t5.loc["numba_t2", "FD-WENO-5"]) and np.isnan(t5.loc["cupy_t1", "FD-WENO-5"])
    assert t5.loc["numba_t2", "BTE"] == pytest.approx(4.0) and t5.loc["numba_t2", "scatt."] == pytest.approx(2.5)
    assert t5.loc["numba_t2", "note"] == A.FUSED_NOTE == t5.loc["cupy_t1", "note"]
    assert "note" not in A.phase_table(fused_runs, A.TABLE2_001)  # no column of Table 2 sums WENO_w / WENO_phi
    sp = A.speedups(t5, "numpy_t1")
    assert sp.loc["numba_t2", "BTE"] == pytest.approx(2.0) and np.isnan(sp.loc["numba_t2", "FD-WENO-5"])
    assert sp.loc["cupy_t1", "note"] == A.FUSED_NOTE and sp.loc["numpy_t1", "step"] == 1.0
    w = A.weights(fused_runs, "BTE", A.BTE_KERNELS)
    assert np.isnan(w.loc["numba_t2", "BTE/WENO_w"]) and np.isnan(w.loc["numba_t2", "BTE/WENO_phi [%]"])
    assert w.loc["numba_t2", "BTE/RK [%]"] == pytest.approx(25.0)  # 2.0 of 8.0
    assert w.loc["numba_t2", "other"] == pytest.approx(0.0, abs=1e-12)
    assert w.loc["numpy_t1", "BTE/WENO_w [%]"] == pytest.approx(12.5) and w.loc["numpy_t1", "note"] == ""
    c = A.compare_machines({"m": fused_runs})["m"]
    assert np.isnan(c[("2x9x9x12x8", "cupy_t1", "FD-WENO-5")]) and c[("2x9x9x12x8", "numpy_t1", "FD-WENO-5")] == pytest.approx(2.5)
    fig = A.plot_weights(w, A.BTE_KERNELS, "t")
    labels = [x.get_text() for x in fig.axes[0].get_xticklabels()]
    assert labels == ["numpy sequential", "numba 2 threads\n(RK incl. WENO_w, WENO_phi)", "GPU (cupy)\n(RK incl. WENO_w, WENO_phi)"]
    assert len(A.plot_speedups(sp, "t").axes) == 9  # the note is no panel


def test_fused_stage_mesh_scaling(tmp_path):
    ref = "6x65x65x300x48"
    ds = [_write_run(tmp_path / "ref", "numba", 1, ref, _fused_times(1.0)),
          _write_run(tmp_path / "NX", "numba", 1, A.double(ref, "NX"), _fused_times(2.0))]
    t = A.mesh_scaling(A.collect_runs(ds), ref, A.TABLE5_000)
    assert t.loc["NX x2", "BTE ratio"] == pytest.approx(2.0) and np.isnan(t.loc["NX x2", "FD-WENO-5 ratio"])
    assert list(t["note"]) == [A.FUSED_NOTE] * 2


def test_calls_per_step_of_a_fused_run(tmp_path):
    """Table 3: the fused run has no WENO_w / WENO_phi timers: NaN there (the rows kept), RK 3 per step."""
    d = _write_run(tmp_path / "f", "numba", 2, "2x9x9x12x8", _fused_times(), steps=4)
    rec = json.loads((d / "run.json").read_text())
    rec["timers"]["calls"] = {"step": 4, "step/BTE": 4, "step/BTE/WENO_x": 12, "step/BTE/RK": 12}
    (d / "run.json").write_text(json.dumps(rec))
    t = A.calls_per_step({"numba_t2": d})["numba_t2"]
    assert list(t.index) == ["step", "BTE", "BTE/WENO_x", "BTE/WENO_w", "BTE/WENO_phi", "BTE/RK"]
    assert t["BTE/RK"] == 3.0 and t["BTE/WENO_x"] == 3.0 and t[list(A.FUSED_INTO_RK)].isna().all()


# ------------------------------------------------------------------------------ convergence
def test_observed_order_exact():
    h = np.array([1 / 8, 1 / 16, 1 / 32])
    p = A.observed_order(h, 3.0 * h**4)
    assert np.isnan(p[0])
    np.testing.assert_allclose(p[1:], 4.0)


def test_convergence_of_manufactured_sequence():
    """u_h(x) = sin(pi x) + C h^2 cos(3 x): orders 2 against a much finer reference."""
    L = 20e-9

    def prof(nx):
        x = np.linspace(0, 1, nx)
        h = 1.0 / (nx - 1)
        return pd.DataFrame({"x_m": x * L, "Ns_total_m-2": 1e16 * (2 + np.sin(np.pi * x) + 5 * h**2 * np.cos(3 * x)),
                             "j_total_A_per_m": 300 * (1 + 0.1 * np.sin(np.pi * x) + 2 * h**2 * np.cos(3 * x))})

    meshes = {A.mesh_name(2, nx, nx, 12, 8): prof(nx) for nx in (9, 17, 33, 2049)}
    ref = A.mesh_name(2, 2049, 2049, 12, 8)
    t = A.convergence(meshes, ref)
    assert list(t["NX"]) == [9, 17, 33]
    for q in ("Ns", "j"):
        for n in ("max", "L2"):
            np.testing.assert_allclose(t[f"{q}_order_{n}"].iloc[1:], 2.0, atol=0.01)
    assert (np.diff(t["Ns_err_max"]) < 0).all()


# ------------------------------------------------------------------------------ Sturm count
def _sturm_ref(d, e, xi):
    """Number of eigenvalues below xi of tridiag(e, d, e) (LDL^T pivots)."""
    q, n = d[0] - xi, int(d[0] - xi < 0)
    for k in range(1, len(d)):
        q = d[k] - xi - e[k - 1] ** 2 / (q if q != 0 else 1e-300)
        n += q < 0
    return n


def test_sturm_curve_jumps_at_eigenvalues():
    n = 12
    d, e = np.full(n, 2.0), np.full(n - 1, -1.0)
    xi, sigma, ev = A.sturm_curve(d, e, _sturm_ref, n_xi=500, n_eig=4)
    exact = 2 - 2 * np.cos(np.arange(1, 5) * np.pi / (n + 1))
    np.testing.assert_allclose(ev, exact, atol=1e-12)
    for k, lam in enumerate(exact):  # sigma counts the eigenvalues below xi
        assert set(sigma[(xi > lam) & (xi < (exact[k + 1] if k + 1 < 4 else xi[-1] + 1))]) == {k + 1}
    assert sigma[0] == 0 and (np.diff(sigma) >= 0).all()


# ------------------------------------------------------------------------------ the DAG
needs_snakemake = pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")


def _dry(*args):
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--configfile", "config/smoke.yaml",
                           *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@needs_snakemake
def test_bad_config_value_names_the_key():
    r = _dry("--config", "bsp={timing: {mesh: 6x65}}")
    assert r.returncode != 0
    assert "6x65" in (r.stdout + r.stderr) and "mesh" in (r.stdout + r.stderr)


@needs_snakemake
def test_exponent_numbers_in_a_configfile(tmp_path):
    """iv.steady.rtol: 1e-1 (an exponent float without a dot, which Snakemake's YAML 1.1 loader reads as a string) is
    a number for the workflow's schema and rules (the Snakefile's solver.config.yaml12_numbers); the same plan as 0.1."""
    text = (REPO / "config/smoke.yaml").read_text()
    assert "rtol: 0.1," in text
    cfg = tmp_path / "smoke_exp.yaml"
    cfg.write_text(text.replace("rtol: 0.1,", "rtol: 1e-1,"))
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "2", "--configfile", str(cfg)],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    assert "--set steady.rtol=0.1 " in r.stdout and "rtol=1e-1" not in r.stdout


def _rules_and_captions():
    """(rule name, caption stems) of every bsp rule, read from workflow/rules/bsp.smk."""
    import re

    text = (REPO / "workflow/rules/bsp.smk").read_text()
    blocks = re.split(r"^rule ", text, flags=re.M)[1:]
    return {b.split(":")[0]: set(re.findall(r'_caption\("([a-z0-9_]+)"|report_caption\("([a-z0-9_]+)"\)', b))
            for b in blocks}


def test_rule_names_match_captions():
    """A rule that makes one artifact carries its caption's name; every caption file exists and is used."""
    rules = _rules_and_captions()
    used = set()
    for rule, caps in rules.items():
        stems = {a or b for a, b in caps}
        used |= stems
        if len(stems) == 1:
            assert stems == {rule}, (rule, stems)
    files = {p.stem for p in (REPO / "workflow/report").glob("bsp_*.rst")}
    assert used == files
    assert {"bsp_table2_000_krylov", "bsp_bench", "bsp_table4_000_kernel_profile"} <= set(rules)


def test_no_solver_import_while_the_bsp_rules_are_read():
    """Names are built from the config in the workflow; only bsp_check_runs loads the solver's schema."""
    for f in ("workflow/rules/bsp.smk", "workflow/rules/common.smk"):
        text = (REPO / f).read_text()
        assert "solver.bsp import analysis" not in text and "BSP_HAS_" not in text


@needs_snakemake
def test_smoke_dag_plans_the_bench_cases():
    r = _dry("-p", "--forceall", "bsp_bench")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    for case in ("3x9x9x12x8:numpy:1:3:1", "3x9x9x12x8:numba:1:3:1", "3x9x9x12x8:numba:2:3:1"):
        assert f"--case {case}" in out
    assert ":cupy:" not in out  # smoke: gpu false


def _iv_extra(tmp_path, iv_extra: str) -> Path:
    """A config file for the smoke config's iv study with seeds (V_G = -0.3 V starts from a seed at 0.3 V) and
    ``iv_extra`` (YAML flow items) in its iv section."""
    extra = tmp_path / "iv.yaml"
    extra.write_text(f"iv: {{vg: [-0.3, 0.3, 0.5], low_vg_from: 0.3, low_vg_seed_ps: 0.01{iv_extra}}}\n")
    return extra


def _iv_dryrun(*configfiles):
    """Dry run of the iv study (all of it, --forceall; shell commands printed) under ``configfiles``."""
    return subprocess.run([sys.executable, "-m", "snakemake", "iv_collect", "-n", "-p", "--forceall", "--cores", "2",
                           "--configfile", *map(str, configfiles)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def _iv_dry(tmp_path, iv_extra: str):
    """Dry run of the smoke config's iv study with seeds and ``iv_extra`` (_iv_extra)."""
    return _iv_dryrun("config/smoke.yaml", _iv_extra(tmp_path, iv_extra))


@needs_snakemake
def test_iv_points_record_faults_and_accept_exit_3_seeds_do_not(tmp_path):
    """iv.on_fault record (the default): every point's run gets output.on_fault=record and its shell accepts
    exit code 3 only; the seeds keep stop; iv.on_fault stop: neither; a bad value names the key."""
    r = _iv_dry(tmp_path, "")
    assert r.returncode == 0, r.stderr[-2000:]
    cmds = [ln for ln in (r.stdout + r.stderr).splitlines() if " -m solver run " in ln]
    points = [c for c in cmds if "/iv/logs/point_" in c]
    seeds = [c for c in cmds if "/iv/logs/seed_" in c]
    assert len(points) == 4 and len(seeds) == 1, cmds
    for c in points:
        assert "--set output.on_fault=record" in c and c.endswith("2>&1 || [ $? -eq 3 ]"), c
        assert "--gpu" not in c  # smoke: numpy
    assert "on_fault" not in seeds[0] and "$?" not in seeds[0] and seeds[0].endswith("2>&1")
    r = _iv_dry(tmp_path, ", on_fault: stop")
    assert r.returncode == 0, r.stderr[-2000:]
    cmds = [ln for ln in (r.stdout + r.stderr).splitlines() if " -m solver run " in ln]
    assert len(cmds) == 5 and not any("on_fault" in c or "$?" in c for c in cmds)
    r = _iv_dry(tmp_path, ", on_fault: ignore")
    assert r.returncode != 0 and "on_fault" in (r.stdout + r.stderr) and "ignore" in (r.stdout + r.stderr)


@needs_snakemake
def test_iv_folder_puts_a_second_study_beside_the_first(tmp_path):
    """iv.folder: the points, seeds, logs and tables under results/<machine>/<folder>/ (config/iv_standard.yaml's
    iv_standard beside config/gpu.yaml's iv); a folder that is not a name starting with iv names the key."""
    r = _iv_dry(tmp_path, ", folder: iv_std")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    cmds = [ln for ln in out.splitlines() if " -m solver run " in ln]
    assert len(cmds) == 5 and all("/iv_std/logs/" in c and "/iv_std/runs/" in c for c in cmds), cmds
    assert "/iv/" not in out.replace("/iv_std/", "")
    collect = [ln for ln in out.splitlines() if " -m solver bsp iv collect " in ln]
    assert len(collect) == 1 and "--out results/" in collect[0] and collect[0].split("--out ")[1].split()[0].endswith("/iv_std")
    for bad in ("../bsp", "bsp"):
        r = _iv_dry(tmp_path, f", folder: '{bad}'")
        assert r.returncode != 0 and "folder" in (r.stdout + r.stderr) and bad in (r.stdout + r.stderr)


def _iv_config_runs(configfile: str) -> list[str]:
    """The `solver run` shell commands of a dry run of ``configfile``'s iv study (all of it, --forceall)."""
    r = _iv_dryrun(configfile)
    assert r.returncode == 0, r.stderr[-2000:]
    return [ln for ln in (r.stdout + r.stderr).splitlines() if " -m solver run " in ln]


@needs_snakemake
def test_iv_standard_config_plans_twelve_points_on_the_standard_mesh():
    """config/iv_standard.yaml: 12 points on 6x65x65x300x48 under iv_standard/ (-0.3 V only at 0.4 V: iv.skip), the
    hybrid rule and 2.5 ps at V_G <= -0.2 V, the authors' rule and 0.8 ps above; no other study's job."""
    cmds = _iv_config_runs("config/iv_standard.yaml")
    assert len(cmds) == 12, cmds
    assert sum("/vg-0.300_vds" in c for c in cmds) == 1 and any("/vg-0.300_vds0.400" in c for c in cmds)
    for c in cmds:
        assert "/iv_standard/runs/6x65x65x300x48/cupy_t1/vg" in c and "--set mesh.NX=65" in c and "--set mesh.NW=300" in c
        low = "/vg-0.200_vds" in c or "/vg-0.300_vds" in c
        assert ("numerics.contact_rule=hybrid" in c) == low, c
        assert ("--gpu own " in c) == low and ("--gpu auto " in c) != low, c  # iv.long_points_gpu: own
        assert ("time.t_end_ps=2.5 " in c) == low and ("time.t_end_ps=0.8 " in c) != low, c


@needs_snakemake
def test_iv_standard_hold_config_plans_the_twelve_points_with_hold_and_timed_checkpoints():
    """config/iv_standard_hold.yaml (docs/iv.md §22, §23): the same 12 points under iv_standard_hold/, every one with
    steady.hold_windows 1 and checkpoints by wall time only; 1.5 ps above threshold, 2.5 ps below; every point
    --gpu auto, one per GPU (iv.points_per_gpu 1, read by tools/bsp/iv_device.sh)."""
    import yaml

    cmds = _iv_config_runs("config/iv_standard_hold.yaml")
    assert len(cmds) == 12, cmds
    for name in ("iv_standard_hold", "iv_standard"):
        assert yaml.safe_load(open(f"config/{name}.yaml"))["iv"]["points_per_gpu"] == 1
    for c in cmds:
        assert "/iv_standard_hold/runs/6x65x65x300x48/cupy_t1/vg" in c and "--set steady.hold_windows=1" in c, c
        assert "--gpu auto " in c, c  # long_points_gpu shared
        assert "--set output.checkpoint_every_steps=0 --set output.checkpoint_every_s=120 " in c, c
        low = "/vg-0.200_vds" in c or "/vg-0.300_vds" in c
        assert ("time.t_end_ps=2.5 " in c) == low and ("time.t_end_ps=1.5 " in c) != low, c


def _priorities(out: str) -> dict:
    """{job's point wildcard: its priority} from a dry run's job listing (seeds as seed_<point>)."""
    pri, rule, point = {}, None, None
    for ln in out.splitlines():
        s = ln.strip()
        if s.startswith("rule ") or s.startswith("localrule "):
            rule, point = s.split()[1].rstrip(":"), None
        elif s.startswith("wildcards: point="):
            point = s.split("=", 1)[1].split(",")[0]
        elif s.startswith("priority: ") and point is not None:
            pri[("seed_" if rule == "iv_seed" else "") + point] = float(s.split()[1])
    return pri


@needs_snakemake
def test_iv_points_start_longest_first(tmp_path):
    """Rule iv_point's priority (solver.bsp.iv.start_priority): config/iv_standard_hold.yaml's points in the order of
    session 25's run times (docs/iv.md §24): the 2.5 ps points first, then by V_DS down, then by V_G up; a seed
    (the smoke study with seeds) above the point it seeds."""
    r = _iv_dryrun("config/iv_standard_hold.yaml")
    assert r.returncode == 0, r.stderr[-2000:]
    pri = _priorities(r.stdout + r.stderr)
    order = [p for p, _ in sorted(pri.items(), key=lambda kv: -kv[1])]
    assert order == ["vg-0.300_vds0.400", "vg-0.200_vds0.400", "vg-0.200_vds0.050",
                     "vg0.000_vds0.400", "vg0.300_vds0.400", "vg0.600_vds0.400",
                     "vg0.000_vds0.200", "vg0.300_vds0.200", "vg0.600_vds0.200",
                     "vg0.000_vds0.050", "vg0.300_vds0.050", "vg0.600_vds0.050"], order
    r = _iv_dry(tmp_path, "")
    assert r.returncode == 0, r.stderr[-2000:]
    pri = _priorities(r.stdout + r.stderr)
    seeds = [p for p in pri if p.startswith("seed_")]
    assert len(seeds) == 1 and len(pri) == 5, pri
    fed = [p for p in pri if p.startswith("vg-0.300_")]  # the point that starts from the seed
    assert len(fed) == 1 and pri[seeds[0]] == pri[fed[0]] + 1, pri
