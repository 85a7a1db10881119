"""The I-V study (solver.bsp.iv; docs/iv.md): figures of merit on synthetic curves with known
answers, the plan (points, continuation chains, run overrides), the collect command on real tiny
runs (also with a faulted point, iv.on_fault record), and the physical checks: Id = 0 at V_DS = 0,
Id grows with V_G and with V_DS."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from solver.backend import get_backend
from solver.bsp import iv
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

from _faults import negative_rho, nth_call

TINY = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=9", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
        "numerics.backend=numpy", "output.checkpoint_every_steps=0"]

STUDY = {"vg": [-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3], "idvg_vds": [0.05, 0.4], "idvd_vg": [0.1, 0.3],
         "vds": [0.05, 0.2, 0.4], "vth_current_A_per_m": 10.0, "bottom_gate_V": None,
         "steady": {"window_ps": 0.1, "rtol": 1e-3, "conservation_tol": 0.01, "t_max_ps": 2.0}}


# ------------------------------------------------------------------------------ figures of merit
def test_vth_and_swing_of_an_exponential():
    vg = np.linspace(-0.3, 0.3, 7)
    S, vt, ith = 0.075, 0.05, 10.0  # V/decade
    idd = ith * 10 ** ((vg - vt) / S)
    assert iv.vth_constant_current(vg, idd, ith) == pytest.approx(vt, abs=1e-12)
    assert iv.subthreshold_swing(vg, idd, ith) == pytest.approx(75.0, rel=1e-12)
    assert math.isnan(iv.vth_constant_current(vg, idd, 1e9))  # never crossed


def test_swing_takes_the_steepest_subthreshold_pair():
    vg = np.array([0.0, 0.1, 0.2, 0.3])
    idd = np.array([1e-3, 1e-2, 1e-1, 50.0])  # 100 mV/dec below 10 A/m, the last pair above it
    assert iv.subthreshold_swing(vg, idd, 10.0) == pytest.approx(100.0)
    idd = np.array([1e-4, 1e-2, 1e-1, 50.0])  # 50 then 100 mV/dec
    assert iv.subthreshold_swing(vg, idd, 10.0) == pytest.approx(50.0)


def test_swing_at_threshold_brackets_the_vth_current():
    vg = np.linspace(-0.3, 0.3, 7)
    idd = 10.0 * 10 ** ((vg - 0.05) / 0.075)  # an exponential: the same slope everywhere
    assert iv.swing_at_threshold(vg, idd, 10.0) == pytest.approx(75.0, rel=1e-12)
    # one resolved point below 10 A/m (an unresolved, negative one under it), the curve bending over above
    vg = np.array([-0.3, -0.2, -0.1, 0.0])
    idd = np.array([-0.5, 2.0, 40.0, 100.0])
    assert math.isnan(iv.subthreshold_swing(vg, idd, 10.0))
    assert iv.swing_at_threshold(vg, idd, 10.0) == pytest.approx(100.0 / math.log10(20.0), rel=1e-12)
    assert math.isnan(iv.swing_at_threshold(vg, np.array([-0.5, 20.0, 40.0, 100.0]), 10.0))  # no point below
    assert math.isnan(iv.swing_at_threshold(vg, np.array([1.0, 2.0, 4.0, 8.0]), 10.0))  # never reaches it
    # log Id concave: the swing at threshold is not below the subthreshold SS
    vg = np.linspace(-0.4, 0.2, 7)
    idd = 10.0 * 10 ** (-np.log10(1 + 10 ** (-(vg + 0.1) / 0.08)))  # 80 mV/dec far below, saturating above
    assert iv.swing_at_threshold(vg, idd, 1.0) > iv.subthreshold_swing(vg, idd, 1.0)


def test_gm_and_linear_extrapolation_of_a_straight_line():
    vg = np.array([0.2, 0.3, 0.45, 0.6])  # uneven spacing
    k, vt, vds = 2000.0, 0.1, 0.05
    idd = k * (vg - vt)
    assert iv.gm_curve(vg, idd) == pytest.approx(np.full(4, k))
    assert iv.vth_linear_extrapolation(vg, idd, vds) == pytest.approx(vt - vds / 2)


def test_log_idvg_marks_a_nonpositive_current_instead_of_drawing_it(tmp_path, monkeypatch):
    """On the log axes a point with Id <= 0 (a mean current below the mesh's resolution) leaves its curve
    and is a hollow gray triangle on the bottom edge; the linear axes keep it on the curve."""
    from solver import io

    pts = _synthetic_points()
    low = np.isclose(pts["V_G_top"], -0.3) & np.isclose(pts["V_DS"], 0.05)
    pts.loc[low, "Id_A_per_m"] = -0.5
    saved = {}
    monkeypatch.setattr(io, "save_figure", lambda fig, path, **kw: saved.update({path.name: fig}))
    iv.plot_idvg(iv.curves(pts, STUDY), STUDY, tmp_path / "log.png", tmp_path / "lin.png")
    ax = saved["log.png"].axes[0]
    marks = [ln for ln in ax.lines if ln.get_label() == "Id <= 0 (not resolved)"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [-0.3] and marks[0].get_marker() == "v"
    drawn = [ln for ln in ax.lines if ln not in marks and len(ln.get_ydata())]  # the curves and their o / x marks
    assert drawn and all(min(ln.get_ydata()) > 0 for ln in drawn)
    assert "Id <= 0 (not resolved)" in [t.get_text() for t in ax.get_legend().get_texts()]
    lin = saved["lin.png"].axes[0]
    assert not [ln for ln in lin.lines if ln.get_label() == "Id <= 0 (not resolved)"]
    assert -0.5 in list(lin.lines[0].get_ydata())


def _synthetic_points(S=0.08, vt_lo=0.0, dibl=0.1, gd=300.0):
    """Exponential Id-Vg curves (threshold vt - dibl V_DS), Id-Vd lines of slope gd."""
    rows = []
    for g, d in iv.points(STUDY):
        vt = vt_lo - dibl * (d - 0.05)
        idd = 10.0 * 10 ** ((g - vt) / S) if g in STUDY["vg"] and d in STUDY["idvg_vds"] else 100 + gd * d
        rows.append({"point": iv.point_name(g, d), "V_G_top": g, "V_G_bottom": g, "V_DS": d, "Id_A_per_m": idd,
                     "steady": True, "t_steady_ps": 1.0})
    return pd.DataFrame(rows)


def test_figures_of_merit_table():
    curv = iv.curves(_synthetic_points(), STUDY)
    assert set(curv["curve"]) == {"idvg_vds0.05", "idvg_vds0.4", "idvd_vg0.1", "idvd_vg0.3"}
    fom = iv.figures_of_merit(curv, STUDY)
    val = lambda q, i=0: fom[fom["quantity"] == q]["value"].iloc[i]  # noqa: E731
    assert val("Vth", 0) == pytest.approx(0.0, abs=1e-12)
    assert val("Vth", 1) == pytest.approx(-0.035, abs=1e-12)
    assert val("DIBL") == pytest.approx(100.0, rel=1e-9)  # mV/V
    assert val("SS", 0) == pytest.approx(80.0, rel=1e-12)
    assert val("SS_Vth", 0) == pytest.approx(80.0, rel=1e-12) and val("SS_Vth", 1) == pytest.approx(80.0, rel=1e-12)
    cond = fom[fom["quantity"] == "SS_Vth"]["condition"]
    assert cond.iloc[0] == "V_DS = 0.05 V, V_G = -0.1 to 0 V"  # the pair across 10 A/m (Id(0) = 10 exactly)
    assert ", V_G = " in fom[fom["quantity"] == "SS"]["condition"].iloc[0]
    ion = 10.0 * 10 ** ((0.3 + 0.035) / 0.08)
    ioff = 10.0 * 10 ** ((-0.3 + 0.035) / 0.08)
    assert val("Ion") == pytest.approx(ion) and val("Ioff") == pytest.approx(ioff)
    assert val("Ion/Ioff") == pytest.approx(ion / ioff)
    # Id-Vd points off the Id-Vg curves are lines of slope 300 S/m; the V_G = 0.1 and 0.3 curves
    # share their V_DS = 0.05 and 0.4 points with the exponentials, so take the 0.2-0.4 V pair
    gd = fom[fom["quantity"] == "gd"]
    assert len(gd) == 2 and all("0.2-0.4" in c for c in gd["condition"])


# ------------------------------------------------------------------------------ plan
def test_points_and_chains():
    pts = iv.points(STUDY)
    assert len(pts) == len(set(pts)) == 7 * 2 + 2 * 1  # the Id-Vd curves add only V_DS = 0.2
    assert all(s is None for s in iv.sources(STUDY).values())
    src = iv.sources({**STUDY, "continuation": True})
    assert src[(0.1, 0.05)] is None and src[(0.1, 0.2)] == (0.1, 0.05) and src[(0.1, 0.4)] == (0.1, 0.2)
    assert src[(-0.3, 0.4)] == (-0.3, 0.05)
    assert iv.point_name(0.5, 0.1) == "vg0.500_vds0.100"
    # iv.skip leaves pairs of the grid out (and only them; a pair not in the grid changes nothing)
    kept = iv.points({**STUDY, "skip": [[-0.3, 0.05], [0.1, 0.2], [9.0, 9.0]]})
    assert sorted(set(pts) - set(kept)) == [(-0.3, 0.05), (0.1, 0.2)] and len(kept) == len(pts) - 2
    assert iv.point_name(0.5, 0.1, 0.0) == "vg0.500_vgb0.000_vds0.100"


def test_on_fault_of_the_study():
    """iv.on_fault (default record): the points run with output.on_fault=record and their jobs accept exit
    code 3 only; stop: neither; seeds never record.  The setting is in the rule's shell, not in run_sets
    (the params a rerun trigger watches): changing it reruns no finished point."""
    assert iv.fault_set_shell(STUDY) == " --set output.on_fault=record"
    sets = iv.run_sets(STUDY, -0.2, 0.05) + iv.fault_set_shell(STUDY).split()[1::2]
    assert load(None, sets)["output"]["on_fault"] == "record"
    assert iv.fault_ok_shell(STUDY) == " || [ $? -eq 3 ]"
    stop = {**STUDY, "on_fault": "stop"}
    assert iv.run_sets(stop, -0.2, 0.05) == iv.run_sets(STUDY, -0.2, 0.05)  # the params do not change with it
    assert not any("on_fault" in x for x in iv.run_sets(STUDY, -0.2, 0.05))
    assert iv.fault_set_shell(stop) == "" and iv.fault_ok_shell(stop) == ""
    assert not any("on_fault" in x for x in iv.seed_sets({**STUDY, "low_vg_seed_ps": 0.05}, -0.2, 0.05))
    # the rule's shell (Snakemake's bash strict mode): exit code 3 passes, every other non-zero code fails
    import subprocess

    for code, ok in ((0, True), (3, True), (2, False), (1, False), (137, False)):
        sh = f"set -euo pipefail; (exit {code}) > /dev/null 2>&1{iv.fault_ok_shell(STUDY)}"
        assert (subprocess.run(["bash", "-c", sh]).returncode == 0) is ok, code
    assert subprocess.run(["bash", "-c", f"set -euo pipefail; (exit 3) > /dev/null 2>&1{iv.fault_ok_shell(stop)}"]).returncode


def test_run_sets_load():
    cfg = load(None, iv.run_sets({**STUDY, "steady": {**STUDY["steady"], "rtol": 1e-5}}, -0.2, 0.05))
    assert cfg["bias"]["V_G"] == -0.2 and cfg["bias"]["V_DS"] == 0.05
    assert cfg["steady"]["enabled"] and cfg["steady"]["rtol"] == 1e-5 and cfg["time"]["t_end_ps"] == 2.0
    cfg = load(None, iv.run_sets({**STUDY, "bottom_gate_V": 0.0}, 0.4, 0.1))
    assert cfg["bias"]["V_G_top"] == 0.4 and cfg["bias"]["V_G_bottom"] == 0.0


def test_run_sets_pass_hold_windows_only_when_set():
    """iv.steady.hold_windows reaches the runs as steady.hold_windows; absent, it is not passed, so
    the points' overrides (Snakemake's params) and their configuration hashes stay as they were."""
    sets = iv.run_sets(STUDY, 0.3, 0.2)
    assert not any(x.startswith("steady.hold_windows") for x in sets)
    assert "hold_windows" not in load(None, sets)["steady"]
    held = iv.run_sets({**STUDY, "steady": {**STUDY["steady"], "hold_windows": 1}}, 0.3, 0.2)
    assert [x for x in held if x not in sets] == ["steady.hold_windows=1.0"]
    assert load(None, held)["steady"]["hold_windows"] == 1.0
    assert "steady.hold_windows=0.0" in iv.run_sets({**STUDY, "steady": {**STUDY["steady"], "hold_windows": 0}}, 0.3, 0.2)


def test_workflow_schema_hold_windows():
    from pathlib import Path

    from solver.config import ConfigError, load_schema, validate

    schema = load_schema(Path(__file__).parents[1] / "workflow/schemas/config.schema.yaml")["properties"]["iv"]
    study = {**STUDY, "mesh": "6x33x33x150x24"}
    assert "hold_windows" not in validate(study, schema, "iv")["steady"]
    assert validate({**study, "steady": {**STUDY["steady"], "hold_windows": 0.5}}, schema, "iv")["steady"]["hold_windows"] == 0.5
    with pytest.raises(ConfigError, match=r"^iv key 'steady.hold_windows': -1 is less than the minimum of 0") as e:
        validate({**study, "steady": {**STUDY["steady"], "hold_windows": -1}}, schema, "iv")
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------ physics
def _run(*extra, out=None):
    sim = Simulation(load(None, TINY + list(extra)), get_backend("numpy"), out, progress=False)
    return sim, sim.run()


def test_subthreshold_points_get_the_longer_time_limit():
    """steady.t_max_low_vg: the points at V_G <= vg_max run to its t_max_ps, the others to t_max_ps."""
    study = {**STUDY, "steady": {**STUDY["steady"], "t_max_low_vg": {"vg_max": -0.2, "t_max_ps": 2.5}}}
    t_end = {g: load(None, iv.run_sets(study, g, 0.05))["time"]["t_end_ps"] for g in (-0.3, -0.2, 0.0, 0.5)}
    assert t_end == {-0.3: 2.5, -0.2: 2.5, 0.0: 2.0, 0.5: 2.0}
    assert iv.t_max_ps(STUDY, -0.5) == 2.0  # unset: one limit


def test_long_points_take_a_gpu_of_their_own_only_when_asked():
    """iv.long_points_gpu: own gives the points with the longer time limit --gpu own, the others auto;
    shared (the default) or no longer limit: auto everywhere."""
    long = {**STUDY, "steady": {**STUDY["steady"], "t_max_low_vg": {"vg_max": -0.2, "t_max_ps": 2.5}}}
    ex = {**long, "long_points_gpu": "own"}
    assert {g: iv.gpu_mode(ex, g) for g in (-0.3, -0.2, 0.0)} == {-0.3: "own", -0.2: "own", 0.0: "auto"}
    assert {iv.gpu_mode(long, g) for g in (-0.3, 0.0)} == {"auto"}
    assert {iv.gpu_mode({**STUDY, "long_points_gpu": "own"}, g) for g in (-0.3, 0.0)} == {"auto"}


def test_low_vg_set_applies_below_vg_max_to_points_and_seeds():
    """iv.low_vg_set: its overrides reach the runs (points and seeds) at V_G <= vg_max and no others."""
    study = {**STUDY, "low_vg_seed_ps": 0.05, "low_vg_set": {"vg_max": -0.2, "set": ["numerics.contact_rule=hybrid"]}}
    rule = {g: load(None, iv.run_sets(study, g, 0.05))["numerics"]["contact_rule"] for g in (-0.3, -0.2, 0.0, 0.5)}
    assert rule == {-0.3: "hybrid", -0.2: "hybrid", 0.0: "reference", 0.5: "reference"}
    assert load(None, iv.seed_sets(study, -0.2, 0.4))["numerics"]["contact_rule"] == "hybrid"
    assert load(None, iv.seed_sets(study, 0.0, 0.4))["numerics"]["contact_rule"] == "reference"
    assert iv.low_vg_sets(STUDY, -0.5) == []  # unset: none


def test_no_current_without_drain_bias():
    sim, _ = _run("bias.V_DS=0.0", "time.steps=6", "time.t_end_ps=null")
    currents = np.array([r["mean_current_A_per_m"] for r in sim.scalars])
    assert np.max(np.abs(currents)) < 1e-9  # A/m; ~3e3 A/m at V_DS = 0.1 V


@pytest.fixture(scope="module")
def bias_runs(tmp_path_factory):
    """Short runs (0.02 ps) on the tiny mesh, as steady points with a window that never closes."""
    root = tmp_path_factory.mktemp("iv")
    out = {}
    for g, d in [(0.3, 0.1), (0.5, 0.1), (0.7, 0.1), (0.5, 0.05), (0.5, 0.2)]:
        name = iv.point_name(g, d)
        _run(f"bias.V_G={g}", f"bias.V_DS={d}", "time.t_end_ps=0.02", "steady.enabled=true",
             "steady.window_ps=0.01", "steady.rtol=1.0e-9", out=root / name)
        out[(g, d)] = root / name
    return out


def test_current_grows_with_gate_and_drain_voltage(bias_runs):
    Id = {k: iv.read_point(v)["Id_A_per_m"] for k, v in bias_runs.items()}
    assert Id[(0.3, 0.1)] < Id[(0.5, 0.1)] < Id[(0.7, 0.1)]
    assert Id[(0.5, 0.05)] < Id[(0.5, 0.1)] < Id[(0.5, 0.2)]
    assert {iv.read_point(v)["contact_rule"] for v in bias_runs.values()} == {"reference"}  # the points table's column


def test_collect_writes_the_study(bias_runs, tmp_path):
    study = {"vg": [0.3, 0.5, 0.7], "idvg_vds": [0.1], "idvd_vg": [0.5], "vds": [0.05, 0.1, 0.2],
             "vth_current_A_per_m": 10.0, "bottom_gate_V": None}
    r = iv.collect(list(bias_runs.values()), study, tmp_path)
    assert r == {"points": 5, "steady": 0, "faulted": 0, "faulted_points": [], "faults": {}}
    for f in ("points.csv", "curves.csv", "traces.csv", "figures_of_merit.csv", "idvg_log.png", "idvg_linear.png",
              "idvd.png", "traces.png", "iv.provenance.json"):
        assert (tmp_path / f).stat().st_size > 0
    tr = pd.read_csv(tmp_path / "traces.csv")
    assert set(tr["point"]) == {p.name for p in bias_runs.values()}
    curv = pd.read_csv(tmp_path / "curves.csv")
    assert list(curv[curv["curve"] == "idvd_vg0.5"]["V_DS"]) == [0.05, 0.1, 0.2]
    assert json.loads((tmp_path / "iv.provenance.json").read_text())["iv"] == study


def test_figures_of_merit_with_missing_points():
    """A failed point leaves a curve short: the table gives NaN where it cannot read a value."""
    pts = _synthetic_points()
    pts = pts[~np.isclose(pts["V_DS"], 0.4)]  # the whole high-V_DS curve failed
    fom = iv.figures_of_merit(iv.curves(pts, STUDY), STUDY)
    assert fom[fom["quantity"] == "Vth"]["value"].iloc[0] == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(fom[fom["quantity"] == "DIBL"]["value"].iloc[0])
    assert "Ion" not in set(fom["quantity"])


def test_low_gate_points_start_from_the_floor():
    src = iv.sources({**STUDY, "low_vg_from": -0.1, "continuation": True})
    assert src[(-0.3, 0.05)] == (-0.1, 0.05) and src[(-0.2, 0.4)] == (-0.1, 0.4)
    assert src[(-0.1, 0.05)] is None and src[(-0.1, 0.4)] == (-0.1, 0.05)  # the floor itself: a V_DS chain
    src = iv.sources({**STUDY, "low_vg_from": -0.1})
    assert src[(-0.3, 0.4)] == (-0.1, 0.4) and src[(-0.1, 0.4)] is None and src[(0.3, 0.4)] is None


def test_low_gate_points_start_from_young_seeds():
    """iv.low_vg_seed_ps: the points below low_vg_from start from a short fresh run at low_vg_from
    (a seed), not from that point's final state, which carries the growing contact mode (docs/iv.md §8)."""
    study = {**STUDY, "low_vg_from": -0.1, "low_vg_seed_ps": 0.05}
    src = iv.sources(study)
    assert isinstance(src[(-0.3, 0.05)], iv.Seed) and src[(-0.3, 0.05)] == (-0.1, 0.05)
    assert iv.source_name(src[(-0.2, 0.4)]) == "seed_vg-0.100_vds0.400"
    assert src[(-0.1, 0.05)] is None and iv.source_name(None) is None
    assert iv.source_name((-0.1, 0.05)) == "vg-0.100_vds0.050"  # a point source keeps the point's name
    assert iv.seeds(study) == [(-0.1, 0.05), (-0.1, 0.4)]
    assert iv.seeds({**STUDY, "low_vg_from": -0.1}) == []  # without low_vg_seed_ps: from the point, as before
    assert not isinstance(iv.sources({**STUDY, "low_vg_from": -0.1})[(-0.3, 0.05)], iv.Seed)
    cfg = load(None, iv.seed_sets(study, -0.1, 0.4))
    assert cfg["bias"]["V_G"] == -0.1 and cfg["bias"]["V_DS"] == 0.4 and cfg["time"]["t_end_ps"] == 0.05
    assert cfg["continuation"]["save_final_state"] and not cfg["steady"]["enabled"]


