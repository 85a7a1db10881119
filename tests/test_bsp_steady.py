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
def _feed(model, window_ps, rtol, ctol, current, dNs_dt, t_ps, hold=None, mon=None, k0=0, stop=False):
    """Monitor fed with <j>(t) = current(t) and N_s(x, t) = 1e16 + dNs_dt(x) t (rows k0, k0 + 1, ...
    at t_ps; ``hold``: steady.hold_windows, None = absent; ``mon``: go on with this one; ``stop``: no
    row after the stop, as in a run); returns it and the first time it reports steady state (None if
    never)."""
    if mon is None:
        mon = steady.Monitor(model, _steady_cfg(window_ps, rtol, ctol, hold))
    NX, P = model.NX, model.N_sbn
    hit = None
    for k, tp in enumerate(t_ps, start=k0):
        Ns = 1e16 + dNs_dt * tp * 1e-12
        rho = np.zeros((NX, 3, P))
        rho[:, 0, 0] = Ns / (2 * model.scales.rho)
        if mon.update(k, tp * 1e-12, current(tp), {"rho_x": rho.sum(axis=(1, 2))}) and hit is None:
            hit = tp
            if stop:
                break
    return mon, hit


def _steady_cfg(window_ps, rtol, ctol, hold=None):
    return {"window_ps": window_ps, "rtol": rtol, "conservation_tol": ctol, "current_floor_A_per_m": 1e-3,
            **({} if hold is None else {"hold_windows": hold})}


@pytest.mark.parametrize("hold", [None, 0, 0.0])  # hold_windows absent or 0: the same stops
def test_monitor_known_drift_and_charging(hold):
    model = Model(cfg_of())
    t = np.arange(0, 0.3001, 0.001)
    W = 0.1
    # a linear drift a (1/ps): the means over the window's thirds differ by a W/3 j0; no charging
    mon, hit = _feed(model, W, 1e-3, 1e-2, lambda tp: 100 * (1 + 0.01 * tp), np.zeros(model.NX), t, hold)
    assert hit == pytest.approx(W, abs=1.5e-3)  # the first complete window
    assert mon.record()["t_first_pass_ps"] == pytest.approx(hit)
    r = mon.last  # of the last check (every W/30 of time)
    assert 0.3 - W / 30 <= r["t_ps"] <= 0.3
    assert r["drift"] == pytest.approx(0.01 * W / 3 / (1 + 0.01 * (r["t_ps"] - W / 2)), rel=1e-9)
    assert r["charging"] == pytest.approx(0.0, abs=1e-15)
    mon, hit = _feed(model, W, 1e-3, 1e-2, lambda tp: 100 * (1 + 0.05 * tp), np.zeros(model.NX), t, hold)
    assert hit is None and mon.last["drift"] > 1e-3
    # uniform charging at c (m^-2 s^-1): the charge in [0, L] grows by q c L per second, so the
    # test reads q c L / j
    L = model.scales.Lx
    c = 0.02 * 100 / (Q * L)
    mon, hit = _feed(model, W, 1e-3, 1e-2, lambda tp: 100.0, np.full(model.NX, c), t, hold)
    assert hit is None and mon.last["charging"] == pytest.approx(0.02, rel=1e-9)
    mon, hit = _feed(model, W, 1e-3, 3e-2, lambda tp: 100.0, np.full(model.NX, c), t, hold)
    assert hit == pytest.approx(W, abs=1.5e-3)
    assert mon.record()["hold_windows"] == 0.0


# ------------------------------------------------------------------------------ hold_windows
W_HOLD = 0.1  # ps; rows every 0.001 ps, so the checks (every W/30) fall every 4 rows, 25 to a window


def _plateau(tp):
    """A start-up level, a plateau that passes the drift test for a while, then a drift of 5 %/ps
    (a W/3 = 1.7e-3 step between thirds: fails rtol 1e-3 for good)."""
    return 200.0 if tp < 0.05 else 100.0 if tp < 0.2 else 100.0 * (1 + 0.05 * (tp - 0.2))


def _bump(tp):
    """The plateau, a bump of 10 % for 0.02 ps at 0.2 ps, then the plateau's level for good."""
    return 200.0 if tp < 0.05 else 110.0 if 0.2 <= tp < 0.22 else 100.0


def test_hold_keeps_a_plateau_from_stopping_the_run():
    model = Model(cfg_of())
    t = np.arange(0, 0.6001, 0.001)
    zero = np.zeros(model.NX)
    mon0, hit0 = _feed(model, W_HOLD, 1e-3, 1e-2, _plateau, zero, t, stop=True)
    assert 0.15 <= hit0 < 0.2  # today's criterion stops on the plateau
    mon, hit = _feed(model, W_HOLD, 1e-3, 1e-2, _plateau, zero, t, stop=True, hold=1)
    assert hit is None and not mon.reached  # the plateau passed for less than a window
    r = mon.record()
    assert r["hold_windows"] == 1.0 and r["t_first_pass_ps"] == pytest.approx(hit0)
    assert r["t_passing_since_ps"] is None and r["t_reached_ps"] is None  # the last check failed
    mon, hit = _feed(model, W_HOLD, 1e-3, 1e-2, _plateau, zero, t, stop=True, hold=0.3)
    assert hit == pytest.approx(hit0 + 0.3 * W_HOLD, abs=4e-3)  # a shorter hold: the plateau is long enough


