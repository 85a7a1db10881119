"""Steady state and bias continuation (solver.bsp.steady, Simulation; docs/iv.md): the monitor's
two tests on series with known answers, the stop of a real run, the continuation from a converged
state stopping after one window, the bias ramp, and that monitoring does not touch the numerics."""
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from solver.backend import get_backend
from solver.bsp import steady
from solver.bsp.constants import Q
from solver.bsp.model import Model, load
from solver.bsp.simulation import FINAL_STATE, Simulation
from solver.config import ConfigError

TINY = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=9", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
        "numerics.backend=numpy", "output.checkpoint_every_steps=0"]


def cfg_of(*extra):
    return load(None, TINY + list(extra))


def sim_of(cfg, out=None):
    return Simulation(cfg, get_backend("numpy"), out, progress=False)


# ------------------------------------------------------------------------------ the monitor
def _feed(model, window_ps, rtol, ctol, current, dNs_dt, t_ps):
    """Monitor fed with <j>(t) = current(t) and N_s(x, t) = 1e16 + dNs_dt(x) t; returns it and the
    first time it reports steady state (None if never)."""
    mon = steady.Monitor(model, {"window_ps": window_ps, "rtol": rtol, "conservation_tol": ctol,
                                 "current_floor_A_per_m": 1e-3})
    NX, P = model.NX, model.N_sbn
    hit = None
    for k, tp in enumerate(t_ps):
        Ns = 1e16 + dNs_dt * tp * 1e-12
        rho = np.zeros((NX, 3, P))
        rho[:, 0, 0] = Ns / (2 * model.scales.rho)
        if mon.update(k, tp * 1e-12, current(tp), {"rho_x": rho.sum(axis=(1, 2))}) and hit is None:
            hit = tp
    return mon, hit


def test_monitor_known_drift_and_charging():
    model = Model(cfg_of())
    t = np.arange(0, 0.3001, 0.001)
    W = 0.1
    # a linear drift a (1/ps): the means over the window's thirds differ by a W/3 j0; no charging
    mon, hit = _feed(model, W, 1e-3, 1e-2, lambda tp: 100 * (1 + 0.01 * tp), np.zeros(model.NX), t)
    assert hit == pytest.approx(W, abs=1.5e-3)  # the first complete window
    r = mon.last  # of the last check (every W/30 of time)
    assert 0.3 - W / 30 <= r["t_ps"] <= 0.3
    assert r["drift"] == pytest.approx(0.01 * W / 3 / (1 + 0.01 * (r["t_ps"] - W / 2)), rel=1e-9)
    assert r["charging"] == pytest.approx(0.0, abs=1e-15)
    mon, hit = _feed(model, W, 1e-3, 1e-2, lambda tp: 100 * (1 + 0.05 * tp), np.zeros(model.NX), t)
    assert hit is None and mon.last["drift"] > 1e-3
    # uniform charging at c (m^-2 s^-1): the charge in [0, L] grows by q c L per second, so the
    # test reads q c L / j
    L = model.scales.Lx
    c = 0.02 * 100 / (Q * L)
    mon, hit = _feed(model, W, 1e-3, 1e-2, lambda tp: 100.0, np.full(model.NX, c), t)
    assert hit is None and mon.last["charging"] == pytest.approx(0.02, rel=1e-9)
    mon, hit = _feed(model, W, 1e-3, 3e-2, lambda tp: 100.0, np.full(model.NX, c), t)
    assert hit == pytest.approx(W, abs=1.5e-3)


def test_time_mean_piecewise_linear():
    t = np.array([0.0, 1.0, 3.0])
    y = np.array([0.0, 2.0, 2.0])
    assert steady._time_mean(t, y, 0.0, 3.0) == pytest.approx((1.0 + 4.0) / 3.0)
    assert steady._time_mean(t, y, 0.5, 1.5) == pytest.approx((0.5 * (1 + 2) / 2 + 0.5 * 2) / 1.0)