def _iv_pack():
    """tools/bsp/iv_pack.py as a module (a tool script, not in the package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("iv_pack", Path(__file__).parents[1] / "tools/bsp/iv_pack.py")
    pk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pk)
    return pk


def test_pack_keeps_the_small_files(tmp_path):
    """tools/bsp/iv_pack.py: tables, figures, run.json and thinned traces (first and last row kept),
    never the states or the per-step timers."""
    import lzma
    import tarfile

    pk = _iv_pack()
    study = tmp_path / "res" / "gpu-x" / "iv"
    for name, n in (("vg0.000_vds0.050", 5001), ("seed_vg-0.200_vds0.050", 30)):
        r = study / "runs" / "m" / "cupy_t1" / name
        r.mkdir(parents=True)
        pd.DataFrame({"step": np.arange(n), "time_s": np.arange(n) * 1e-17, "dt_s": 1e-17, "total_mass_per_m": 1.0,
                      "mean_current_A_per_m": np.arange(n) * 0.5, "newton_iterations": 3}).to_csv(r / "scalars.csv",
                                                                                                  index=False)
        (r / "run.json").write_text("{}")
        (r / "final_state.h5").write_bytes(b"x" * 100)
        (r / "timers.csv").write_text("step,phase,seconds\n")
    (study / "figures_of_merit.csv").write_text("quantity,value\n")
    (study / "traces.csv").write_text("big\n")
    (study / "idvd.png").write_bytes(b"png")
    files = pk.pack(study, tmp_path / "out", "0")
    assert [f.name for f in files] == ["iv_small_0.tgz", "iv_scalars_0_0.tar"]
    with tarfile.open(files[0]) as tar:
        names = set(tar.getnames())
        tr = pd.read_csv(tar.extractfile("gpu-x/iv/traces_packed.csv"))
    assert "gpu-x/iv/figures_of_merit.csv" in names and "gpu-x/iv/idvd.png" in names
    assert "gpu-x/iv/runs/m/cupy_t1/vg0.000_vds0.050/run.json" in names
    assert not any(n.endswith((".h5", "timers.csv", "/traces.csv")) for n in names)
    big = tr[tr["run"] == "vg0.000_vds0.050"]
    assert len(big) <= pk.MAX_ROWS + 1 and big["step"].iloc[0] == 0 and big["step"].iloc[-1] == 5000
    assert big["current_A_per_m"].iloc[-1] == 2500.0 and len(tr[tr["run"] == "seed_vg-0.200_vds0.050"]) == 30
    with tarfile.open(files[1]) as tar:
        assert sorted(tar.getnames()) == [f"gpu-x/iv/runs/m/cupy_t1/{r}/scalars.csv.xz"
                                          for r in ("seed_vg-0.200_vds0.050", "vg0.000_vds0.050")]
        got = lzma.decompress(tar.extractfile("gpu-x/iv/runs/m/cupy_t1/vg0.000_vds0.050/scalars.csv.xz").read())
    assert got == (study / "runs/m/cupy_t1/vg0.000_vds0.050/scalars.csv").read_bytes()


def test_pack_splits_the_full_traces_under_the_limit(tmp_path, monkeypatch, capsys):
    """iv_pack's full traces: each run's scalars.csv compressed alone, laid largest first into at most MAX_PARTS tars
    under LIMIT bytes (first fit decreasing); a run that fits none is named and left out."""
    import tarfile

    pk = _iv_pack()
    base = tmp_path / "res"
    rng = np.random.default_rng(1)
    sizes = {"a": 60_000, "b": 45_000, "c": 30_000, "d": 20_000, "e": 200_000}  # random bytes: xz cannot shrink them
    paths = []
    for name, n in sizes.items():
        f = base / "m" / "iv" / "runs" / name / "scalars.csv"
        f.parent.mkdir(parents=True)
        f.write_bytes(rng.bytes(n))
        paths.append(f)
    monkeypatch.setattr(pk, "LIMIT", 100_000)
    monkeypatch.setattr(pk, "MAX_PARTS", 2)
    (tmp_path / "out").mkdir()
    files = pk._pack_scalars(paths, base, tmp_path / "out", "_7")
    assert [f.name for f in files] == ["iv_scalars_7_0.tar", "iv_scalars_7_1.tar"]
    members = []
    for f in files:
        assert f.stat().st_size <= 100_000
        with tarfile.open(f) as tar:
            members.append(sorted(n.split("/")[3] for n in tar.getnames()))
    # first fit, largest first (each member ~2 kB more than its bytes, 10 kB for the tar's end): a; b (a new part);
    # c (~32 kB: not beside a under 100 kB, beside b); d (~22 kB, beside a); e alone over the limit
    assert members == [["a", "d"], ["b", "c"]]
    assert "m/iv/runs/e/scalars.csv.xz" in capsys.readouterr().out  # over the limit alone


def test_refresh_adds_another_study_s_points(bias_runs, tmp_path, monkeypatch):
    """tools/bsp/iv_refresh.py --out --add: the tables of one study's points and another's, each point's trace from
    its own study's traces_packed.csv (the other study's trace of a point it has too is left out); the studies
    themselves untouched; a point in both is refused."""
    import importlib.util
    import shutil
    from pathlib import Path

    from solver import io

    spec = importlib.util.spec_from_file_location("iv_refresh", Path(__file__).parents[1] / "tools/bsp/iv_refresh.py")
    rf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rf)
    saved = {}
    save = io.save_figure
    monkeypatch.setattr(io, "save_figure", lambda fig, path, **kw: saved.update({Path(path).name: fig}) or save(fig, path, **kw))
    a, b = tmp_path / "a", tmp_path / "b"
    names = {k: v.name for k, v in bias_runs.items()}
    for study, keys in ((a, [(0.3, 0.1), (0.5, 0.1), (0.7, 0.1)]), (b, [(0.5, 0.05), (0.5, 0.2), (0.5, 0.1)])):
        rows = []
        for k in keys:
            shutil.copytree(bias_runs[k], study / "runs" / "m" / "cupy_t1" / names[k])
            rows += [{"run": names[k], "step": s, "time_ps": 1e-3 * s, "current_A_per_m": (100.0 if study == a else -1.0)}
                     for s in range(3)]
        pd.DataFrame(rows).to_csv(study / "traces_packed.csv", index=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"iv": {"vg": [0.3, 0.5, 0.7], "idvg_vds": [0.1], "idvd_vg": [0.5], "vds": [0.05, 0.1, 0.2],
                                      "vth_current_A_per_m": 10.0, "bottom_gate_V": None}}))
    add = [str(b / "runs" / "m" / "cupy_t1" / names[k]) for k in [(0.5, 0.05), (0.5, 0.2)]]
    assert rf.main(str(a), str(cfg), str(tmp_path / "both"), add) == 0
    pts = pd.read_csv(tmp_path / "both" / "points.csv")
    assert sorted(pts["point"]) == sorted(names.values())
    assert len(json.loads((tmp_path / "both" / "refresh.json").read_text())["runs"]) == 5
    ax = saved["traces.png"].axes
    assert len([x for x in ax if x.get_title()]) >= 5
    lines = {x.get_title().split()[0]: x.lines[0].get_ydata() for x in ax if x.get_title() and x.lines}
    assert set(lines[names[(0.5, 0.1)]]) == {100.0}  # its own study's trace, not b's of the same point
    assert set(lines[names[(0.5, 0.2)]]) == {-1.0}
    assert not (a / "points.csv").exists() and not (b / "points.csv").exists()
    assert rf.main(str(a), str(cfg), str(tmp_path / "x"), [str(b / "runs" / "m" / "cupy_t1" / names[(0.5, 0.1)])]) == 2
    assert rf.main(str(a), str(cfg), str(tmp_path / "x"), add + add[:1]) == 2  # one point twice
    assert rf.main(str(a), str(cfg), str(tmp_path / "x"), [add[0] + "/run.json"]) == 2  # not a point folder
    assert rf.main(str(a), str(cfg), None, add) == 2  # --add without --out
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------------------ faulted points
def test_figures_of_merit_leave_faulted_points_out():
    """A faulted point (status fault, NaN Id) is left out of its curves' figures of merit, which stay
    finite, and the rows read from such a curve name it; the other curves' rows are unchanged."""
    pts = _synthetic_points()
    pts["status"] = "steady"
    ref = iv.figures_of_merit(iv.curves(pts, STUDY), STUDY)
    bad = np.isclose(pts["V_G_top"], -0.3) & np.isclose(pts["V_DS"], 0.4)
    pts.loc[bad, ["Id_A_per_m", "status"]] = [math.nan, "fault"]
    curv = iv.curves(pts, STUDY)
    row = curv[(curv["curve"] == "idvg_vds0.4") & np.isclose(curv["V_G"], -0.3)]
    assert len(row) == 1 and row["status"].iloc[0] == "fault" and math.isnan(row["Id_A_per_m"].iloc[0])
    fom = iv.figures_of_merit(curv, STUDY)
    assert list(fom["quantity"]) == list(ref["quantity"])
    assert np.isfinite(fom["value"].to_numpy(float)).all()
    q = lambda name, i=0: fom[fom["quantity"] == name].iloc[i]  # noqa: E731
    note = "faulted points left out: V_G = -0.3 V"
    assert q("Ioff")["condition"].startswith("V_G = -0.2 V, V_DS = 0.4 V") and note in q("Ioff")["condition"]
    assert q("Ioff")["value"] == pytest.approx(10.0 * 10 ** ((-0.2 + 0.035) / 0.08))  # the lowest V_G left
    for name, i in (("Vth", 1), ("SS", 1), ("gm_max", 1), ("Ion", 0), ("Ion/Ioff", 0), ("DIBL", 0)):
        assert note in q(name, i)["condition"], name
    assert q("DIBL")["condition"].endswith(f"{note} (the V_DS = 0.4 V curve)")  # which curve lost it
    assert q("Vth", 1)["value"] == pytest.approx(-0.035, abs=1e-12)
    assert q("SS", 1)["value"] == pytest.approx(80.0, rel=1e-12)
    for name, i in (("Vth", 0), ("SS", 0), ("Vth_lin", 0), ("gd", 0), ("gd", 1)):  # curves without the point
        assert "faulted" not in q(name, i)["condition"]
        assert q(name, i)["value"] == ref[ref["quantity"] == name]["value"].iloc[i]