def test_hold_one_window_stops_one_window_later():
    model = Model(cfg_of())
    t = np.arange(0, 0.6001, 0.001)
    zero = np.zeros(model.NX)
    settle = lambda tp: 100.0 * (1 + 0.5 * np.exp(-tp / 0.03))  # noqa: E731
    mon0, hit0 = _feed(model, W_HOLD, 1e-3, 1e-2, settle, zero, t, stop=True)
    mon1, hit1 = _feed(model, W_HOLD, 1e-3, 1e-2, settle, zero, t, stop=True, hold=1)
    assert hit0 > W_HOLD and hit1 == pytest.approx(hit0 + W_HOLD, abs=1e-9)
    assert mon1.step_reached == mon0.step_reached + 100
    r = mon1.record()
    assert r["t_first_pass_ps"] == r["t_passing_since_ps"] == pytest.approx(hit0)
    assert r["t_reached_ps"] == pytest.approx(hit1) and r["drift"] < 1e-3


def test_a_failed_check_restarts_the_hold():
    model = Model(cfg_of())
    t = np.arange(0, 0.8001, 0.001)
    zero = np.zeros(model.NX)
    _, hit0 = _feed(model, W_HOLD, 1e-3, 1e-2, _bump, zero, t, stop=True)
    assert 0.15 <= hit0 < 0.2  # on the plateau before the bump
    mon, hit = _feed(model, W_HOLD, 1e-3, 1e-2, _bump, zero, t, stop=True, hold=1)
    r = mon.record()
    assert r["t_first_pass_ps"] == pytest.approx(hit0)
    # the bump fails the checks while it is in the window; the count starts again after it
    assert r["t_passing_since_ps"] > 0.22 + W_HOLD - 0.01
    assert hit == pytest.approx(r["t_passing_since_ps"] + W_HOLD, abs=1e-9)


def test_hold_state_survives_a_checkpoint(tmp_path):
    """save / load mid-hold (tests passing, not yet a window long) resumes to the stop step of the
    uninterrupted monitor, with its record; a group written before hold_windows (no passing_since_s,
    first_pass_s) loads, as a state before any passing check."""
    import h5py

    model = Model(cfg_of())
    t = np.arange(0, 0.6001, 0.001)
    zero = np.zeros(model.NX)
    settle = lambda tp: 100.0 * (1 + 0.5 * np.exp(-tp / 0.03))  # noqa: E731
    for hold, cut, old in ((1, 0.3, False), (0.5, 0.27, False), (0, 0.15, True), (1, 0.15, True)):
        ref, hit = _feed(model, W_HOLD, 1e-3, 1e-2, settle, zero, t, stop=True, hold=hold)
        n = int(round(cut / 0.001))
        a, _ = _feed(model, W_HOLD, 1e-3, 1e-2, settle, zero, t[:n], hold=hold, stop=True)
        assert not a.reached and (a.passing_since_s is not None) == (not old)  # mid-hold, or before any pass
        with h5py.File(tmp_path / f"c{hold}{old}.h5", "w") as f:
            a.save(f.create_group("steady"))
            if old:
                for k in ("passing_since_s", "first_pass_s"):
                    del f["steady"].attrs[k]
        b = steady.Monitor(model, _steady_cfg(W_HOLD, 1e-3, 1e-2, hold))
        with h5py.File(tmp_path / f"c{hold}{old}.h5", "r") as f:
            b.load(f["steady"])
        assert b.passing_since_s == a.passing_since_s and b.first_pass_s == a.first_pass_s
        b, hit_b = _feed(model, W_HOLD, 1e-3, 1e-2, settle, zero, t[n:], mon=b, k0=n, stop=True)
        assert (hit_b, b.step_reached) == (hit, ref.step_reached) and b.record() == ref.record(), (hold, old)


def test_hold_windows_schema():
    assert "hold_windows" not in cfg_of()["steady"]  # no default: configurations keep their hash
    assert cfg_of("steady.hold_windows=1.5")["steady"]["hold_windows"] == 1.5
    with pytest.raises(ConfigError) as e:
        cfg_of("steady.hold_windows=-1")
    assert str(e.value).startswith("config key 'steady.hold_windows': -1 is less than the minimum of 0")
    assert "\n" not in str(e.value)


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


def test_hold_on_a_real_run(converged):
    """The converged run's series replayed: hold_windows 0 stops at the run's step; 1 no earlier
    than one window after that, at a check that ends a window of passing checks."""
    _, rec, sim = converged
    s = rec["summary"]["steady"]
    mons = {}
    for hold in (0, 1):
        mon = mons[hold] = steady.Monitor(sim.model, {**sim.cfg["steady"], "hold_windows": hold})
        for args in sim.series:
            if mon.update(*args):
                break
    assert mons[0].step_reached == s["step_reached"] and mons[0].record()["t_first_pass_ps"] == s["t_reached_ps"]
    r = mons[1].record()
    W = sim.cfg["steady"]["window_ps"]
    assert s["t_first_pass_ps"] == s["t_reached_ps"] and s["hold_windows"] == 0.0
    if r["reached"]:  # the tiny run may end (0.45 ps) before
        assert r["t_reached_ps"] >= s["t_reached_ps"] + W * (1 - 1e-9)
        assert r["t_reached_ps"] - r["t_passing_since_ps"] >= W * (1 - 1e-9)


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