def test_junction_nodes():
    m = Model(cfg_of("mesh.NX=33"))
    # x = 5 and 15 nm are the nodes 8 and 24 (high-doped); the steps lie between 8 and 9, 23 and 24
    assert steady.junction_nodes(m) == [7, 8, 9, 10, 22, 23, 24, 25]


# ------------------------------------------------------------------------------ runs
def test_monitoring_leaves_the_numerics_alone():
    base = ["time.steps=4", "time.t_end_ps=null"]
    a = sim_of(cfg_of(*base))
    a.run()
    b = sim_of(cfg_of(*base, "steady.enabled=true", "steady.window_ps=10.0"))
    rec = b.run()
    assert pd.DataFrame(a.scalars).equals(pd.DataFrame(b.scalars))
    s = rec["summary"]["steady"]
    assert s["enabled"] and not s["reached"] and s["t_reached_ps"] is None


# textbook scattering rates (kernel_scale 2 pi) relax the tiny device within ~0.3 ps
STEADY = ["physics.kernel_scale=6.283185307179586", "steady.enabled=true", "steady.window_ps=0.04",
          "steady.rtol=0.003", "steady.conservation_tol=0.05", "time.t_end_ps=0.45",
          "continuation.save_final_state=true"]


@pytest.fixture(scope="module")
def converged(tmp_path_factory):
    out = tmp_path_factory.mktemp("steady") / "a"
    sim = sim_of(cfg_of(*STEADY), out)
    sim.series = []  # what the monitor saw, for replays
    update = sim.monitor.update

    def recording(step, t_s, current, host):
        sim.series.append((step, t_s, current, {"rho_x": host["rho_x"].copy()}))
        return update(step, t_s, current, host)

    sim.monitor.update = recording
    rec = sim.run()
    return out, rec, sim


def test_steady_stop(converged):
    out, rec, _ = converged
    s = rec["summary"]["steady"]
    assert s["reached"]
    assert s["drift"] < 0.003 and s["charging"] < 0.05
    assert s["t_reached_ps"] == pytest.approx(rec["summary"]["t_end_s"] * 1e12)
    assert s["t_reached_ps"] < 0.5  # stopped before the time limit
    assert s["window_ps"] >= 0.04
    assert set(s["final_spreads"]) == {"nodal_all", "nodal_away_from_junctions", "contacts", "face"}
    assert json.loads((out / "run.json").read_text())["summary"]["steady"]["reached"]
    assert (out / FINAL_STATE).exists() and not (out / "checkpoint.h5").exists()


def test_current_converges_as_the_tolerance_tightens(converged):
    """The run of a looser rtol is a prefix of the tight run (monitoring leaves the numerics
    alone), so replaying the monitor on the tight run's series gives each looser run's Id."""
    _, rec, sim = converged
    Id = {}
    for rtol in (0.1, 0.03, 0.01, 0.003):
        mon = steady.Monitor(sim.model, {**sim.cfg["steady"], "rtol": rtol})
        for args in sim.series:
            if mon.update(*args):
                break
        Id[rtol] = mon.last["current_A_per_m"]
    assert Id[0.003] == pytest.approx(rec["summary"]["steady"]["current_A_per_m"], rel=1e-12)
    err = [abs(Id[r] / Id[0.003] - 1) for r in (0.1, 0.03, 0.01)]
    assert err[0] > err[1] > err[2] > 0


def test_continuation_from_converged_state_stops_after_one_window(converged, tmp_path):
    src, rec0, _ = converged
    rec = sim_of(cfg_of(*STEADY, f"continuation.init_from={src}"), tmp_path / "b").run()
    s = rec["summary"]["steady"]
    assert s["reached"]
    assert s["t_reached_ps"] < 1.5 * 0.04  # the earliest possible stop is one window
    assert rec["summary"]["steps"] < rec0["summary"]["steps"]
    c = rec["summary"]["continuation"]
    assert c["init_from"] == str(src) and c["source_bias_V"] == [0.5, 0.5, 0.1]
    assert c["source_steps"] == rec0["summary"]["steps"]
    assert abs(s["current_A_per_m"] / rec0["summary"]["steady"]["current_A_per_m"] - 1) < 0.03