@pytest.fixture(scope="module")
def faulted_run(tmp_path_factory):
    """A real point run at V_G = 0.1 V, V_DS = 0.1 V with output.on_fault = record that faults (a negative
    density at step 2)."""
    from solver.bsp import simulation
    from solver.config import RunFault

    out = tmp_path_factory.mktemp("ivf") / iv.point_name(0.1, 0.1)
    mp = pytest.MonkeyPatch()
    mp.setattr(simulation.dens, "dens", nth_call(simulation.dens, "dens", 6, negative_rho))
    try:
        with pytest.raises(RunFault, match="negative density"):
            _run("bias.V_G=0.1", "bias.V_DS=0.1", "time.t_end_ps=0.02", "steady.enabled=true", "steady.window_ps=0.01",
                 "steady.rtol=1.0e-9", "output.on_fault=record", "continuation.save_final_state=true", out=out)
    finally:
        mp.undo()
    return out


def test_read_point_of_a_faulted_run(faulted_run):
    p = iv.read_point(faulted_run)
    assert p["status"] == "fault" and "negative density" in p["fault"] and math.isnan(p["Id_A_per_m"])
    assert not p["steady"] and p["t_end_ps"] == pytest.approx(
        pd.read_csv(faulted_run / "scalars.csv")["time_s"].iloc[-1] * 1e12, rel=1e-12)


def test_collect_marks_a_faulted_point(bias_runs, faulted_run, tmp_path, monkeypatch, capsys):
    """The faulted point is a row (status fault, NaN Id) of the tables, the figures of merit come from the
    others and name it, the figures mark it, and the CLI's summary and stderr name it."""
    from solver import io
    from solver.cli import main

    study = {"vg": [0.1, 0.3, 0.5, 0.7], "idvg_vds": [0.1], "idvd_vg": [0.5], "vds": [0.05, 0.1, 0.2],
             "vth_current_A_per_m": 10.0, "bottom_gate_V": None}
    runs = list(bias_runs.values()) + [faulted_run]
    saved = {}
    save = io.save_figure
    monkeypatch.setattr(io, "save_figure", lambda fig, path, **kw: saved.update({path.name: fig}) or save(fig, path, **kw))
    r = iv.collect(runs, study, tmp_path)
    assert r["points"] == 6 and r["faulted"] == 1 and r["faulted_points"] == ["vg0.100_vds0.100"]
    pts = pd.read_csv(tmp_path / "points.csv", keep_default_na=False, na_values=[""])
    f = pts[pts["point"] == "vg0.100_vds0.100"].iloc[0]
    assert f["status"] == "fault" and "negative density" in f["fault"] and math.isnan(f["Id_A_per_m"])
    assert set(pts[pts["point"] != "vg0.100_vds0.100"]["status"]) == {"t_max"}
    curv = pd.read_csv(tmp_path / "curves.csv")
    assert curv[curv["point"] == "vg0.100_vds0.100"]["status"].tolist() == ["fault"]
    fom = pd.read_csv(tmp_path / "figures_of_merit.csv").set_index("quantity")
    for q in ("gm_max", "Ion", "Ioff", "Ion/Ioff", "gd", "Vth_lin"):
        assert np.isfinite(fom.loc[q, "value"]), q
    assert fom.loc["Ioff", "condition"].startswith("V_G = 0.3 V")  # the lowest V_G left
    assert "faulted points left out: V_G = 0.1 V" in fom.loc["Ioff", "condition"]
    assert "faulted" not in fom.loc["gd", "condition"]  # the Id-Vd curve at 0.5 V lost nothing
    for name in ("idvg_log.png", "idvg_linear.png", "idvd.png", "traces.png"):
        assert (tmp_path / name).stat().st_size > 0
    ax = saved["idvg_log.png"].axes[0]
    marks = [ln for ln in ax.lines if ln.get_label() == "fault (no Id)"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [0.1] and marks[0].get_color() == "red"
    assert marks[0].get_marker() == "v"  # not the x of the points stopped at their time limit
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"fault (no Id)", "steady", "not steady (time limit)"} <= set(legend)
    assert all(0.1 not in ln.get_xdata() for ln in ax.lines if ln.get_label() != "fault (no Id)")  # curves skip it
    assert [a.get_title() for a in saved["traces.png"].axes if "(FAULT)" in a.get_title()] == ["vg0.100_vds0.100 (FAULT)"]
    capsys.readouterr()
    assert main(["bsp", "iv", "collect", *map(str, runs), "--study", json.dumps(study), "--out", str(tmp_path / "c")]) == 0
    cap = capsys.readouterr()
    assert "iv: 6 points (0 at steady state, 1 faulted: vg0.100_vds0.100);" in cap.out
    assert "warning: iv point vg0.100_vds0.100 ended on a numerical fault" in cap.err and "negative density" in cap.err