def test_continuation_errors(converged, tmp_path):
    src, _, _ = converged
    with pytest.raises(ConfigError, match="final_state.h5"):
        sim_of(cfg_of(*STEADY, f"continuation.init_from={tmp_path}"), tmp_path / "x").run()
    with pytest.raises(ConfigError, match="shape"):
        sim_of(cfg_of(*STEADY, "mesh.NW=16", f"continuation.init_from={src}"), tmp_path / "y").run()
    # Phi's shape does not hold NZ: V's does (the first ITER would fail to broadcast)
    with pytest.raises(ConfigError, match=r"holds V of shape \(9, 9\), this mesh needs \(9, 11\)$"):
        sim_of(cfg_of(*STEADY, "mesh.NZ=11", f"continuation.init_from={src}"), tmp_path / "z").run()
    with pytest.raises(ConfigError, match=r"another device \(device.t_ox_nm = 1.0 there, 1.2 here\)$"):
        sim_of(cfg_of(*STEADY, "device.t_ox_nm=1.2", f"continuation.init_from={src}"), tmp_path / "w").run()


def test_no_stop_during_the_ramp(converged, tmp_path):
    """From the converged state at the same bias the run stops one window after its start
    (test above); with a ramp longer than the window, not before the ramp's end + one window."""
    src, _, _ = converged
    rec = sim_of(cfg_of(*STEADY, "continuation.ramp_ps=0.05", f"continuation.init_from={src}"), tmp_path).run()
    s = rec["summary"]["steady"]
    assert s["reached"] and 0.09 * (1 - 1e-9) <= s["t_reached_ps"] < 0.09 + 0.04


def test_steady_continued_run_resumes_to_the_uninterrupted_result(converged, tmp_path, dies_after):
    """A continued steady run killed after its checkpoint at step 40 (of 54) and resumed stops at
    the uninterrupted run's step with its scalars and run.json record, byte for byte: the monitor's
    window and the continuation source (read at step 0; here removed before the resume) are in
    the checkpoint."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(converged[0] / FINAL_STATE, src / FINAL_STATE)
    cfg = cfg_of(*STEADY, f"continuation.init_from={src}", "output.checkpoint_every_steps=20")
    a, b = tmp_path / "a", tmp_path / "b"
    ra = sim_of(cfg, a).run()
    assert ra["summary"]["steady"]["reached"] and ra["summary"]["steps"] == 54
    with pytest.raises(dies_after.Interrupted):
        dies_after(cfg, get_backend("numpy"), b, progress=False, n=41).run()
    (src / FINAL_STATE).unlink()
    rb = sim_of(cfg, b).run(resume=True)
    assert (a / "scalars.csv").read_bytes() == (b / "scalars.csv").read_bytes()
    assert (a / "profiles.csv").read_bytes() == (b / "profiles.csv").read_bytes()
    for k in ("steps", "steady", "continuation"):
        assert ra["summary"][k] == rb["summary"][k], k


def test_bias_ramp(converged):
    src, _, _ = converged
    sim = sim_of(cfg_of(*STEADY, "bias.V_DS=0.3", "bias.V_G=0.4", "continuation.ramp_ps=0.02",
                        f"continuation.init_from={src}"))
    sim.source = sim._source(src)
    s = sim.model.scales
    sim._ramp_bias(0.01e-12 / s.t)  # half way: V_DS 0.1 -> 0.3, V_G 0.5 -> 0.4
    assert sim.model.V_DS * s.V == pytest.approx(0.2)
    assert [v * s.V for v in sim.model.V_G] == pytest.approx([0.45, 0.45])
    sim._ramp_bias(0.03e-12 / s.t)
    assert sim.model.cfg is sim.cfg and sim.model.V_DS * s.V == pytest.approx(0.3)