def test_read_point_status_fault_without_its_record(faulted_run, tmp_path):
    """summary.status fault is what marks the point, even where summary.fault is missing: never an Id."""
    d = tmp_path / faulted_run.name
    d.mkdir()
    rec = json.loads((faulted_run / "run.json").read_text())
    del rec["summary"]["fault"]
    (d / "run.json").write_text(json.dumps(rec))
    p = iv.read_point(d)
    assert p["status"] == "fault" and math.isnan(p["Id_A_per_m"]) and p["fault"] == "(no fault record)"


def test_point_sets_are_the_rule_s_overrides():
    """iv.point_sets (rule iv_point and the device scripts that run a point outside Snakemake): run_sets, then the
    mesh of iv.mesh in N_sbn, NX, NZ, NW, NPHI order, then iv.set."""
    c = {**STUDY, "mesh": "6x65x65x300x48", "set": ["numerics.bte_graph=true"]}
    s = iv.point_sets(c, -0.3, 0.4)
    assert s == iv.run_sets(c, -0.3, 0.4) + ["mesh.N_sbn=6", "mesh.NX=65", "mesh.NZ=65", "mesh.NW=300", "mesh.NPHI=48",
                                              "numerics.bte_graph=true"]
    assert iv.mesh_sets({"mesh": "3x9x9x12x8"}) == ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=9", "mesh.NW=12", "mesh.NPHI=8"]


def test_start_priority_orders_by_time_limit_then_vds_then_lower_vg():
    """solver.bsp.iv.start_priority (rule iv_point's Snakemake priority): lexicographic in (t_max down, |V_DS| down,
    V_G up) at the edges its docstring names: 0.001 ps, 0.001 V of V_DS up to 999 V, V_G 0.01 V apart within ±5 V."""
    c = {"steady": {"t_max_ps": 1.5, "t_max_low_vg": {"vg_max": -0.2, "t_max_ps": 1.501}}}
    p = iv.start_priority
    assert p(c, -0.21, 0.0) > p(c, 4.99, 999.0)          # the longer time limit first, whatever V_DS
    one = {"steady": {"t_max_ps": 1.5}}
    assert p(one, 4.99, 0.051) > p(one, -4.99, 0.050)      # then the larger V_DS, whatever V_G
    assert p(c, 0.0, -0.4) == p(c, 0.0, 0.4)               # |V_DS|
    assert p(c, -0.19, 0.4) > p(c, -0.18, 0.4) > p(c, 4.99, 0.4)  # then the lower V_G
    pts = [(g, d) for g in (-0.3, 0.0, 0.6) for d in (0.05, 0.4)]
    assert len({p(c, g, d) for g, d in pts}) == len(pts)  # no ties
